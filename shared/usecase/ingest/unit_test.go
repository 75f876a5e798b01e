package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
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
	store := memstore.New()
	q := ingest.NewQuarantiner(failingStore{store, "key-bad"}, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
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
	// a3 is not stored before a2 is: the group stops at its failure, so
	// the redelivered group is recorded in its order.
	for key, stored := range map[string]bool{"key-1": true, "key-2": true, "key-3": true, "key-4": false} {
		if _, err := store.Get(context.Background(), "orders.fifo#"+key); (err == nil) != stored {
			t.Errorf("%s stored: %v, want %v", key, err == nil, stored)
		}
	}
}

// Ingest takes only SQS batches: a redrive request, an S3 notification or
// anything else sent to it is a function error, and nothing is written (no
// record, no counter, no metric). The sample batch is still taken.
func TestRefusesEventsThatAreNotSQSBatches(t *testing.T) {
	t.Parallel()
	redriveRequest, err := os.ReadFile("../../../events/redrive-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := json.Marshal(events.S3Event{Records: []events.S3EventRecord{{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: "us-east-1", EventName: "ObjectCreated:Put",
		S3: events.S3Entity{Bucket: events.S3Bucket{Name: "dlqq-archive", Arn: "arn:aws:s3:::dlqq-archive"}, Object: events.S3Object{Key: "archive/x/v1.json", Size: 10}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	sqsRecord := func(edit func(m map[string]any)) []byte {
		m := map[string]any{"messageId": "m1", "body": "{}", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:orders-dlq", "awsRegion": "us-east-1"}
		edit(m)
		raw, _ := json.Marshal(map[string]any{"Records": []any{m}})
		return raw
	}
	refused := map[string][]byte{
		"redrive request": redriveRequest,
		"S3 notification": s3,
		"empty object":    []byte(`{}`),
		"no records":      []byte(`{"Records":[]}`),
		"not an object":   []byte(`"Records"`),
		"no messageId":    sqsRecord(func(m map[string]any) { delete(m, "messageId") }),
		"SNS source":      sqsRecord(func(m map[string]any) { m["eventSource"] = "aws:sns" }),
		"not a queue ARN": sqsRecord(func(m map[string]any) { m["eventSourceARN"] = "arn:aws:sns:us-east-1:000000000000:orders" }),
		"no ARN":          sqsRecord(func(m map[string]any) { delete(m, "eventSourceARN") }),
	}
	for name, raw := range refused {
		t.Run(name, func(t *testing.T) {
			store := memstore.New()
			var metrics bytes.Buffer
			q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
			h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), &metrics, nil, 10)
			if resp, err := h.HandleRaw(context.Background(), raw); !errors.Is(err, ingest.ErrNotSQSBatch) || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("HandleRaw = %+v, %v; want ErrNotSQSBatch", resp, err)
			}
			// The typed entry point (the local runner's) refuses it too.
			var ev events.SQSEvent
			if json.Unmarshal(raw, &ev) == nil {
				if _, err := h.Handle(context.Background(), ev); err == nil {
					t.Fatal("Handle took it")
				}
			}
			if n := len(store.All()); n != 0 || metrics.Len() != 0 {
				t.Fatalf("%d records and %d bytes of metrics written", n, metrics.Len())
			}
		})
	}
	t.Run("sample batch", func(t *testing.T) {
		raw, err := os.ReadFile("../../../events/ingest-dlq-batch.json")
		if err != nil {
			t.Fatal(err)
		}
		store := memstore.New()
		q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
		h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
		resp, err := h.HandleRaw(context.Background(), raw)
		if err != nil || len(resp.BatchItemFailures) != 0 || len(store.All()) != 6 {
			t.Fatalf("sample batch: %+v %v, %d records", resp, err, len(store.All()))
		}
	})
}

// Within a FIFO message group, messages are stored in batch (DLQ) order:
// each one's first_seen is strictly after the previous one's, even when
// the clock does not move between them, and the SQS sequence number is
// kept for redrive to replay them in that order.
func TestFIFOGroupsAreStoredInBatchOrder(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) // never advanced: one clock tick
	src := &quarantine.Source{Name: "orders.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:orders.fifo", DLQName: "orders-dlq.fifo"}
	q := ingest.NewQuarantiner(store, nil, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
	h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
	var batch []events.SQSMessage
	seq := map[string]string{}
	for i, g := range []string{"A", "B", "A", "A", "B", "C", "A", "B", "C", "A"} {
		id := fmt.Sprintf("m%d", i)
		k := "key-" + id
		seq[k] = fmt.Sprintf("1844674407370955161%d", 5+i) // beyond uint64, increasing
		batch = append(batch, events.SQSMessage{
			MessageId: id, Body: `{"n":"` + id + `"}`, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo",
			Attributes:        map[string]string{"MessageGroupId": g, "SequenceNumber": seq[k]},
			MessageAttributes: map[string]events.SQSMessageAttribute{"idempotency-key": {DataType: "String", StringValue: &k}},
		})
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: batch})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	last := map[string]*quarantine.Record{}
	for _, m := range batch {
		r, err := store.Get(context.Background(), "orders.fifo#key-"+m.MessageId)
		if err != nil {
			t.Fatal(err)
		}
		if r.SequenceNumber != m.Attributes["SequenceNumber"] || r.MessageGroupID != m.Attributes["MessageGroupId"] {
			t.Fatalf("%s: sequence %q group %q", m.MessageId, r.SequenceNumber, r.MessageGroupID)
		}
		if p := last[r.MessageGroupID]; p != nil {
			if !p.FirstSeen.Before(r.FirstSeen.Time) {
				t.Fatalf("group %s: %s first_seen %s not after %s's %s", r.MessageGroupID, m.MessageId, r.FirstSeen, p.DLQID, p.FirstSeen)
			}
			if quarantine.CompareFIFO(p, r) >= 0 {
				t.Fatalf("group %s: %s does not sort after %s", r.MessageGroupID, r.DLQID, p.DLQID)
			}
		}
		last[r.MessageGroupID] = r
	}
}
