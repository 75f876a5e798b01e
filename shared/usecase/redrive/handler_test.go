package redrive_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// brokenStore fails reads with an error that names the record, as the
// DynamoDB adapter's errors do.
type brokenStore struct{ *memstore.Store }

func (b brokenStore) Get(_ context.Context, id string) (*quarantine.Record, error) {
	return nil, errors.New("get " + id + ": connection reset")
}

func (b brokenStore) GetMany(_ context.Context, ids []string) (map[string]*quarantine.Record, error) {
	return nil, errors.New("batch get " + strings.Join(ids, ",") + ": connection reset")
}

// The runtime logs a function error's text: an operational error reaches it
// by kind only, never naming a record (whose id embeds the idempotency key).
func TestLambdaErrorsNameNoRecord(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	src := &quarantine.Source{Name: "orders", ARN: "arn:aws:sqs:us-east-1:000000000000:orders", IdempotencyPointer: "/k", RedriveCap: 3}
	q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"orders": src}})
	if _, err := q.Quarantine(context.Background(), ingest.Message{MessageID: "m", SourceARN: src.ARN, Body: []byte(`{"k":"SECRET-KEY-42"}`)}); err != nil {
		t.Fatal(err)
	}
	svc := redrive.New(brokenStore{store}, store, nil, nil, map[string]*quarantine.Source{"orders": src}, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{})
	_, err := svc.LambdaHandler(context.Background(), []byte(`{"source":"orders","requested_by":"me","ids":["orders#SECRET-KEY-42"]}`))
	if err == nil || strings.Contains(err.Error(), "SECRET-KEY") {
		t.Fatalf("function error %v", err)
	}
	_, err = svc.LambdaHandler(context.Background(), []byte(`{"source":"orders","requested_by":"me","ids":["SECRET-KEY-42"]}`))
	if err == nil || strings.Contains(err.Error(), "SECRET-KEY") || !strings.Contains(err.Error(), "ids[0]") {
		t.Fatalf("request error %v", err)
	}
}
