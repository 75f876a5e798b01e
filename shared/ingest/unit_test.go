package ingest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/ingest"
	"github.com/dlqquarantine/dlqq/shared/memstore"
	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := ingest.Config{Sources: map[string]ingest.SourceConfig{
		"a#b": {DLQ: "d"},
		"ok":  {DLQ: "d", IdempotencyPointer: "event_id", Schema: "no-such-schema", RedriveCap: -1},
		"x":   {},
	}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"TABLE_NAME is required", `"a#b": not a queue name`, "share dlq", "must start with /", "no-such-schema", "redrive_cap", `"x": dlq is required`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := ingest.ParseSources(`{"s":{"dlq":"d","surprise":1}}`); err == nil {
		t.Error("unknown field in SOURCES accepted")
	}
}

// failingStore fails every write of a record whose id contains marker.
type failingStore struct {
	*memstore.Store
	marker string
}

func (f failingStore) Create(ctx context.Context, r *quarantine.Record) error {
	if strings.Contains(r.DLQID, f.marker) {
		return errors.New("injected")
	}
	return f.Store.Create(ctx, r)
}

// On a FIFO DLQ a failure also fails every later message of the same group,
// so the group is redelivered in order; other groups are unaffected.
func TestFIFOFailureFailsTheRestOfItsGroup(t *testing.T) {
	t.Parallel()
	src := &quarantine.Source{Name: "orders.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:orders.fifo", DLQName: "orders-dlq.fifo"}
	q := quarantine.NewQuarantiner(failingStore{memstore.New(), "key-bad"}, nil, nil, quarantine.Config{Sources: map[string]*quarantine.Source{src.Name: src}})
	h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
	msg := func(id, group, key string) events.SQSMessage {
		k := key
		return events.SQSMessage{
			MessageId: id, Body: `{"n":"` + id + `"}`, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo",
			Attributes:        map[string]string{"MessageGroupId": group},
			MessageAttributes: map[string]events.SQSMessageAttribute{"idempotency-key": {DataType: "String", StringValue: &k}},
		}
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a1", "A", "key-1"), msg("b1", "B", "key-2"), msg("a2", "A", "key-bad"), msg("b2", "B", "key-3"), msg("a3", "A", "key-4"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if strings.Join(ids, ",") != "a2,a3" {
		t.Fatalf("failures = %v, want a2,a3", ids)
	}
}
