package quarantine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Sleep and Backoff return the context's error once it has ended, and nil
// after a sleep that ran out.
func TestSleepEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := quarantine.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
	if err := quarantine.Backoff(ctx, 3, time.Hour, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Backoff on an ended context = %v, want context.Canceled", err)
	}
	if err := quarantine.Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}
