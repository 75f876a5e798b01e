package ledger_test

import (
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A run from an earlier run's proofs skips exactly the checks that
// passed: a version forged after the proofs were taken, a check that
// failed, a writer proof that was not checked, and everything under
// another scope (other code, other keys) are checked again; what it finds
// is what a run without proofs finds.
func TestProofsSkipOnlyWhatPassedUnderTheirScope(t *testing.T) {
	t.Parallel()
	f := standard(t)
	f.writeProved("shard-1", "src#b", 4, "")
	f.flush("shard-1")
	f.proofDigest()
	f.writeProved("shard-1", "src#a", 3, "ok")
	f.writeProved("shard-2", "src#c", 2, "forged") // a made-up writer proof
	f.flush("shard-1")
	f.flush("shard-2")
	f.digest()
	var versionCalls, writerCalls atomic.Int64
	input := func(proofs *ledger.Proofs) ledger.Input {
		in := f.input()
		check := in.CheckVersion
		in.CheckVersion = func(prev, next ledger.Item) error {
			versionCalls.Add(1)
			return check(prev, next)
		}
		in.CheckWriter = func(prev, next ledger.Item) error {
			writerCalls.Add(1)
			return writerCheck(prev, next)
		}
		in.Proofs = proofs
		return in
	}
	run := func(proofs *ledger.Proofs) (ledger.Result, int64, int64) {
		versionCalls.Store(0)
		writerCalls.Store(0)
		res := ledger.Verify(input(proofs))
		return res, versionCalls.Load(), writerCalls.Load()
	}
	want, versions, writers := run(nil)
	if !want.Has(ledger.KindWriterInvalid, "src#c") || len(want.Problems) != 1 || versions == 0 || writers != 2 {
		t.Fatalf("without proofs: %v, %d version checks, %d writer checks", want.Problems, versions, writers)
	}
	first := ledger.NewProofs("code A", nil)
	if got, _, _ := run(first); !reflect.DeepEqual(got, want) {
		t.Fatalf("collecting proofs: %+v, want %+v", got, want)
	}
	proven := first.Proven()
	if int64(len(proven)) != versions+1 { // every version check passed, one writer check of two
		t.Fatalf("%d proofs, want %d", len(proven), versions+1)
	}

	again := ledger.NewProofs("code A", proven)
	got, v2, w2 := run(again)
	if !reflect.DeepEqual(got, want) || v2 != 0 || w2 != 1 || again.Reused() != versions+1 {
		t.Fatalf("again: %v, %d version checks, %d writer checks (the failed one only), %d reused", got.Problems, v2, w2, again.Reused())
	}
	if !reflect.DeepEqual(again.Proven(), proven) {
		t.Fatal("the proofs met again are not kept")
	}

	// A version forged since (the table's writer ledgers a version the
	// check refuses) is checked, and named.
	forged := record("src#a", 4, "OPEN")
	forged["payload"] = ledger.Str("forged")
	f.modify("shard-1", forged)
	f.flush("shard-1")
	f.digest()
	got, v3, _ := run(ledger.NewProofs("code A", proven))
	if !got.Has(ledger.KindForged, "src#a") || v3 != 1 {
		t.Fatalf("a version forged since: %v, %d version checks", got.Problems, v3)
	}

	// Another scope's proofs skip nothing.
	other := ledger.NewProofs("code B", proven)
	if got, v4, w4 := run(other); !got.Has(ledger.KindForged, "src#a") || v4 != versions+1 || w4 != writers+1 || other.Reused() != 0 {
		t.Fatalf("another scope: %v, %d version checks, %d writer checks, %d reused", got.Problems, v4, w4, other.Reused())
	}
}
