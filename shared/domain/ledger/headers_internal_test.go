package ledger

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
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

// parseAhead gives the segments in their order, reads no further ahead
// than its ring, and stops its goroutines on stop, after a read that
// failed as after the last.
func TestParseAheadInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(maxParsers))
	raw := func(i int) []byte { return fmt.Appendf(nil, `{"n":%d}`, i) }
	var keys []string
	for i := range 100 {
		keys = append(keys, strconv.Itoa(i))
	}
	var started atomic.Int64
	v := &verifier{in: Input{ReadSegment: func(key string) ([]byte, error) {
		started.Add(1)
		i, _ := strconv.Atoi(key)
		if i == 60 {
			return nil, errors.New("gone")
		}
		return raw(i), nil
	}}}
	next, stop := v.parseAhead(keys)
	for i := range 60 {
		if n := started.Load(); n > int64(i+2*maxParsers) {
			t.Fatalf("%d reads started before the %d-th was taken", n, i)
		}
		if p := next(i); p.readErr != nil || p.err == nil || p.sha != SHA256Hex(raw(i)) {
			t.Fatalf("segment %d: %+v", i, p)
		}
	}
	if p := next(60); p.readErr == nil {
		t.Fatalf("segment 60: %+v", p)
	}
	stop()
	next, stop = v.parseAhead(keys[:10])
	for i := range 10 {
		next(i)
	}
	stop()
}

// Deltas kept with one Chunks function are not taken by a recount with
// another.
func TestCountedOnlyWithTheSameChunks(t *testing.T) {
	one := func(Segment) ([][]CounterDelta, error) { return [][]CounterDelta{{{Key: "a", N: 1}}}, nil }
	other := func(Segment) ([][]CounterDelta, error) { return [][]CounterDelta{{{Key: "b", N: 1}}}, nil }
	h := NewSegmentHeaders(one)
	h.put("sha", h.read(Segment{}, nil))
	if c, ok, err := h.counted("sha", one); !ok || err != nil || len(c) != 1 || c[0][0].Key != "a" {
		t.Fatalf("with the same function: %v %v %v", c, ok, err)
	}
	if _, ok, _ := h.counted("sha", other); ok {
		t.Fatal("deltas of another Chunks taken")
	}
	if _, ok, _ := (*SegmentHeaders)(nil).counted("sha", one); ok {
		t.Fatal("deltas from no headers")
	}
}
