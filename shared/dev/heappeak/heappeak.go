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

// The runtime's samples: the heap's objects, live and not yet swept (what
// the process holds, garbage included, so it depends on GOGC), and the
// live heap as the last collection marked it (what the code keeps
// reachable, whatever GOGC).
const (
	objects = "/memory/classes/heap/objects:bytes"
	live    = "/gc/heap/live:bytes"
)

// Peak is the most each sample reached while the code ran, above what it
// was when the code started (after a collection), in bytes.
type Peak struct {
	// Objects is the most heap in objects, reachable or not yet swept:
	// the code's working set at the process's GOGC.
	Objects uint64
	// Live is the most live heap a collection found: what the code keeps
	// reachable at once, a lower bound of the peak (it is seen at the
	// collections only).
	Live uint64
}

// Measure runs f and returns the most it held, sampled every
// millisecond: lower bounds of the true peaks, close to them for code
// that runs for seconds.
func Measure(f func()) Peak {
	runtime.GC()
	baseObj, baseLive := read()
	stop, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	mostObj, mostLive := baseObj, baseLive
	sample := func() {
		o, l := read()
		mu.Lock()
		mostObj, mostLive = max(mostObj, o), max(mostLive, l)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	f()
	sample()
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	return Peak{Objects: above(mostObj, baseObj), Live: above(mostLive, baseLive)}
}

func above(v, base uint64) uint64 {
	if v < base {
		return 0
	}
	return v - base
}

func read() (objectBytes, liveBytes uint64) {
	s := []metrics.Sample{{Name: objects}, {Name: live}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		objectBytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		liveBytes = s[1].Value.Uint64()
	}
	return objectBytes, liveBytes
}
