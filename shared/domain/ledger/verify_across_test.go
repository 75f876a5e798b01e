package ledger_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// Input.CheckAll is called once, after the per-version checks, with every
// ledgered key's versions in order, sorted by key: a key's INSERT has no
// version before it, a key whose first ledgered change follows its
// baseline entry has that entry before it, a key only in the baseline
// has only that entry, a key whose first change is not an INSERT (and
// no baseline) says its version before is unknown, a REMOVE is left out,
// and each key carries the kinds of problem already named on it. What
// it returns is added to the result.
func TestCheckAllSeesEveryKeysVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old, still := record("src#old", 1, "OPEN"), record("src#still", 1, "OPEN")
	f.table["src#old"], f.table["src#still"] = old, still
	f.baseline([]ledger.Item{old, still})
	f.digest()
	f.write("shard-1", "src#a", 1)
	f.write("shard-1", "src#old", 2)
	f.write("shard-1", "src#a", 2)
	f.write("shard-1", "src#gone", 1)
	f.remove("shard-1", "src#gone")
	f.write("shard-1", "src#bad", 1)
	bad := f.pending["shard-1"][len(f.pending["shard-1"])-1].Item
	bad["seal"] = ledger.Str("not-its-seal")
	f.table["src#late"] = record("src#late", 2, "OPEN")
	f.write("shard-1", "src#late", 3)
	f.flush("shard-1")
	f.digest()

	var got []ledger.KeyHistory
	calls := 0
	in := f.input()
	in.CheckAll = func(keys []ledger.KeyHistory) ([]ledger.Problem, []ledger.Note) {
		calls++
		got = slices.Clone(keys)
		return []ledger.Problem{{Kind: ledger.KindUnapproved, Subject: "src#a", Detail: "claimed a parked record without an approval"}},
			[]ledger.Note{{Subject: "src#a", Detail: "four-eyes-off: …"}}
	}
	res := ledger.Verify(in)
	if calls != 1 {
		t.Fatalf("CheckAll called %d times", calls)
	}
	var keys []string
	for _, k := range got {
		keys = append(keys, k.Key)
	}
	if want := []string{"src#a", "src#bad", "src#gone", "src#late", "src#old", "src#still"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	versions := func(k ledger.KeyHistory) []int64 {
		var vs []int64
		for _, v := range k.Versions {
			n, _ := v.Item.Int("version")
			vs = append(vs, n)
			if v.Seq == "" || v.At == "" {
				t.Errorf("%s: a version without its change or time: %+v", k.Key, v)
			}
		}
		return vs
	}
	byKey := map[string]ledger.KeyHistory{}
	for _, k := range got {
		byKey[k.Key] = k
	}
	for _, c := range []struct {
		key           string
		before        int64 // the version before's number, 0: none
		beforeUnknown bool
		versions      []int64
		named         ledger.Kind
	}{
		{key: "src#a", versions: []int64{1, 2}},
		{key: "src#bad", versions: []int64{1}, named: ledger.KindForged},
		{key: "src#gone", versions: []int64{1}, named: ledger.KindDeleted},
		{key: "src#late", beforeUnknown: true, versions: []int64{3}, named: ledger.KindVersionMissing},
		{key: "src#old", before: 1, versions: []int64{2}},
		{key: "src#still", before: 1},
	} {
		k := byKey[c.key]
		var before int64
		if k.Before != nil {
			before, _ = k.Before.Int("version")
		}
		if before != c.before || k.BeforeUnknown != c.beforeUnknown || !slices.Equal(versions(k), c.versions) {
			t.Errorf("%s: before %d (unknown %v), versions %v; want %d (%v), %v", c.key, before, k.BeforeUnknown, versions(k), c.before, c.beforeUnknown, c.versions)
		}
		if c.named != "" && !slices.Contains(k.Named, c.named) {
			t.Errorf("%s: named %v, want %s among them", c.key, k.Named, c.named)
		}
		if c.named == "" && len(k.Named) > 0 {
			t.Errorf("%s: named %v", c.key, k.Named)
		}
	}
	if !res.Has(ledger.KindUnapproved, "src#a") || len(res.Notes) != 1 || res.Notes[0].Subject != "src#a" {
		t.Fatalf("CheckAll's problem and note: %v %v", res.Problems, res.Notes)
	}
	if !slices.IsSortedFunc(res.Problems, func(a, b ledger.Problem) int {
		return strings.Compare(string(a.Kind)+"\x00"+a.Subject, string(b.Kind)+"\x00"+b.Subject)
	}) {
		t.Errorf("problems not sorted: %v", res.Problems)
	}

	// Without CheckAll nothing of the kind is named; a CheckAll that
	// panics is a problem, not a crash.
	if res := ledger.Verify(f.input()); res.Has(ledger.KindUnapproved, "src#a") || len(res.Notes) > 0 {
		t.Errorf("without CheckAll: %v %v", res.Problems, res.Notes)
	}
	in = f.input()
	in.CheckAll = func([]ledger.KeyHistory) ([]ledger.Problem, []ledger.Note) { panic("boom") }
	if res := ledger.Verify(in); !res.Has(ledger.KindUnapproved, "(all)") {
		t.Errorf("a panicking CheckAll: %v", res.Problems)
	}
}
