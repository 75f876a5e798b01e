package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The real bootstrap, configured from the template plus events/ingest-env.json
// (the file for `sam local invoke --env-vars`), serves the sample batch
// through kumo's Runtime API when invoked through the Lambda Invoke API.
func TestBootstrapServesSampleBatch(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	var envFile map[string]map[string]string
	if err := json.Unmarshal(lambdatest.Sample(t, "ingest-env.json"), &envFile); err != nil {
		t.Fatal(err)
	}
	f := lambdatest.ForTest(t, st, "ingest", "IngestFunction", 30*time.Second, "SOURCES="+envFile["IngestFunction"]["SOURCES"],
		"DLQ_ARNS="+envFile["IngestFunction"]["DLQ_ARNS"])
	t.Logf("start-up to first Runtime API poll: %s", f.StartUp)
	payload := lambdatest.Sample(t, "ingest-dlq-batch.json")
	answer := f.MustInvoke(t, payload)
	var resp events.SQSEventResponse
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Fatalf("response %s: %v", answer, err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v\n%s", resp.BatchItemFailures, f.Output())
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	for _, id := range []string{"dlqq-inventory-source#inv-000101", "dlqq-inventory-source#inv-000102", "dlqq-meter-reads#mtr-88213-20261129T09"} {
		r, err := store.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if err := quarantine.Verify(r); err != nil {
			t.Fatal(err)
		}
	}
	// Its log lines are JSON with the request id, and carry no payload value.
	logs := f.Output()
	var ev events.SQSEvent
	_ = json.Unmarshal(payload, &ev)
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if m["message"] == "message quarantined" {
			lines++
			if m["requestId"] == nil || m["requestId"] == "" {
				t.Fatalf("log line without request id: %s", line)
			}
		}
	}
	if lines != len(ev.Records) {
		t.Fatalf("%d outcome lines for %d messages", lines, len(ev.Records))
	}
	for _, r := range ev.Records {
		for _, v := range []string{"LOT-2231", "00409-4888-02", "MTR-88213", "LEGACY-BINARY-FRAME", "inv-000104"} {
			if strings.Contains(r.Body, v) && strings.Contains(logs, v) {
				t.Fatalf("payload value %q in the function's logs", v)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "ingest bootstrap start-up to first poll:", f.StartUp)

	// An S3 notification sent to ingest is a function error, not a batch
	// of "unresolved" records.
	s3ev, err := json.Marshal(events.S3Event{Records: []events.S3EventRecord{{EventSource: "aws:s3", AWSRegion: "us-east-1", EventName: "ObjectCreated:Put",
		S3: events.S3Entity{Bucket: events.S3Bucket{Name: "dlqq-archive"}, Object: events.S3Object{Key: "archive/x.json"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Invoke(ctx, s3ev)
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError == nil || !strings.Contains(string(out.Payload), "not an SQS batch") {
		t.Fatalf("an S3 notification was taken: %s", out.Payload)
	}
}

// With the template's own environment (DLQ_ARNS: the stack's DLQ), the
// bootstrap refuses the sample batch, whose records come from other queues:
// a mapping someone points at ingest from a queue of their own seals
// nothing (issue 26 review).
func TestBootstrapRefusesABatchFromAnotherQueue(t *testing.T) {
	st := embedded.ForTest(t, embedded.Options{})
	f := lambdatest.ForTest(t, st, "ingest", "IngestFunction", 30*time.Second)
	out, err := f.Invoke(context.Background(), lambdatest.Sample(t, "ingest-dlq-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError == nil || !strings.Contains(string(out.Payload), "not a configured DLQ") {
		t.Fatalf("answer %s (function error %v), want the batch refused", out.Payload, out.FunctionError)
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	if _, err := store.Get(context.Background(), "dlqq-inventory-source#inv-000101"); err == nil {
		t.Fatal("a record of the refused batch was written")
	}
}
