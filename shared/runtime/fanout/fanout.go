// Package fanout runs a known number of tasks with a bound on how many run
// at once: the one bounded fan-out of the functions and their tools.
package fanout

import (
	"context"
	"sync"
)

// Run calls f(ctx, i) for every i in [0, n), at most limit at once (a limit
// below 1 counts as 1), starting them in index order, and returns when all
// it started have returned. errs[i] is what f returned for i.
//
// Once ctx is done, tasks not yet started are not started and their error
// is ctx.Err(); tasks already running are not interrupted (f sees ctx). A
// caller whose every task must run, whatever happens to ctx (each task
// records an outcome that must not be left out), passes
// context.WithoutCancel(ctx).
func Run(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) (errs []error) {
	errs = make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				errs[j] = ctx.Err()
			}
			return errs
		}
		if err := ctx.Err(); err != nil { // both were ready: do not start
			<-sem
			for j := i; j < n; j++ {
				errs[j] = err
			}
			return errs
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(ctx, i)
		})
	}
	return errs
}
