package ledger_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// modify ledgers it as a MODIFY of the table's current item of its key.
func (f *fixture) modify(shard string, it ledger.Item) {
	id := it.S("dlq_id")
	old := f.table[id]
	ov, _ := old.Int("version")
	f.pending[shard] = append(f.pending[shard], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: id, Item: it, Old: &ledger.Old{Version: ov, Seal: old.S("seal")}})
	f.table[id] = it
}

func hold(it ledger.Item, at time.Time) ledger.Item {
	h := ledger.Item{}
	for k, v := range it {
		h[k] = v
	}
	h[ledger.HoldAttr] = ledger.Str("seal mismatch")
	h[ledger.HoldAtAttr] = ledger.Str(at.Format(time.RFC3339Nano))
	return h
}

func TestVerifyCallsCheckVersionOnEveryVersion(t *testing.T) {
	t.Parallel()
	f := standard(t)
	// A forged version 3 whose seal is right by the fixture's rule, but
	// whose payload changed.
	it := record("src#a", 3, "OPEN")
	it["payload"] = ledger.Str("forged")
	f.modify("shard-1", it)
	f.flush("shard-1")
	f.digest()
	in := f.input()
	var calls []string
	var mu sync.Mutex // Verify calls the check from several goroutines at once
	check := in.CheckVersion
	in.CheckVersion = func(prev, next ledger.Item) error {
		p := "nil"
		if prev != nil {
			p = prev.S("seal")
		}
		mu.Lock()
		calls = append(calls, p+">"+next.S("seal"))
		mu.Unlock()
		return check(prev, next)
	}
	res := ledger.Verify(in)
	if !res.Has(ledger.KindForged, "src#a") || len(res.Problems) != 1 {
		t.Fatalf("problems %v, want src#a forged only", res.Problems)
	}
	if d := res.Problems[0].Detail; !strings.Contains(d, "forged: version 3 is not a transition of version 2") || !strings.Contains(d, "payload changed") {
		t.Errorf("detail %q", d)
	}
	// 4 keys' first versions, b 1>2>3, a 1>2>3.
	if len(calls) != 8 || !strings.Contains(strings.Join(calls, " "), "nil>seal-src#c-1") {
		t.Errorf("CheckVersion calls %v", calls)
	}
	// A forged first version too.
	f2 := newFixture(t)
	f2.write("shard-1", "src#n", 1)
	bad := record("src#n", 1, "OPEN")
	bad["seal"] = ledger.Str("garbage")
	f2.pending["shard-1"][0].Item, f2.table["src#n"] = bad, bad
	f2.flush("shard-1")
	f2.digest()
	if res := ledger.Verify(f2.input()); !res.Has(ledger.KindForged, "src#n") {
		t.Fatalf("a forged first version: %v", res.Problems)
	}
}

func TestVerifyAcceptsOnlyAHoldAddedInPlace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(f *fixture)
		want  string // "" = no problem
	}{
		{"hold added", func(f *fixture) { f.modify("shard-1", hold(record("src#a", 1, "OPEN"), f.now)) }, ""},
		{"hold added without its time", func(f *fixture) {
			h := hold(record("src#a", 1, "OPEN"), f.now)
			delete(h, ledger.HoldAtAttr)
			f.modify("shard-1", h)
		}, "rewrote version 1 in place"},
		{"hold added with another change", func(f *fixture) { f.modify("shard-1", hold(record("src#a", 1, "RESOLVED"), f.now)) }, "rewrote version 1 in place"},
		{"hold lifted in place", func(f *fixture) {
			f.modify("shard-1", hold(record("src#a", 1, "OPEN"), f.now))
			f.modify("shard-1", record("src#a", 1, "OPEN"))
		}, "lifted the integrity hold"},
		{"hold reason rewritten", func(f *fixture) {
			f.modify("shard-1", hold(record("src#a", 1, "OPEN"), f.now))
			h := hold(record("src#a", 1, "OPEN"), f.now)
			h[ledger.HoldAttr] = ledger.Str("nothing")
			f.modify("shard-1", h)
		}, "rewrote version 1 in place"},
		{"held version replaced", func(f *fixture) {
			f.modify("shard-1", hold(record("src#a", 1, "OPEN"), f.now))
			f.modify("shard-1", record("src#a", 2, "OPEN"))
		}, "while it was held"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.write("shard-1", "src#a", 1)
			c.build(f)
			f.flush("shard-1")
			f.digest()
			res := ledger.Verify(f.input())
			if c.want == "" {
				if !res.OK() {
					t.Fatalf("problems %v", res.Problems)
				}
				return
			}
			if !res.Has(ledger.KindRewritten, "src#a") || !strings.Contains(res.Problems[0].Detail, c.want) {
				t.Fatalf("problems %v, want src#a rewritten: %s", res.Problems, c.want)
			}
		})
	}
}

