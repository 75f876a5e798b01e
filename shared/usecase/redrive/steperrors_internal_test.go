package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

type throttled struct{}

func (throttled) Error() string     { return "rate exceeded" }
func (throttled) ErrorCode() string { return "ThrottlingException" }

// A run keeps at most maxStepErrors step errors, and the worst of them
// always among them: an outage after a full list of lost races still
// names the run's error kind (a refusal must not hide it).
func TestStepErrorsKeepTheWorst(t *testing.T) {
	t.Parallel()
	r := &run{s: &Service{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, rep: &Report{RunID: "r"}}
	ctx := context.Background()
	for i := range maxStepErrors + 1 {
		r.failLater(ctx, fmt.Sprint("id", i), "mark", quarantine.ErrVersionConflict)
	}
	r.failLater(ctx, "idx", "send", throttled{})
	for i := range 3 {
		r.failLater(ctx, fmt.Sprint("late", i), "mark", quarantine.ErrVersionConflict)
	}
	if len(r.errs) != maxStepErrors {
		t.Fatalf("%d step errors kept, want %d", len(r.errs), maxStepErrors)
	}
	if got := quarantine.ErrorKind(errors.Join(r.errs...)); got != "aws:ThrottlingException" {
		t.Errorf("the run's error kind is %q after 21 conflicts, a throttle and 3 conflicts; want the throttle", got)
	}
}
