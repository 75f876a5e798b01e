package quarantine

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff sleeps before retry attempt (0 for the first retry) with full
// jitter: up to first doubled per attempt, at most most, plus a
// millisecond. It returns early with the context's error.
func Backoff(ctx context.Context, attempt int, first, most time.Duration) error {
	limit := min(first<<min(attempt, 16), most)
	return Sleep(ctx, rand.N(limit)+time.Millisecond)
}

// Sleep waits d, or until ctx ends and then returns the context's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