func TestVerifyGraceRefusesTheFutureAndListsPendingItems(t *testing.T) {
	t.Parallel()
	f := standard(t)
	in := f.input()
	in.Grace = 10 * time.Minute
	at := func(id string, d time.Duration) ledger.Item {
		it := record(id, 1, "OPEN")
		it["last_seen"] = ledger.Str(f.now.Add(d).Format(time.RFC3339Nano))
		return it
	}
	in.Items = append(in.Items, at("src#past", -3*time.Minute), at("src#skew", 30*time.Second), at("src#future", 2*time.Minute), at("src#old", -11*time.Minute))
	res := ledger.Verify(in)
	if !res.Has(ledger.KindUnledgered, "src#future") || !res.Has(ledger.KindUnledgered, "src#old") || len(res.Problems) != 2 {
		t.Errorf("problems %v, want src#future and src#old", res.Problems)
	}
	want := []ledger.PendingItem{{ID: "src#past", Age: 3 * time.Minute}, {ID: "src#skew", Age: -30 * time.Second}}
	if res.NotYetLedgered != 2 || len(res.Pending) != 2 || res.Pending[0] != want[0] || res.Pending[1] != want[1] {
		t.Errorf("pending %d %v, want %v", res.NotYetLedgered, res.Pending, want)
	}
}

func TestVerifyNamesAStaleOrUnorderedDigest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	f.digest()
	in := f.input()
	in.MaxDigestAge = time.Hour
	in.Now = f.now.Add(59 * time.Minute)
	if res := ledger.Verify(in); !res.OK() {
		t.Fatalf("a digest 59 minutes old: %v", res.Problems)
	}
	in.Now = f.now.Add(61 * time.Minute)
	res := ledger.Verify(in)
	if !res.Has(ledger.KindDigestStale, ledger.DigestKey(1)) || !strings.Contains(res.Problems[0].Detail, "#1") {
		t.Fatalf("a digest 61 minutes old: %v", res.Problems)
	}
	in.MaxDigestAge = -1
	if res := ledger.Verify(in); !res.OK() {
		t.Fatalf("the check turned off: %v", res.Problems)
	}
	// Without a digest, the oldest change's age counts.
	g := newFixture(t)
	g.write("shard-1", "src#a", 1)
	g.flush("shard-1")
	in = g.input()
	in.Now = g.now.Add(2 * time.Hour)
	if res := ledger.Verify(in); !res.Has(ledger.KindDigestStale, ledger.DigestPrefix) {
		t.Fatalf("no digest for 2 hours: %v", res.Problems)
	}
	// A digest dated before its predecessor.
	f.now = f.now.Add(-time.Hour)
	f.digest()
	f.named(ledger.KindDigestChain, ledger.DigestKey(2), "digest 2 dated before digest 1")
}

// A key's versions are ordered by version, not by sequence numbers across
// shards: a child shard's numbers may sort below its parent's.
func TestVerifyOrdersAKeysVersionsByVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seq = 5000000000000000000
	f.write("shard-parent", "src#a", 1)
	f.write("shard-parent", "src#a", 2)
	f.flush("shard-parent")
	f.seq = 1000000000000000000 // the child's numbers sort lower
	f.write("shard-child", "src#a", 3)
	f.flush("shard-child")
	f.seq = 500000000000000000 // and a grandchild's lower still
	f.modify("shard-grandchild", hold(record("src#a", 3, "OPEN"), f.now))
	f.flush("shard-grandchild")
	f.digest()
	if res := ledger.Verify(f.input()); !res.OK() {
		t.Fatalf("problems %v", res.Problems)
	}
}

