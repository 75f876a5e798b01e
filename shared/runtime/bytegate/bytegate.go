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

// Gate lets at most its capacity in bytes through at once; a claim larger
// than the capacity waits for the gate to be empty and goes through alone,
// so every claim goes through, one at a time if it must.
type Gate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	capacity int64
	used     int64
}

// New returns a gate of capacity bytes (at least 1).
func New(capacity int64) *Gate {
	g := &Gate{capacity: max(capacity, 1)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Acquire waits until n bytes fit and returns the function that gives them
// back (call it once). A nil gate lets everything through.
func (g *Gate) Acquire(n int64) (release func()) {
	if g == nil {
		return func() {}
	}
	n = min(max(n, 1), g.capacity)
	g.mu.Lock()
	for g.used+n > g.capacity {
		g.cond.Wait()
	}
	g.used += n
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.used -= n
		g.mu.Unlock()
		g.cond.Broadcast()
	}
}
