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

// Claims go through in the order they came: a large claim waiting for the
// gate to empty is not overtaken by a small one that came after it, and a
// nil gate lets everything through.
func TestByteGateIsFirstComeFirstServed(t *testing.T) {
	g := New(100)
	hold := g.Acquire(60)
	order := make(chan string, 2)
	large := make(chan func())
	go func() {
		r := g.Acquire(100)
		order <- "large"
		large <- r
	}()
	waiting(g, 1) // the large claim waits
	small := make(chan func())
	go func() {
		r := g.Acquire(10) // would fit beside the 60 held, but comes second
		order <- "small"
		small <- r
	}()
	waiting(g, 2)
	hold()
	hold() // a second release gives nothing back twice
	if first := <-order; first != "large" {
		t.Fatalf("%s went first", first)
	}
	(<-large)()
	if second := <-order; second != "small" {
		t.Fatalf("%s went second", second)
	}
	(<-small)()
	if g.used != 0 || len(g.waiting) != 0 {
		t.Fatalf("used %d, %d waiting after every release", g.used, len(g.waiting))
	}
	var none *Gate
	none.Acquire(1 << 40)()
}

// waiting returns once n claims wait at g.
func waiting(g *Gate, n int) {
	for {
		g.mu.Lock()
		k := len(g.waiting)
		g.mu.Unlock()
		if k == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
