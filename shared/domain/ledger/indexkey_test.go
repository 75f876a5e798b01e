package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// indexKey is the fixture's derivation of the index key: status and key.
func indexKey(it ledger.Item) string { return it.S("status") + "#" + it.S("dlq_id") }

func withKey(it ledger.Item, key string) ledger.Item {
	out := ledger.Item{}
	for k, v := range it {
		out[k] = v
	}
	out[ledger.IndexKeyAttr] = ledger.Str(key)
	return out
}

// The index backfill adds status_key to a version in place: accepted only
// when that is the one change and the key is the one the item's fields
// derive; any version whose key is not derived is named index-key.
func TestVerifyAcceptsOnlyTheDerivedIndexKeyAddedInPlace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// build runs after version 1 without an index key.
		build func(f *fixture)
		kind  ledger.Kind
		want  string // "" = no problem
		off   bool   // no Input.IndexKey
		// moving: Input.IndexKeyFrom after the changes (written while the
		// listings still read the other index).
		moving bool
	}{
		{"derived key added", func(f *fixture) { f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a")) }, "", "", false, false},
		{"derived key added to a held version", func(f *fixture) {
			held := hold(record("src#a", 1, "OPEN"), f.now)
			f.modify("shard-1", held)
			f.modify("shard-1", withKey(held, "OPEN#src#a"))
		}, "", "", false, false},
		{"derived key, then the next version with it", func(f *fixture) {
			f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a"))
			f.modify("shard-1", withKey(record("src#a", 2, "DONE"), "DONE#src#a"))
		}, "", "", false, false},
		{"another key added", func(f *fixture) { f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#zzz")) },
			ledger.KindIndexKey, `carries index key "OPEN#src#zzz", its fields derive "OPEN#src#a"`, false, false},
		{"key added with another change", func(f *fixture) { f.modify("shard-1", withKey(record("src#a", 1, "DONE"), "DONE#src#a")) },
			ledger.KindRewritten, "rewrote version 1 in place", false, false},
		{"key rewritten in place", func(f *fixture) {
			f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a"))
			f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#b"))
		}, ledger.KindRewritten, "rewrote version 1 in place", false, false},
		{"a new version under another key", func(f *fixture) { f.modify("shard-1", withKey(record("src#a", 2, "OPEN"), "DONE#src#a")) },
			ledger.KindIndexKey, "the listings would not find it", false, false},
		{"the next version without the key its version before had", func(f *fixture) {
			f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a"))
			f.modify("shard-1", record("src#a", 2, "DONE"))
		}, ledger.KindIndexKey, "has no index key, the version before it had one", false, false},
		{"the same, written before the listings read the index", func(f *fixture) {
			f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a"))
			f.modify("shard-1", record("src#a", 2, "DONE"))
		}, "", "", false, true},
		{"without the derivation, a key added is a rewrite", func(f *fixture) { f.modify("shard-1", withKey(record("src#a", 1, "OPEN"), "OPEN#src#a")) },
			ledger.KindRewritten, "rewrote version 1 in place", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.write("shard-1", "src#a", 1)
			c.build(f)
			f.flush("shard-1")
			f.digest()
			in := f.input()
			if !c.off {
				in.IndexKey = indexKey
				from := time.Time{}
				if c.moving {
					from = time.Now().Add(24 * time.Hour)
				}
				in.IndexKeyFrom = &from
			}
			res := ledger.Verify(in)
			if c.want == "" {
				if !res.OK() {
					t.Fatalf("problems %v", res.Problems)
				}
				return
			}
			found := false
			for _, p := range res.Problems {
				found = found || (p.Kind == c.kind && p.Subject == "src#a" && strings.Contains(p.Detail, c.want))
			}
			if !found {
				t.Fatalf("problems %v, want src#a %s: %s", res.Problems, c.kind, c.want)
			}
		})
	}
}
