package ledger

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
)

// proofsForTests, set by this package's tests alone (export_test.go),
// makes every Verify run three times: without proofs, with the proofs of
// a run over the first half of its segments, and with those of the whole
// run; each must find what the first found (againWithProofs).
var proofsForTests bool

// proofRuns counts againWithProofs's runs, those whose proofs skipped a
// check, and those that did not find what the run without proofs found
// (the first such, described).
var proofRuns, proofReuses, proofMismatches atomic.Int64
var proofMismatch struct {
	sync.Mutex
	first string
}

// againWithProofs is VerifyErr(in) run as proofsForTests says.
func (in Input) againWithProofs() (Result, error) {
	proofRuns.Add(1)
	plain := in
	plain.Proofs = NewProofs("", nil)
	want, wantErr := VerifyErr(plain) // in.Proofs set: once
	half := in.firstHalf()
	half.Proofs = NewProofs("", nil)
	_, _ = VerifyErr(half)
	reused := false
	for _, known := range [][]ProofKey{half.Proofs.Proven(), plain.Proofs.Proven()} {
		again := in
		again.Proofs = NewProofs("", known)
		got, gotErr := VerifyErr(again)
		reused = reused || again.Proofs.Reused() > 0
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			proofMismatches.Add(1)
			proofMismatch.Lock()
			if proofMismatch.first == "" {
				proofMismatch.first = fmt.Sprintf("with %d proofs: %v %+v\nwithout: %v %+v", len(known), gotErr, got, wantErr, want)
			}
			proofMismatch.Unlock()
		}
	}
	if reused {
		proofReuses.Add(1)
	}
	return want, wantErr
}

// firstHalf is in with the first half of its segments only (by key).
func (in Input) firstHalf() Input {
	if in.ReadSegment != nil {
		keys := slices.Sorted(slices.Values(in.SegmentKeys))
		in.SegmentKeys = keys[:len(keys)/2]
		return in
	}
	keys := slices.Sorted(mapKeys(in.Segments))
	half := make(map[string][]byte, len(keys)/2)
	for _, k := range keys[:len(keys)/2] {
		half[k] = in.Segments[k]
	}
	in.Segments = half
	return in
}
