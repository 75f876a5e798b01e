package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// This test lives here, not in localrunner, because it needs kumo's
// Runtime API, which LocalStack (make test-localstack runs ./shared/...)
// does not serve.

// serveRuntime is a function behind kumo's Runtime API, in the test's
// process: it answers each invocation with handle's payload, or with a
// function error when handle returns nil, until ctx is done.
func serveRuntime(ctx context.Context, t *testing.T, endpoint, name string, handle func([]byte) []byte) {
	base := endpoint + "/_runtime/" + name + "/2018-06-01/runtime/invocation/"
	go func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"next", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
			out, path := handle(body), base+id+"/response"
			if out == nil {
				out, path = []byte(`{"errorType":"Crash","errorMessage":"the test's function failed"}`), base+id+"/error"
			}
			r, err := http.Post(path, "application/json", bytes.NewReader(out))
			if err != nil {
				t.Errorf("post %s: %v", path, err)
				return
			}
			r.Body.Close()
		}
	}()
}

// The DLQ poller delivers its batches by Lambda Invoke and honours what the
// function answers: the items of its partial batch response come back,
// with a higher receive count, and nothing else; a function error leaves
// the whole batch.
func TestPollerInvokesThroughTheLambdaAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"DLQVisibilityTimeoutSeconds": 1}})
	m, err := localrunner.MappingFromTemplate(st.Template, "IngestDLQMapping", st.QueueURLs["DeadLetterQueue"], st.QueueARNs["DeadLetterQueue"], st.AWS.Region)
	if err != nil {
		t.Fatal(err)
	}
	m.Window = 200 * time.Millisecond
	name := embedded.RandomName("ingest")
	if err := lambdatest.Create(ctx, st, lambdatest.Spec{Name: name, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{} // body → receive counts
	crashed := false
	serveRuntime(ctx, t, st.Endpoint, name, func(raw []byte) []byte {
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("event %s: %v", raw, err)
		}
		mu.Lock()
		defer mu.Unlock()
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			seen[r.Body] = append(seen[r.Body], r.Attributes["ApproximateReceiveCount"])
			if r.EventSourceARN != m.QueueARN || r.EventSource != "aws:sqs" || r.AWSRegion != st.AWS.Region {
				t.Errorf("event record %+v", r)
			}
			if strings.HasPrefix(r.Body, "fail") && len(seen[r.Body]) == 1 {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		if len(ev.Records) > 0 && ev.Records[0].Body == "crash" && !crashed {
			crashed = true
			return nil
		}
		out, _ := json.Marshal(resp)
		return out
	})
	// kumo refuses an invocation until the function has polled once.
	api := lambda.NewFromConfig(st.AWS)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := localrunner.Invoke(ctx, api, name, []byte(`{"Records":[]}`)); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	send := func(bodies ...string) {
		for _, b := range bodies {
			if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.QueueURL), MessageBody: aws.String(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: m, Handler: localrunner.InvokeSQS(api, name)}
	drain := func(until func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !until() {
			if time.Now().After(deadline) {
				t.Fatalf("seen %v", seen)
			}
			_, _ = p.PollOnce(ctx)
			time.Sleep(100 * time.Millisecond)
		}
		// Past the visibility timeout, nothing else comes back.
		time.Sleep(1500 * time.Millisecond)
		for range 3 {
			_, _ = p.PollOnce(ctx)
		}
	}
	count := func(b string) int { mu.Lock(); defer mu.Unlock(); return len(seen[b]) }

	send("ok-1", "fail-1", "ok-2", "fail-2")
	drain(func() bool { return count("fail-1") == 2 && count("fail-2") == 2 })
	mu.Lock()
	for _, b := range []string{"fail-1", "fail-2"} {
		if len(seen[b]) != 2 || seen[b][1] != "2" {
			t.Errorf("%s receives %v, want 2 (the second with receive count 2)", b, seen[b])
		}
	}
	for _, b := range []string{"ok-1", "ok-2"} {
		if len(seen[b]) != 1 {
			t.Errorf("%s receives %v, want 1", b, seen[b])
		}
	}
	mu.Unlock()

	send("crash")
	drain(func() bool { return count("crash") == 2 })
	if n := count("crash"); n != 2 {
		t.Errorf("crash delivered %d times, want 2 (the function error left it for redelivery)", n)
	}
	if s := p.Stats(); s.Failed != 3 || s.Deleted != 5 {
		t.Errorf("stats %+v, want 3 failed (two items, one errored batch) and 5 deleted (each once)", s)
	}
}
