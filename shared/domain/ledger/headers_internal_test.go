package ledger

import (
	"slices"
	"testing"
)

// A chunk's deltas summed by key keep a key whose deltas cancel out: the
// recount compares it all the same.
func TestSumByKeyKeepsWhatCancelsOut(t *testing.T) {
	got := sumByKey([]CounterDelta{{Key: "b", N: 2}, {Key: "a", N: 1}, {Key: "b", N: 3}, {Key: "a", N: -1}})
	if want := []CounterDelta{{Key: "a", N: 0}, {Key: "b", N: 5}}; !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}
