package ledger_test

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// R2-5: the grace runs back from when the ledger read began, so a change
// made during a long ledger read and table scan is pending, not a problem.
func TestVerifyGraceRunsFromTheLedgerRead(t *testing.T) {
	t.Parallel()
	f := standard(t)
	in := f.input()
	in.Grace = time.Minute
	in.ReadStart = f.now
	in.Now = f.now.Add(10 * time.Minute) // the scan took 10 minutes
	at := func(id string, d time.Duration) ledger.Item {
		it := record(id, 1, "OPEN")
		it["last_seen"] = ledger.Str(f.now.Add(d).Format(time.RFC3339Nano))
		return it
	}
	in.Items = append(in.Items, at("src#during", 5*time.Minute), at("src#justbefore", -30*time.Second),
		at("src#before", -2*time.Minute), at("src#future", 12*time.Minute))
	res := ledger.Verify(in)
	if !res.Has(ledger.KindUnledgered, "src#before") || !res.Has(ledger.KindUnledgered, "src#future") || len(res.Problems) != 2 {
		t.Errorf("problems %v, want src#before and src#future only", res.Problems)
	}
	want := []ledger.PendingItem{{ID: "src#during", Age: 5 * time.Minute}, {ID: "src#justbefore", Age: 10*time.Minute + 30*time.Second}}
	if len(res.Pending) != 2 || res.Pending[0] != want[0] || res.Pending[1] != want[1] {
		t.Errorf("pending %v, want %v", res.Pending, want)
	}
	// Without ReadStart the grace runs from Now: the change 5 minutes
	// into the scan is 5 minutes old.
	in.ReadStart = time.Time{}
	if res := ledger.Verify(in); !res.Has(ledger.KindUnledgered, "src#during") {
		t.Errorf("ReadStart zero: problems %v, want src#during", res.Problems)
	}
}

// R2-4: a baseline taken after the ledger started is named, and its items
// are judged as if there were no baseline.
func TestVerifyNamesALateBaseline(t *testing.T) {
	t.Parallel()
	f := standard(t) // ledger running: two digests, no baseline
	f.now = f.now.Add(30 * 24 * time.Hour)
	forged := record("src#forged", 1, "OPEN") // written with the stream bypassed
	f.table["src#forged"] = forged
	if before := ledger.Verify(f.input()); !before.Has(ledger.KindUnledgered, "src#forged") {
		t.Fatalf("precondition: %v", before.Problems)
	}
	var all []ledger.Item
	for _, it := range f.table {
		all = append(all, it)
	}
	f.baseline(all)
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindUnledgered, "src#forged") || !res.Has(ledger.KindBaseline, ledger.BaselinePrefix) || len(res.PreLedger) != 0 {
		t.Errorf("after a late baseline: problems %v, pre-ledger %v", res.Problems, res.PreLedger)
	}
	if len(res.Problems) != 2 {
		t.Errorf("problems %v, want the baseline and src#forged only", res.Problems)
	}
}

// R2-4: a change ledgered before the baseline scan began makes it late,
// even before the first digest.
func TestVerifyNamesABaselineAfterTheFirstChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.table["src#old"] = record("src#old", 2, "OPEN")
	f.write("shard-1", "src#a", 1)
	f.now = f.now.Add(time.Second)
	f.baseline([]ledger.Item{f.table["src#old"], f.table["src#a"]})
	f.flush("shard-1")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindBaseline, ledger.BaselinePrefix) || !res.Has(ledger.KindRewritten, "src#old") && !res.Has(ledger.KindUnledgered, "src#old") {
		t.Errorf("problems %v, want the baseline named and src#old judged without it", res.Problems)
	}
}
