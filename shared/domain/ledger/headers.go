package ledger

import "sync"

// SegmentHeaders are the segments a Verify parsed (Input.Headers), by the
// SHA-256 of their bytes, without their entries, and whether they parsed:
// RecountCounters, given them (CounterInput.Headers), takes a segment's
// header from them instead of parsing the whole segment a second time.
// The same bytes always parse the same, so what they say of a segment's
// bytes is what ParseSegment says; bytes that changed between the two
// reads hash otherwise and are parsed again.
type SegmentHeaders struct {
	mu sync.Mutex
	m  map[string]segmentHeader
}

type segmentHeader struct {
	seg Segment // without its entries
	err error
}

// NewSegmentHeaders returns an empty set.
func NewSegmentHeaders() *SegmentHeaders {
	return &SegmentHeaders{m: map[string]segmentHeader{}}
}

// put keeps what ParseSegment said of the bytes that hash to sha.
func (h *SegmentHeaders) put(sha string, s Segment, err error) {
	if h == nil {
		return
	}
	s.Entries = nil
	h.mu.Lock()
	h.m[sha] = segmentHeader{s, err}
	h.mu.Unlock()
}

// parse is ParseSegment(raw) without its entries, from what a Verify
// kept when it parsed the same bytes (sha: SHA256Hex(raw)).
func (h *SegmentHeaders) parse(raw []byte, sha string) (Segment, error) {
	if h != nil {
		h.mu.Lock()
		p, ok := h.m[sha]
		h.mu.Unlock()
		if ok {
			return p.seg, p.err
		}
	}
	s, err := ParseSegment(raw)
	s.Entries = nil
	return s, err
}
