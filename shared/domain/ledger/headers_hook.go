package ledger

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)

// headerRuns counts the recounts againWithHeaders made twice, and those
// that found something else with a Verify's headers (the first such,
// described).
var headerRuns, headerMismatches atomic.Int64
var headerMismatch struct {
	sync.Mutex
	first string
}

// againWithHeaders is, in this package's partitioned tests
// (splitForTests), the recount of in made twice: without headers, and
// with the headers and counter deltas a Verify over the same segments
// kept; both must find the same.
func (in CounterInput) againWithHeaders() CounterResult {
	headerRuns.Add(1)
	want := in.recount()
	h := NewSegmentHeaders(in.Chunks)
	_, _ = VerifyErr(Input{SegmentKeys: in.SegmentKeys, ReadSegment: in.ReadSegment, Headers: h, Partitions: 1, Proofs: NewProofs("", nil)})
	in.Headers = h
	if got := in.recount(); !reflect.DeepEqual(got, want) {
		headerMismatches.Add(1)
		headerMismatch.Lock()
		if headerMismatch.first == "" {
			headerMismatch.first = fmt.Sprintf("with headers: %+v\nwithout: %+v", got, want)
		}
		headerMismatch.Unlock()
	}
	return want
}
