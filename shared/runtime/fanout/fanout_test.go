package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRunRunsEveryTaskWithinTheLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, limit, bound int }{
		{0, 4, 0}, {1, 4, 1}, {10, 3, 3}, {10, 1, 1}, {5, 0, 1}, {5, -2, 1}, {3, 10, 3},
	} {
		t.Run(fmt.Sprintf("n=%d,limit=%d", tc.n, tc.limit), func(t *testing.T) {
			t.Parallel()
			var running, peak atomic.Int64
			var mu sync.Mutex
			ran := map[int]int{}
			errs := Run(context.Background(), tc.n, tc.limit, func(_ context.Context, i int) error {
				now := running.Add(1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				defer running.Add(-1)
				mu.Lock()
				ran[i]++
				mu.Unlock()
				if i%2 == 1 {
					return fmt.Errorf("task %d", i)
				}
				return nil
			})
			if len(errs) != tc.n || len(ran) != tc.n {
				t.Fatalf("%d errors, %d tasks ran; want %d", len(errs), len(ran), tc.n)
			}
			for i := range tc.n {
				if ran[i] != 1 {
					t.Fatalf("task %d ran %d times", i, ran[i])
				}
				if want := i%2 == 1; (errs[i] != nil) != want || (want && errs[i].Error() != fmt.Sprintf("task %d", i)) {
					t.Fatalf("errs[%d] = %v", i, errs[i])
				}
			}
			if p := peak.Load(); p > int64(tc.bound) {
				t.Fatalf("%d ran at once, limit %d", p, tc.bound)
			}
		})
	}
}

// The limit is reached: with limit tasks blocked, no further one starts
// until one of them returns.
func TestRunHoldsTasksBackAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 3
	started := make(chan int, 10)
	release := make(chan struct{})
	done := make(chan []error)
	go func() {
		done <- Run(context.Background(), 5, limit, func(_ context.Context, i int) error {
			started <- i
			<-release
			return nil
		})
	}()
	for range limit {
		<-started
	}
	select {
	case i := <-started:
		t.Fatalf("task %d started while %d were running", i, limit)
	default:
	}
	close(release)
	errs := <-done
	if len(started) != 2 {
		t.Fatalf("%d more tasks started after the release, want 2", len(started))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("errs[%d] = %v", i, err)
		}
	}
}

func TestRunStartsNothingMoreOnceTheContextIsDone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Int64
	errs := Run(ctx, 6, 1, func(ctx context.Context, i int) error {
		ran.Add(1)
		if i == 1 {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	if ran.Load() != 2 {
		t.Fatalf("%d tasks ran, want 2", ran.Load())
	}
	if errs[0] != nil {
		t.Fatalf("errs[0] = %v", errs[0])
	}
	for i := 1; i < 6; i++ {
		if !errors.Is(errs[i], context.Canceled) {
			t.Fatalf("errs[%d] = %v, want context.Canceled", i, errs[i])
		}
	}

	done, stop := context.WithCancel(context.Background())
	stop()
	errs = Run(done, 3, 2, func(context.Context, int) error { t.Error("a task started on a done context"); return nil })
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("errs[%d] = %v", i, err)
		}
	}
	// WithoutCancel runs every task whatever the context.
	ran.Store(0)
	Run(context.WithoutCancel(done), 3, 2, func(context.Context, int) error { ran.Add(1); return nil })
	if ran.Load() != 3 {
		t.Fatalf("%d tasks ran under WithoutCancel, want 3", ran.Load())
	}
}
