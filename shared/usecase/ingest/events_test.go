package ingest_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// The sample batch in events/ (the one for `sam local invoke` and the
// console) decodes into the aws-lambda-go type and drives the real handler.
func TestSampleDLQBatch(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../events/ingest-dlq-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.Records {
		payloads.Store(r.Body, true) // no body may reach a log line
	}
	cfg := ingest.Config{
		TableName:     stack.Names["QuarantineTable"],
		PayloadBucket: stack.Names["PayloadBucket"],
		Sources: map[string]ingest.SourceConfig{
			"dlqq-inventory-source": {ARN: "arn:aws:sqs:us-east-1:123456789012:dlqq-inventory-source", DLQ: "dlqq-inventory-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
			"dlqq-meter-reads":      {ARN: "arn:aws:sqs:us-east-1:123456789012:dlqq-meter-reads", DLQ: "dlqq-meter-reads-dlq"},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := wire.Ingest(context.Background(), cfg, wire.From(stack.Clients), wire.Runtime{Log: testLogger(), Metrics: &logs})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.HandleRaw(context.Background(), raw) // as the Lambda runtime passes it
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	store := dynamostore.New(stack.Clients.DynamoDB, cfg.TableName)
	src := &quarantine.Source{ARN: "arn:aws:sqs:us-east-1:123456789012:dlqq-inventory-source"}
	notJSON := quarantine.BodyHashKey(src.ARN, []byte(ev.Records[3].Body))
	replaced := quarantine.BodyHashKey(src.ARN, []byte(ev.Records[4].Body))
	want := []struct {
		id       string
		class    quarantine.Class
		sig      string
		attempts int
	}{
		{"dlqq-inventory-source#inv-000101", quarantine.ClassExhausted, "consumer|retries exhausted|v#", 1},
		{"dlqq-inventory-source#inv-000102", quarantine.ClassValidation, "gate|schema /ndc pattern|v#", 1},
		{"dlqq-inventory-source#inv-000103", quarantine.ClassValidation, "allocation|lot under recall|v#", 1},
		{"dlqq-inventory-source#" + notJSON, quarantine.ClassValidation, "gate|body is not json|v#", 1},
		{"dlqq-inventory-source#" + replaced, quarantine.ClassValidation, "gate|body is not json|v#", 1},
		{"dlqq-meter-reads#mtr-88213-20261129T09", quarantine.ClassExhausted, "consumer|retries exhausted|", 1},
	}
	for _, w := range want {
		r, err := store.Get(context.Background(), w.id)
		if err != nil {
			t.Fatalf("%s: %v", w.id, err)
		}
		if err := quarantine.Verify(r); err != nil {
			t.Fatal(err)
		}
		if r.FailureClass != w.class || r.FailureSignature != w.sig || r.AttemptCount != w.attempts {
			t.Errorf("%s: class %s sig %q attempts %d; want %s %q %d", w.id, r.FailureClass, r.FailureSignature, r.AttemptCount, w.class, w.sig, w.attempts)
		}
	}
	first, _ := store.Get(context.Background(), want[0].id)
	if first.TraceHeader == "" || first.SourceARN == "" || first.ReceiveCount != 5 || first.SentTimestamp != 1764410400000 {
		t.Errorf("enrichment missing: %+v", first)
	}
	meter, _ := store.Get(context.Background(), want[5].id)
	if meter.KeyOrigin != quarantine.KeyFromAttribute || len(meter.Attributes["signature"].BinaryValue) != 4 {
		t.Errorf("meter record: origin %s attrs %+v", meter.KeyOrigin, meter.Attributes)
	}
}
