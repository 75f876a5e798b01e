// Package bytegate bounds how many bytes of work run at once: the bodies
// a function decodes and checks against their schemas, whose decoded trees
// take about ten times their size in memory.
package bytegate

import "sync"

// DecodeBudget is how many bytes of bodies a function decodes and checks
// against their schemas at once (ingest's Quarantiner, redrive's claims).
// A body's decoded tree takes about ten times its size in memory (a 1 MiB
// body of small JSON values: about 30 MiB allocated while it is decoded
// and checked). Ten 1 MiB bodies decoded together took ingest to a peak
// of 290 MiB, past its 256 MB; one at a time, 133 to 153 MiB
// (BenchmarkPeakMemory). Four bodies of 256 KiB, and any number of small
// ones, still decode together.
const DecodeBudget = 1 << 20

// Gate lets at most its capacity in bytes through at once, first come
// first served: a claim waits while an earlier one waits, so a large
// claim is never overtaken for ever by small ones. A claim larger than
// the capacity goes through alone, so every claim goes through.
type Gate struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	waiting  []*waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

// New returns a gate of capacity bytes (at least 1).
func New(capacity int64) *Gate {
	return &Gate{capacity: max(capacity, 1)}
}

// Acquire waits until n bytes fit, after every earlier claim, and returns
// the function that gives them back (a second call does nothing). A nil
// gate lets everything through.
func (g *Gate) Acquire(n int64) (release func()) {
	if g == nil {
		return func() {}
	}
	n = min(max(n, 1), g.capacity)
	g.mu.Lock()
	if len(g.waiting) == 0 && g.used+n <= g.capacity {
		g.used += n
		g.mu.Unlock()
	} else {
		w := &waiter{n: n, ready: make(chan struct{})}
		g.waiting = append(g.waiting, w)
		g.mu.Unlock()
		<-w.ready
	}
	var once sync.Once
	return func() { once.Do(func() { g.release(n) }) }
}

// release gives n bytes back and lets the waiting claims through, in
// order, while the first fits.
func (g *Gate) release(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= n
	for len(g.waiting) > 0 && g.used+g.waiting[0].n <= g.capacity {
		w := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.used += w.n
		close(w.ready)
	}
}
