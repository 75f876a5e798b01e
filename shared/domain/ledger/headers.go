package ledger

import (
	"maps"
	"reflect"
	"slices"
	"sync"
)

// SegmentHeaders are the segments a Verify parsed (Input.Headers), by the
// SHA-256 of their bytes: each one's header (without its entries), and
// whether it parsed, and, when made with a Chunks function
// (CounterInput.Chunks), its counter deltas chunk by chunk, summed by
// counter key. RecountCounters, given them (CounterInput.Headers), takes
// a segment's header and deltas from them instead of parsing the segment
// once or twice more. The same bytes always parse and count the same, so
// what they say of a segment's bytes is what ParseSegment and Chunks say;
// bytes that changed between two reads hash otherwise and are parsed
// again. They hold each segment's header, as Verify does, and its
// counter deltas: a few hundred bytes a segment, and a few dozen more for
// each counter key a chunk of it moves.
type SegmentHeaders struct {
	chunks func(Segment) ([][]CounterDelta, error)
	mu     sync.Mutex
	m      map[string]segmentHeader
}

type segmentHeader struct {
	seg Segment // without its entries
	err error
	// counted: chunks and chunksErr are Chunks' answer, summed.
	counted   bool
	chunks    [][]CounterDelta
	chunksErr error
}

// NewSegmentHeaders returns an empty set; chunks, when set, is the
// recount's CounterInput.Chunks.
func NewSegmentHeaders(chunks func(Segment) ([][]CounterDelta, error)) *SegmentHeaders {
	return &SegmentHeaders{chunks: chunks, m: map[string]segmentHeader{}}
}

// read is what a Verify keeps of a segment it parsed (s with its entries
// and their old items, err ParseSegment's): called as it is read, on the
// goroutine that parsed it.
func (h *SegmentHeaders) read(s Segment, err error) segmentHeader {
	p := segmentHeader{err: err}
	if h == nil {
		return p
	}
	if err == nil && h.chunks != nil {
		p.counted = true
		var chunks [][]CounterDelta
		if chunks, p.chunksErr = h.chunks(s); p.chunksErr == nil {
			p.chunks = make([][]CounterDelta, len(chunks))
			for i, c := range chunks {
				p.chunks[i] = sumByKey(c)
			}
		}
	}
	s.Entries = nil
	p.seg = s
	return p
}

// sumByKey is ds with each counter key once, its deltas summed (a key
// whose deltas cancel out is kept: the recount compares it all the same).
func sumByKey(ds []CounterDelta) []CounterDelta {
	sums := map[string]int64{}
	for _, d := range ds {
		sums[d.Key] += d.N
	}
	out := make([]CounterDelta, 0, len(sums))
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, CounterDelta{Key: k, N: sums[k]})
	}
	return out
}

// put keeps p, what read said of the bytes that hash to sha.
func (h *SegmentHeaders) put(sha string, p segmentHeader) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.m[sha] = p
	h.mu.Unlock()
}

func (h *SegmentHeaders) get(sha string) (segmentHeader, bool) {
	if h == nil {
		return segmentHeader{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.m[sha]
	return p, ok
}

// parse is ParseSegment(raw) without its entries, from what a Verify
// kept when it parsed the same bytes (sha: SHA256Hex(raw)).
func (h *SegmentHeaders) parse(raw []byte, sha string) (Segment, error) {
	if p, ok := h.get(sha); ok {
		return p.seg, p.err
	}
	s, err := ParseSegment(raw)
	s.Entries = nil
	return s, err
}

// counted returns Chunks' answer for the bytes that hash to sha, summed
// by key, when a Verify kept it (ok) with the same function as chunks
// (sameFunc).
func (h *SegmentHeaders) counted(sha string, chunks func(Segment) ([][]CounterDelta, error)) (summed [][]CounterDelta, ok bool, err error) {
	if !h.CountsWith(chunks) {
		return nil, false, nil
	}
	p, found := h.get(sha)
	if !found || !p.counted {
		return nil, false, nil
	}
	return p.chunks, true, p.chunksErr
}

// CountsWith reports whether the recount takes h's counter deltas when
// its Chunks is chunks (sameFunc).
func (h *SegmentHeaders) CountsWith(chunks func(Segment) ([][]CounterDelta, error)) bool {
	return h != nil && sameFunc(h.chunks, chunks)
}

// sameFunc reports whether a and b have the same code: deltas counted
// with another Chunks are not the recount's. It tells top-level functions
// apart, and only them: two method values of one method, or two closures
// of one literal, have the same code whatever they hold, so the Chunks of
// headers and recount must be a top-level function (as dynamostore's
// SegmentCounterChunks is).
func sameFunc(a, b func(Segment) ([][]CounterDelta, error)) bool {
	return a != nil && b != nil && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}
