package heappeak

import "testing"

var sink [][]byte

// A function that holds 64 MiB at once measures at least that, and one
// that holds nothing measures far less.
func TestMeasureSeesWhatIsHeld(t *testing.T) {
	held := Measure(func() {
		for range 64 {
			sink = append(sink, make([]byte, 1<<20))
		}
		sink = nil
	})
	if held < 64<<20 {
		t.Fatalf("64 MiB held measured as %d bytes", held)
	}
	idle := Measure(func() {})
	if idle > 8<<20 {
		t.Fatalf("nothing held measured as %d bytes", idle)
	}
}
