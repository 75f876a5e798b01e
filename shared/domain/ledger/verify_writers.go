package ledger

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Writer-proof problems (Input.CheckWriter; docs/ledger.md "Writer
// proofs").
const (
	// KindWriterMissing: a ledgered version after the writer-proof
	// cut-off that carries no writer proof: written by hand (or by code
	// without its writer key).
	KindWriterMissing Kind = "writer-missing"
	// KindWriterInvalid: a version whose writer proof does not verify
	// under the configured writer keys.
	KindWriterInvalid Kind = "writer-invalid"
	// KindWriterRole: a version proved by a role that does not write such
	// a version (a version 1 proved by the redrive key, say).
	KindWriterRole Kind = "writer-role"
	// KindWriterUnchecked: a version whose proof could not be checked at
	// all (VerifyMac failed: a throttle, a network error, a key KMS
	// refused): not a sign of tampering, but not proved either; run
	// verify again.
	KindWriterUnchecked Kind = "writer-unchecked"
)

// WriterError is how Input.CheckWriter names a version's problem.
type WriterError struct {
	Kind Kind
	Err  error
}

func (e *WriterError) Error() string { return e.Err.Error() }
func (e *WriterError) Unwrap() error { return e.Err }

// ErrWriterUnverified is what Input.CheckWriter returns for a well-formed
// proof whose MAC it cannot check (verify --offline: VerifyMac needs KMS).
var ErrWriterUnverified = errors.New("writer proof not verified (VerifyMac needs KMS)")

// WriterStats is what the writer-proof check found (Result.Writers).
type WriterStats struct {
	// Since is the first signed digest that says writer proofs are on
	// (0: none does; every version is pre-proof).
	Since int64 `json:"since"`
	// Proved counts versions whose proof verified; Unverified those whose
	// MAC was not checked (offline); PreProof the versions anchored by
	// Since's heads or before, which need no proof.
	Proved     int `json:"proved"`
	Unverified int `json:"unverified"`
	PreProof   int `json:"pre_proof"`
}

type writerJob struct {
	key   string
	prev  Item
	e     Entry
	shard string
}

// writers checks every ledgered version's writer proof with
// Input.CheckWriter. The cut-off cannot be faked by the table: it is the
// first signed digest whose WriterProofs says every change after its
// heads carries a proof. Versions at or below its heads (by shard and
// sequence number: stream order is time order within a shard) are
// pre-proof; every other version must be proved, including those in
// shards the digest does not list and those not anchored yet.
func (v *verifier) writers(entries []ledgered, signed []*parsedDigest) {
	if v.in.CheckWriter == nil {
		return
	}
	st := &v.res.Writers
	cut := map[string]string{} // shard → the cut-off digest's head's last seq
	genesis := false
	for _, p := range signed {
		if p.d.WriterProofs {
			st.Since = p.d.N
			if p.d.N == 1 && p.d.Prev == nil && len(v.in.Baselines) == 0 {
				// A stack whose first digest says proofs are on, with no
				// baseline, had them from its start: nothing is pre-proof
				// (a record written by hand before digest 1 is named).
				genesis = true
				break
			}
			for _, h := range p.d.Shards {
				if h.SegmentKey != "" {
					cut[h.Shard] = h.LastSeq
				}
			}
			break
		}
	}
	byKey := map[string][]ledgered{}
	for _, l := range entries {
		if Ledgered(l.e.Key) {
			byKey[l.e.Key] = append(byKey[l.e.Key], l)
		}
	}
	var jobs []writerJob
	for key, ls := range byKey {
		orderVersions(ls)
		var prev Item
		for _, l := range ls {
			e := l.e
			if e.Item == nil { // a REMOVE: named elsewhere when it matters
				prev = nil
				continue
			}
			pv, pok := prev.Int(VersionAttr)
			nv, nok := e.Item.Int(VersionAttr)
			if prev != nil && pok && nok && pv == nv {
				// An integrity hold keeps the version and its proof (any
				// other change in place is named rewritten).
				continue
			}
			last, listed := cut[l.shard]
			switch {
			case genesis:
				jobs = append(jobs, writerJob{key: key, prev: prev, e: e, shard: l.shard})
			case st.Since == 0, listed && !SeqLess(last, e.Seq):
				st.PreProof++
			default:
				jobs = append(jobs, writerJob{key: key, prev: prev, e: e, shard: l.shard})
			}
			prev = e.Item
		}
	}
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(runtime.GOMAXPROCS(0), 8), max(len(jobs), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				errs[i] = callCheck(v.in.CheckWriter, jobs[i].prev, jobs[i].e.Item)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		j := jobs[i]
		nv, _ := j.e.Item.Int(VersionAttr)
		var we *WriterError
		switch {
		case err == nil:
			st.Proved++
		case errors.Is(err, ErrWriterUnverified):
			st.Unverified++
		case errors.As(err, &we):
			v.fail(we.Kind, j.key, "version %d (change %s): %v", nv, j.e.Seq, we.Err)
		default:
			v.fail(KindWriterUnchecked, j.key, "version %d (change %s): the writer proof could not be checked (run verify again): %v", nv, j.e.Seq, err)
		}
	}
}

// WriterNote is the line verify prints about writer proofs (empty when
// none were checked).
func (r Result) WriterNote() string {
	w := r.Writers
	switch {
	case w == (WriterStats{}):
		return ""
	case w.Since == 0:
		return fmt.Sprintf("writer proofs: no signed digest turns them on yet: %d versions pre-proof", w.PreProof)
	case w.Unverified > 0:
		return fmt.Sprintf("writer proofs since digest #%d: %d versions' MACs not checked (VerifyMac needs KMS: run verify online), %d proved, %d pre-proof", w.Since, w.Unverified, w.Proved, w.PreProof)
	}
	return fmt.Sprintf("writer proofs since digest #%d: %d versions proved, %d pre-proof", w.Since, w.Proved, w.PreProof)
}
