package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// digestUnproven signs the next digest over the current heads, recording
// us as its run's unproven heads.
func (f *fixture) digestUnproven(us ...ledger.UnprovenHead) string {
	f.t.Helper()
	key := f.digest()
	d := *f.last
	d.Signature = ""
	d.Unproven = us
	d = f.sign(d, f.key)
	raw, err := d.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	f.digests[key] = raw
	f.last, f.lastRaw = &d, raw
	return key
}

// A signed digest's unproven head (a rewritten head item) is named
// head-unproven at the digest, with the shard, the head and the reason;
// one its run did not reach in time is a note of the newest digest only.
func TestVerifyNamesSignedUnprovenHeads(t *testing.T) {
	f := standard(t)
	rewritten := ledger.UnprovenHead{Shard: "shard-1", SegmentKey: "ledger/segments/shard-1/x", SegmentSHA256: "ab",
		Segments: 9, LastSeq: "123", Reason: "the head counts 9 segments, the anchored head 3: it went backwards"}
	late := ledger.UnprovenHead{Shard: "shard-2", SegmentKey: "ledger/segments/shard-2/y", SegmentSHA256: "cd",
		Segments: 2, LastSeq: "456", Reason: ledger.ReasonNotReached}
	f.write("shard-1", "src#a", 3)
	f.flush("shard-1")
	old := f.digestUnproven(rewritten, late)
	res := ledger.Verify(f.input())
	if len(res.Problems) != 1 || !res.Has(ledger.KindHeadUnproven, old) {
		t.Fatalf("problems = %v", res.Problems)
	}
	for _, want := range []string{"shard-1", rewritten.SegmentKey, "9 segments", "last_seq 123", rewritten.Reason} {
		if !strings.Contains(res.Problems[0].Detail, want) {
			t.Errorf("detail %q lacks %q", res.Problems[0].Detail, want)
		}
	}
	if len(res.HeadsNotReached) != 1 || res.HeadsNotReached[0].Subject != old ||
		!strings.Contains(res.HeadsNotReached[0].Detail, "shard-2") || !strings.Contains(res.HeadsNotReached[0].Detail, ledger.ReasonNotReached) {
		t.Fatalf("heads not reached = %+v", res.HeadsNotReached)
	}

	// The next digest proves both: the rewritten head stays named at the
	// digest that recorded it; the one not reached is no longer noted.
	f.now = f.now.Add(5 * time.Minute)
	f.digest()
	res = ledger.Verify(f.input())
	if len(res.Problems) != 1 || !res.Has(ledger.KindHeadUnproven, old) || len(res.HeadsNotReached) != 0 {
		t.Fatalf("problems = %v, not reached = %+v", res.Problems, res.HeadsNotReached)
	}

	// A digest whose only unproven head was not reached is clean.
	g := standard(t)
	g.now = g.now.Add(5 * time.Minute)
	g.digestUnproven(late)
	if res := ledger.Verify(g.input()); !res.OK() || len(res.HeadsNotReached) != 1 {
		t.Fatalf("problems = %v, not reached = %+v", res.Problems, res.HeadsNotReached)
	}
}
