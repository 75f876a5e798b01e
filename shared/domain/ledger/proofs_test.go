package ledger_test

import (
	"errors"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A run from an earlier run's proofs skips exactly the version checks
// that passed: a version forged after the proofs were taken, a check that
// failed, and everything under another scope (other code) are checked
// again, and every writer proof (KMS's answer may change); what it finds
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
	if int64(len(proven)) != versions { // every version check passed
		t.Fatalf("%d proofs, want %d", len(proven), versions)
	}

	again := ledger.NewProofs("code A", proven)
	got, v2, w2 := run(again)
	if !reflect.DeepEqual(got, want) || v2 != 0 || w2 != writers || again.Reused() != versions {
		t.Fatalf("again: %v, %d version checks, %d writer checks (all), %d reused", got.Problems, v2, w2, again.Reused())
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

// A proof binds the version before as much as the version itself: the
// same next version after another previous one is checked again, and
// named when that pair is no transition.
func TestAProofIsOfBothVersions(t *testing.T) {
	t.Parallel()
	check := func(prev, next ledger.Item) error {
		if prev != nil && prev.S("payload") == "bad" {
			return errors.New("no transition from a bad payload")
		}
		return nil
	}
	input := func(prev ledger.Item, proofs *ledger.Proofs) ledger.Input {
		f := newFixture(t)
		f.write("shard-1", "src#a", 1)
		f.pending["shard-1"][0].Item, f.table["src#a"] = prev, prev
		f.write("shard-1", "src#a", 2)
		f.flush("shard-1")
		f.digest()
		in := f.input()
		in.CheckVersion, in.Proofs = check, proofs
		return in
	}
	good, bad := record("src#a", 1, "OPEN"), record("src#a", 1, "OPEN")
	good["payload"], bad["payload"] = ledger.Str("good"), ledger.Str("bad")
	first := ledger.NewProofs("code", nil)
	if res := ledger.Verify(input(good, first)); !res.OK() {
		t.Fatalf("after the good version: %v", res.Problems)
	}
	res := ledger.Verify(input(bad, ledger.NewProofs("code", first.Proven())))
	if !res.Has(ledger.KindForged, "src#a") {
		t.Fatalf("the same version 2 after a bad version 1, from the good pair's proofs: %v", res.Problems)
	}
}