func TestVerifyBaseline(t *testing.T) {
	t.Parallel()
	// setup: src#a v3 and src#b v1 existed before the ledger.
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.table["src#a"], f.table["src#b"] = record("src#a", 3, "OPEN"), record("src#b", 1, "OPEN")
		return f
	}
	t.Run("a change made during the scan", func(t *testing.T) {
		f := setup(t)
		f.write("shard-1", "src#a", 4) // ledgered; the scan, begun before it, then reads version 4
		f.now = f.now.Add(-time.Second)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		f.now = f.now.Add(time.Second)
		f.write("shard-1", "src#a", 5)
		f.flush("shard-1")
		f.digest()
		res := ledger.Verify(f.input())
		if !res.OK() || len(res.PreLedger) != 2 || res.BaselineUnanchored {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("a first change that does not follow the baseline", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		f.table["src#a"] = record("src#a", 7, "OPEN")
		f.write("shard-1", "src#a", 8)
		f.flush("shard-1")
		f.digest()
		f.named(ledger.KindOldMismatch, "src#a", "a first change that does not follow the baseline")
	})
	t.Run("an item rewritten after the baseline", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		f.digest()
		f.table["src#b"] = record("src#b", 1, "RESOLVED")
		f.named(ledger.KindRewritten, "src#b", "an item rewritten after the baseline")
	})
	t.Run("the first change after the baseline is checked", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		it := record("src#a", 4, "OPEN")
		it["payload"] = ledger.Str("forged")
		f.modify("shard-1", it)
		f.flush("shard-1")
		f.digest()
		f.named(ledger.KindForged, "src#a", "a forged first change after the baseline")
	})
	t.Run("a baseline object swapped", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"]}, []ledger.Item{f.table["src#b"]})
		f.digest()
		in := f.input()
		g := setup(t)
		g.baseline([]ledger.Item{record("src#a", 2, "OPEN")}, []ledger.Item{f.table["src#b"]})
		in.Baselines[ledger.BaselineKey(1)] = g.baselines[ledger.BaselineKey(1)]
		if res := ledger.Verify(in); !res.Has(ledger.KindBaseline, ledger.BaselineKey(2)) {
			t.Fatalf("problems %v", res.Problems)
		}
	})
	t.Run("the newest baseline object dropped", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"]}, []ledger.Item{f.table["src#b"]})
		f.digest()
		in := f.input()
		delete(in.Baselines, ledger.BaselineKey(2))
		if res := ledger.Verify(in); !res.Has(ledger.KindBaseline, ledger.BaselineKey(2)) {
			t.Fatalf("problems %v", res.Problems)
		}
	})
	t.Run("incomplete", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"]}, []ledger.Item{f.table["src#b"]})
		in := f.input() // no digest names it yet
		delete(in.Baselines, ledger.BaselineKey(2))
		if res := ledger.Verify(in); !res.Has(ledger.KindBaseline, ledger.BaselinePrefix) {
			t.Fatalf("problems %v", res.Problems)
		}
	})
	t.Run("not yet anchored", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		if res := ledger.Verify(f.input()); !res.OK() || !res.BaselineUnanchored {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("a record deleted after the baseline", func(t *testing.T) {
		f := setup(t)
		f.baseline([]ledger.Item{f.table["src#a"], f.table["src#b"]})
		f.digest()
		delete(f.table, "src#b")
		f.named(ledger.KindDeleted, "src#b", "a record deleted after the baseline")
	})
}

// A version check that panics on an item it cannot read names the
// version; Verify does not panic.
func TestVerifyTurnsAPanickingCheckIntoAProblem(t *testing.T) {
	t.Parallel()
	f := standard(t)
	in := f.input()
	in.CheckVersion = func(prev, next ledger.Item) error {
		if next.S("dlq_id") == "src#b" {
			panic("bad item")
		}
		return nil
	}
	res := ledger.Verify(in)
	if !res.Has(ledger.KindForged, "src#b") || res.Has(ledger.KindForged, "src#a") {
		t.Fatalf("problems %v", res.Problems)
	}
}

// A MODIFY's full old image (old_item, what the counters are recounted
// from) must be the ledgered version before it: one that is another
// record's image is named, even though its old version and seal are
// right; the right image passes.
func TestVerifyChecksAModifysOldImage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		image func(f *fixture) ledger.Item
		want  bool
	}{
		{"the version before", func(f *fixture) ledger.Item { return f.table["src#a"] }, false},
		{"another version of it", func(f *fixture) ledger.Item { return record("src#a", 1, "PARKED") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.write("shard-1", "src#a", 1)
			f.write("shard-1", "src#b", 1)
			f.flush("shard-1")
			old := c.image(f)
			f.write("shard-1", "src#a", 2)
			p := f.pending["shard-1"]
			p[len(p)-1].OldItem = old
			f.flush("shard-1")
			f.digest()
			res := ledger.Verify(f.input())
			if got := res.Has(ledger.KindOldMismatch, "src#a"); got != c.want {
				t.Fatalf("old-mismatch named %v, want %v: %v", got, c.want, res.Problems)
			}
			if !c.want && !res.OK() {
				t.Fatalf("problems %v", res.Problems)
			}
		})
	}
}

// A version without a version number is forged, and the version after it
// is still checked against it: a table writer cannot slip a forged
// version in behind one.
func TestVerifyNamesAVersionWithoutANumber(t *testing.T) {
	t.Parallel()
	f := standard(t)
	x := record("src#b", 4, "OPEN")
	delete(x, "version")
	f.modify("shard-1", x)
	forged := record("src#b", 4, "OPEN")
	forged["payload"] = ledger.Str("forged") // fixtureCheck: a changed payload is no transition
	f.modify("shard-1", forged)
	f.flush("shard-1")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindForged, "src#b") {
		t.Fatalf("not named forged: %v", res.Problems)
	}
	n := 0
	for _, p := range res.Problems {
		if p.Kind == ledger.KindForged && p.Subject == "src#b" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d versions of src#b named forged, want the one without a number and the one after it: %v", n, res.Problems)
	}
}
