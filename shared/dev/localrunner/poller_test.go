package localrunner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// The runner honours partial batch failures and visibility: a stored item is
// deleted and never seen again; a failed item comes back after the
// visibility timeout, with a higher receive count.
func TestPartialBatchFailuresAndVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"DLQVisibilityTimeoutSeconds": 1}})
	m, err := localrunner.MappingFromTemplate(st.Template, "IngestDLQMapping", st.QueueURLs["DeadLetterQueue"], st.QueueARNs["DeadLetterQueue"], st.AWS.Region)
	if err != nil {
		t.Fatal(err)
	}
	if m.BatchSize != 10 || !m.ReportBatchItemFailures || m.Window != time.Second {
		t.Fatalf("mapping from template = %+v", m)
	}
	m.Window = 200 * time.Millisecond
	for _, body := range []string{"keep", "fail-once", "err-batch"} {
		if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.QueueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string][]string{} // body → receive counts seen
	failedOnce := false
	p := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: m, Handler: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			seen[r.Body] = append(seen[r.Body], r.Attributes["ApproximateReceiveCount"])
			if r.EventSourceARN != m.QueueARN || r.EventSource != "aws:sqs" {
				t.Errorf("event record %+v", r)
			}
			if r.Body == "fail-once" && !failedOnce {
				failedOnce = true
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
			if r.Body == "err-batch" && len(seen["err-batch"]) == 1 {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: "not-in-this-batch"})
			}
		}
		return resp, nil
	}}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := p.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		done := len(seen["fail-once"]) == 2 && len(seen["keep"]) >= 2 && len(seen["err-batch"]) >= 2
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Drain whatever is left, then check nothing else comes back.
	time.Sleep(1500 * time.Millisecond)
	for range 3 {
		if _, err := p.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// An unknown id fails the whole first batch, so keep and err-batch are
	// seen twice; fail-once is seen again with receive count 2; after their
	// successful second delivery none of them comes back.
	if len(seen["fail-once"]) != 2 || seen["fail-once"][1] != "2" {
		t.Fatalf("fail-once receives %v", seen["fail-once"])
	}
	if len(seen["keep"]) != 2 || len(seen["err-batch"]) != 2 {
		t.Fatalf("keep %v, err-batch %v", seen["keep"], seen["err-batch"])
	}
}

// The local stack's pollers feed ingest from every DLQ the template maps:
// the stack's DLQ, which the example source and an attached existing queue
// share, the attached FIFO DLQ, and the stack's FIFO DLQ
// (TestFIFOSourcesShareTheStacksFIFODLQ sends through it). Each message SQS dead-lettered reaches
// the handler from its DLQ, naming its own source queue.
func TestIngestMappingsFeedEveryDLQWithEachMessagesSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.WithLocalSources(embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 1, "SourceVisibilityTimeoutSeconds": 1}}))
	ms, err := localrunner.IngestMappings(st)
	if err != nil {
		t.Fatal(err)
	}
	fifoDLQ, fifo, shared := st.Env.StackName+"-"+embedded.FIFODLQ, st.Env.StackName+"-"+embedded.FIFOSource, st.Env.StackName+"-"+embedded.SharedSource
	if len(ms) != 3 || ms[0].QueueARN != st.QueueARNs["DeadLetterQueue"] || ms[1].QueueARN != st.QueueARNs[fifoDLQ] || ms[1].QueueURL != st.QueueURLs[fifoDLQ] || ms[1].Window != 0 ||
		ms[2].QueueARN != st.QueueARNs["FifoDeadLetterQueue"] || ms[2].Window != 0 {
		t.Fatalf("ingest mappings %+v", ms)
	}
	want := map[string]struct{ dlq, source string }{}
	for _, q := range []string{"SourceQueue", shared, fifo} {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURLs[q]), MessageBody: aws.String("from " + q)}
		if q == fifo {
			in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("d")
		}
		if _, err := st.Clients.SQS.SendMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
		dlq := ms[0].QueueARN
		if q == fifo {
			dlq = ms[1].QueueARN
		}
		want["from "+q] = struct{ dlq, source string }{dlq, st.QueueARNs[q]}
	}
	var mu sync.Mutex
	got := map[string]struct{ dlq, source string }{}
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			got[r.Body] = struct{ dlq, source string }{r.EventSourceARN, r.Attributes["DeadLetterQueueSourceArn"]}
		}
		return events.SQSEventResponse{}, nil
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// Each source's consumer fails what it receives; the next receive
		// after the visibility timeout moves it.
		for _, q := range []string{"SourceQueue", shared, fifo} {
			if _, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs[q])}); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range ms {
			p := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: m, Handler: handler}
			if _, err := p.PollOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == len(want) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for body, w := range want {
		if got[body] != w {
			t.Errorf("%q reached ingest from %+v, want %+v", body, got[body], w)
		}
	}
}
