package ingest

import "sync"

// DefaultDecodeBudget is how many bytes of bodies one Quarantiner decodes
// and checks against their schemas at once (QuarantinerConfig.DecodeBudget).
// A body's decoded tree takes about ten times its size in memory (a
// 1 MiB body of small JSON values: about 30 MiB allocated while it is
// decoded and checked). Ten 1 MiB bodies decoded together took ingest to
// a peak of 290 MiB, past its 256 MB; one at a time, 133 to 146 MiB
// (BenchmarkPeakMemory). Four bodies of 256 KiB, and any number of small
// ones, still decode together.
const DefaultDecodeBudget = 1 << 20

// byteGate lets at most capacity bytes through at once; a claim larger
// than capacity waits for the gate to be empty and goes through alone, so
// every body is decoded, one at a time if it must be.
type byteGate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	capacity int64
	used     int64
}

func newByteGate(capacity int64) *byteGate {
	g := &byteGate{capacity: capacity}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// acquire waits until n bytes fit and returns the function that gives
// them back (call it once).
func (g *byteGate) acquire(n int64) (release func()) {
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
