package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// R1: an insider writes version N+1 with prev_seal = seal(N) and any seal
// (the stream ledgers it like every write): Verify does not check seals,
// nor which attributes a legitimate transition may change.
func TestReviewForgedNextVersionPasses(t *testing.T) {
	f := standard(t)
	it := record("src#a", 3, "RESOLVED")
	it["payload"] = ledger.Str("attacker's payload")
	it["seal"] = ledger.Str("not-a-seal-of-anything")
	f.pending["shard-1"] = append(f.pending["shard-1"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify,
		At: f.now.Format(time.RFC3339Nano), Key: "src#a", Item: it, Old: &ledger.Old{Version: 2, Seal: seal("src#a", 2)}})
	f.table["src#a"] = it
	f.flush("shard-1")
	f.digest()
	if res := ledger.Verify(f.input()); res.OK() {
		t.Errorf("a forged version 3 (payload changed, seal not a seal) verifies: %+v", res)
	}
}

// R2: removing an integrity hold in place is accepted (sameButHold is
// symmetric).
func TestReviewHoldRemovedInPlacePasses(t *testing.T) {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	held := record("src#a", 1, "OPEN")
	held[ledger.HoldAttr] = ledger.Str("seal mismatch")
	held[ledger.HoldAtAttr] = ledger.Str(f.now.Format(time.RFC3339Nano))
	f.pending["shard-1"] = append(f.pending["shard-1"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: "src#a", Item: held, Old: &ledger.Old{Version: 1, Seal: seal("src#a", 1)}})
	unheld := record("src#a", 1, "OPEN")
	f.pending["shard-1"] = append(f.pending["shard-1"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: "src#a", Item: unheld, Old: &ledger.Old{Version: 1, Seal: seal("src#a", 1)}})
	f.table["src#a"] = unheld
	f.flush("shard-1")
	f.digest()
	if res := ledger.Verify(f.input()); res.OK() {
		t.Errorf("an integrity hold lifted in place by a direct write verifies")
	}
}

// R3: the grace trusts the item's own timestamps: an item the ledger never
// saw, with last_seen in the future, is "not yet ledgered" forever.
func TestReviewFutureTimestampDefeatsGrace(t *testing.T) {
	f := standard(t)
	in := f.input()
	in.Grace = 10 * time.Minute
	forged := record("src#forged", 1, "OPEN")
	forged["last_seen"] = ledger.Str(f.now.Add(100 * 365 * 24 * time.Hour).Format(time.RFC3339Nano))
	in.Items = append(in.Items, forged)
	res := ledger.Verify(in)
	if !res.Has(ledger.KindUnledgered, "src#forged") {
		t.Errorf("an unledgered item dated 100 years ahead is not named: problems %v, not-yet-ledgered %d", res.Problems, res.NotYetLedgered)
	}
}

// R4: records that existed before the ledger was switched on: the first
// ledgered change of a pre-existing record is a MODIFY of version 4, and
// an untouched one is never ledgered. Both are named as tampering.
func TestReviewRecordsOlderThanTheLedgerAreNamed(t *testing.T) {
	f := newFixture(t)
	old := record("src#old", 4, "OPEN")
	// (The fix: the ledger's baseline scan saw both before the change.)
	f.baseline([]ledger.Item{old, record("src#untouched", 2, "OPEN")})
	it := record("src#old", 5, "OPEN")
	f.pending["shard-1"] = append(f.pending["shard-1"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: "src#old", Item: it, Old: &ledger.Old{Version: 4, Seal: old.S("seal")}})
	f.table["src#old"] = it
	f.table["src#untouched"] = record("src#untouched", 2, "OPEN")
	f.flush("shard-1")
	f.digest()
	if res := ledger.Verify(f.input()); !res.OK() {
		t.Logf("legitimate pre-ledger records are named: %v", res.Problems)
		t.Fail()
	} else if len(res.PreLedger) != 2 || !strings.Contains(res.PreLedger[0].Detail, "pre-ledger: unproven before") {
		t.Errorf("pre-ledger notes %v, want src#old and src#untouched", res.PreLedger)
	}
}

// R5: a copy that ends early (the newest digests and the segments after the
// previous one left out, the table export taken then) verifies at a much
// later now: Verify does not require a digest within DIGEST_MAX_AGE of now.
func TestReviewTruncatedCopyVerifies(t *testing.T) {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	f.digest()
	in := f.input()
	in.Now = f.now.Add(30 * 24 * time.Hour) // a month later, no digest since
	if res := ledger.Verify(in); res.OK() {
		t.Errorf("newest digest 30 days older than now (digests are written at least hourly) verifies: last digest %d", res.LastDigest)
	}
}
