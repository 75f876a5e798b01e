package bytegate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The gate never lets more than its capacity through at once, lets a
// claim larger than its capacity through alone, and lets everyone through
// in the end.
func TestByteGateBoundsWhatIsDecodedAtOnce(t *testing.T) {
	g := New(100)
	var used, peak, alone, done atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			n := int64(10 + i%5*20) // 10 to 90 bytes
			if i%10 == 0 {
				n = 500 // larger than the gate
			}
			release := g.Acquire(n)
			now := used.Add(min(n, 100))
			if n > 100 && now != 100 {
				t.Errorf("a claim of %d went through beside others (%d in use)", n, now)
			}
			if n > 100 {
				alone.Add(1)
			}
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			used.Add(-min(n, 100))
			release()
			done.Add(1)
		})
	}
	wg.Wait()
	if peak.Load() > 100 || done.Load() != 40 || alone.Load() != 4 {
		t.Fatalf("peak %d (capacity 100), %d of 40 through, %d large alone", peak.Load(), done.Load(), alone.Load())
	}
}
