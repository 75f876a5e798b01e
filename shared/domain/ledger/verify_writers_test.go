package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// writerCheck is a stand-in for dynamostore.LedgerWriterCheck: the item's
// "wp" says what its proof is.
func writerCheck(_, next ledger.Item) error {
	switch next.S("wp") {
	case "ok":
		return nil
	case "offline":
		return ledger.ErrWriterUnverified
	case "":
		return &ledger.WriterError{Kind: ledger.KindWriterMissing, Err: errors.New("no writer proof")}
	case "role":
		return &ledger.WriterError{Kind: ledger.KindWriterRole, Err: errors.New("wrong role")}
	case "throttled":
		return errors.New("VerifyMac: ThrottlingException: Rate exceeded")
	}
	return &ledger.WriterError{Kind: ledger.KindWriterInvalid, Err: errors.New("bad proof")}
}

// proofDigest signs the next digest as the ledger does with WRITER_PROOFS.
func (f *fixture) proofDigest() {
	f.digest()
	d := *f.last
	d.WriterProofs, d.Signature = true, ""
	d = f.sign(d, f.key)
	raw, err := d.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	f.digests[ledger.DigestKey(d.N)] = raw
	f.last, f.lastRaw = &d, raw
}

// writeProved is write with the item's proof set to wp.
func (f *fixture) writeProved(shard, id string, v int64, wp string) {
	f.write(shard, id, v)
	p := f.pending[shard]
	if wp != "" {
		p[len(p)-1].Item["wp"] = ledger.Str(wp)
	}
}

func TestVerifyWriterProofs(t *testing.T) {
	t.Parallel()
	f := standard(t) // two digests, no proofs: before the cut-off
	f.writeProved("shard-1", "src#b", 4, "")
	f.flush("shard-1")
	f.proofDigest() // digest 3 turns proofs on: src#b v4 is at its heads, pre-proof
	f.writeProved("shard-1", "src#a", 3, "ok")
	f.writeProved("shard-1", "src#b", 5, "")       // by hand: no proof
	f.writeProved("shard-2", "src#c", 2, "forged") // a made-up proof
	f.writeProved("shard-2", "src#d", 1, "role")   // proved by another role's key
	f.flush("shard-1")
	f.flush("shard-2")
	f.digest()                                     // a later digest without the flag does not turn proofs off
	f.writeProved("shard-3", "src#e", 1, "")       // a shard the cut-off does not list
	f.writeProved("shard-1", "#pol#src#p2", 1, "") // not anchored yet: must be proved too
	f.flush("shard-3")
	f.flush("shard-1")
	in := f.input()
	in.CheckWriter = writerCheck
	res := ledger.Verify(in)
	for _, want := range []struct {
		kind ledger.Kind
		id   string
	}{{ledger.KindWriterMissing, "src#b"}, {ledger.KindWriterInvalid, "src#c"}, {ledger.KindWriterRole, "src#d"},
		{ledger.KindWriterMissing, "src#e"}, {ledger.KindWriterMissing, "#pol#src#p2"}} {
		if !res.Has(want.kind, want.id) {
			t.Errorf("%s %s not named: %v", want.kind, want.id, res.Problems)
		}
	}
	if len(res.Problems) != 5 {
		t.Errorf("problems: %v", res.Problems)
	}
	if w := res.Writers; w.Since != 3 || w.Proved != 1 || w.PreProof != 8 {
		t.Errorf("writers: %+v", w)
	}
}

// Without a digest that turns proofs on, every version is pre-proof (a
// ledger upgraded in place), and verify says so.
func TestVerifyWriterProofsNotOn(t *testing.T) {
	t.Parallel()
	f := standard(t)
	in := f.input()
	in.CheckWriter = writerCheck
	res := ledger.Verify(in)
	if !res.OK() || res.Writers.Since != 0 || res.Writers.PreProof != 7 || res.WriterNote() == "" {
		t.Fatalf("%v %+v", res.Problems, res.Writers)
	}
}

// Offline the MACs are not checked: counted and said, not named; a
// version with no proof at all is still named.
func TestVerifyWriterProofsOffline(t *testing.T) {
	t.Parallel()
	f := standard(t)
	f.now = f.now.Add(time.Second)
	f.proofDigest()
	f.writeProved("shard-1", "src#a", 3, "offline")
	f.writeProved("shard-1", "src#b", 4, "")
	f.flush("shard-1")
	f.digest()
	in := f.input()
	in.CheckWriter = writerCheck
	res := ledger.Verify(in)
	if len(res.Problems) != 1 || !res.Has(ledger.KindWriterMissing, "src#b") || res.Writers.Unverified != 1 {
		t.Fatalf("%v %+v", res.Problems, res.Writers)
	}
	if n := res.WriterNote(); n == "" {
		t.Fatal("no note")
	}
}

// A proof that could not be checked at all (a VerifyMac throttle or
// network error) is named writer-unchecked, never as a forgery.
func TestVerifyWriterProofUncheckedIsNotInvalid(t *testing.T) {
	t.Parallel()
	f := standard(t)
	f.now = f.now.Add(time.Second)
	f.proofDigest()
	f.writeProved("shard-1", "src#a", 3, "throttled")
	f.flush("shard-1")
	f.digest()
	in := f.input()
	in.CheckWriter = writerCheck
	res := ledger.Verify(in)
	if len(res.Problems) != 1 || !res.Has(ledger.KindWriterUnchecked, "src#a") {
		t.Fatalf("%v", res.Problems)
	}
}

// On a new stack (digest 1 turns proofs on, no baseline) nothing is
// pre-proof: a record written by hand before the first digest is named.
func TestVerifyWriterProofsFromGenesis(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.writeProved("shard-1", "src#a", 1, "ok")
	f.writeProved("shard-1", "src#x", 1, "") // by hand, before digest 1
	f.flush("shard-1")
	f.proofDigest()
	in := f.input()
	in.CheckWriter = writerCheck
	res := ledger.Verify(in)
	if !res.Has(ledger.KindWriterMissing, "src#x") || res.Writers.PreProof != 0 || res.Writers.Proved != 1 {
		t.Fatalf("%v %+v", res.Problems, res.Writers)
	}
}
