package heappeak

import (
	"runtime"
	"testing"
)

var sink [][]byte

// A function that holds 64 MiB at once through a collection measures at
// least that in both samples, and one that holds nothing far less.
func TestMeasureSeesWhatIsHeld(t *testing.T) {
	held := Measure(func() {
		for range 64 {
			sink = append(sink, make([]byte, 1<<20))
		}
		runtime.GC() // the live sample is taken at collections
		sink = nil
	})
	if held.Objects < 64<<20 || held.Live < 64<<20 {
		t.Fatalf("64 MiB held measured as %+v", held)
	}
	idle := Measure(func() {})
	if idle.Objects > 8<<20 || idle.Live > 8<<20 {
		t.Fatalf("nothing held measured as %+v", idle)
	}
}
