package ledger_test

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// lateChain ledgers src#a and src#b on shard-1, src#b's change first and
// src#a's (the older seq) late in the next segment, as the ledger function
// does when a retry comes out of order; mutate may change the late
// segment's entries before it is written. It returns the fixture, whose
// head then holds the late segment's last seq, and the chain's highest
// seq.
func lateChain(t *testing.T, mutate func(late []ledger.Entry) []ledger.Entry) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.write("shard-1", "src#b", 1)
	early, later := f.pending["shard-1"][0], f.pending["shard-1"][1]
	f.pending["shard-1"] = []ledger.Entry{later}
	f.flush("shard-1")
	top := f.heads["shard-1"].LastSeq
	early.Late = true
	f.pending["shard-1"] = mutate([]ledger.Entry{early})
	f.flush("shard-1")
	return f, top
}

// lateFixture is lateChain with the head at the chain's highest seq, as
// the ledger function keeps it, and a digest.
func lateFixture(t *testing.T, mutate func(late []ledger.Entry) []ledger.Entry) *fixture {
	t.Helper()
	f, top := lateChain(t, mutate)
	f.heads["shard-1"].LastSeq = top // the head keeps the chain's highest seq
	f.digest()
	return f
}

func TestVerifyAcceptsALateEntry(t *testing.T) {
	f := lateFixture(t, func(l []ledger.Entry) []ledger.Entry { return l })
	if res := ledger.Verify(f.input()); !res.OK() {
		t.Fatalf("a late entry seen once: %v", res.Problems)
	}
}

func TestVerifyNamesALateEntryLedgeredTwice(t *testing.T) {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.write("shard-1", "src#b", 1)
	f.write("shard-1", "src#c", 1)
	first := f.pending["shard-1"][1] // src#b's: below the chain's last, and in it
	f.flush("shard-1")
	top := f.heads["shard-1"].LastSeq
	first.Late = true
	f.pending["shard-1"] = []ledger.Entry{first}
	f.flush("shard-1")
	f.heads["shard-1"].LastSeq = top
	f.digest()
	f.named(ledger.KindDuplicate, "shard-1", "a late entry that is also in the segment before")
}

func TestVerifyNamesAnEntryMarkedLateThatIsNot(t *testing.T) {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	f.write("shard-1", "src#b", 1)
	f.pending["shard-1"][0].Late = true
	key := f.flush("shard-1")
	f.digest()
	f.named(ledger.KindSegmentChain, key, "an entry after the chain's last marked late")
}

// A digest's head whose last_seq is the late segment's own (below the
// chain's highest) is named: the chain does not support it.
func TestVerifyNamesAHeadBelowTheChainsHighestSeq(t *testing.T) {
	f, _ := lateChain(t, func(l []ledger.Entry) []ledger.Entry { return l }) // the fixture's head takes the late segment's last seq
	f.digest()
	f.named(ledger.KindHeadUnsupported, ledger.DigestKey(1), "a head below its chain's highest seq")
}

// A digest listing a shard with no chain yet (an empty head) verifies.
func TestVerifyAcceptsAnEmptyHead(t *testing.T) {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	f.heads["shard-2"] = &ledger.Head{Shard: "shard-2", ParentShard: "shard-1"}
	f.digest()
	if res := ledger.Verify(f.input()); !res.OK() {
		t.Fatalf("an empty head: %v", res.Problems)
	}
}

// Entries that carry old_item: a REMOVE's must be what it removed; an
// INSERT has none.
func TestSegmentOldItemRules(t *testing.T) {
	old := record("src#a", 1, "OPEN")
	other := record("src#a", 2, "OPEN")
	for name, tc := range map[string]struct {
		e  ledger.Entry
		ok bool
	}{
		"remove":            {ledger.Entry{Event: ledger.EventRemove, Removed: old, OldItem: old}, true},
		"modify":            {ledger.Entry{Event: ledger.EventModify, Item: other, OldItem: old}, true},
		"remove, other old": {ledger.Entry{Event: ledger.EventRemove, Removed: old, OldItem: other}, false},
		"insert with old":   {ledger.Entry{Event: ledger.EventInsert, Item: other, OldItem: old}, false},
		// An image is of the entry's own key: one without a key, of
		// another key, or empty (which would read as none) is refused.
		"modify, another key's image": {ledger.Entry{Event: ledger.EventModify, Item: record("src#b", 2, "OPEN"), OldItem: old}, false},
		"modify, another key's old":   {ledger.Entry{Event: ledger.EventModify, Item: other, OldItem: record("src#b", 1, "OPEN")}, false},
		"remove, another key's":       {ledger.Entry{Event: ledger.EventRemove, Removed: record("src#b", 1, "OPEN")}, false},
		"insert, an empty image":      {ledger.Entry{Event: ledger.EventInsert, Item: ledger.Item{}}, false},
		"insert, no key":              {ledger.Entry{Event: ledger.EventInsert, Item: ledger.Item{"version": ledger.Num("1")}}, false},
	} {
		tc.e.Seq, tc.e.At, tc.e.Key = "100000000000000000001", "2026-12-01T10:00:00Z", "src#a"
		_, err := ledger.NewSegment(arn, "shard-1", nil, []ledger.Entry{tc.e})
		if (err == nil) != tc.ok {
			t.Errorf("%s: NewSegment error %v, want ok %v", name, err, tc.ok)
		}
	}
}
