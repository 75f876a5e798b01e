// Package heappeak measures the most Go heap a piece of code holds while
// it runs: a benchmark's figure for code that runs in the test's own
// process (RSS would count the emulators beside it).
package heappeak

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// sample is the heap's objects, live and not yet swept.
const sample = "/memory/classes/heap/objects:bytes"

// Measure runs f and returns the most heap in objects seen while it ran
// above what the heap held when it started (after a collection), sampled
// every millisecond: a lower bound of the true peak, close to it for code
// that runs for seconds.
func Measure(f func()) (peak uint64) {
	runtime.GC()
	base := read()
	stop, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	most := base
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v := read(); v > most {
					mu.Lock()
					most = v
					mu.Unlock()
				}
			}
		}
	}()
	f()
	if v := read(); v > most {
		most = v
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if most < base {
		return 0
	}
	return most - base
}

func read() uint64 {
	s := []metrics.Sample{{Name: sample}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
