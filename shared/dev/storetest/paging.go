package storetest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// RunListerPaging runs the contract of a listing that pages through many
// records (over every index partition a store spreads a source over):
// small pages hand out every record of the source exactly once, oldest
// first_seen first, with the records of a FIFO message group in their
// order, also when records move to another status between pages (one
// already listed is not listed again, one not yet listed is not listed
// at all); a listing across sources hands out each record once, each
// source's in first_seen order; a SourceLister names the sources.
func RunListerPaging(t *testing.T, s quarantine.Store, l quarantine.Lister) {
	ctx := context.Background()
	source, other := UniqueID("pg-a"), UniqueID("pg-b")
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(28, 1))
	const n = 120
	order := rng.Perm(n) // creation order differs from first_seen order
	byID := map[string]*quarantine.Record{}
	var want, group []string // want: first_seen order; group: group g's
	ids := make([]string, n)
	for _, i := range order {
		r := editedIn(t, source, "pg", func(r *quarantine.Record) {
			r.FirstSeen = quarantine.At(base.Add(time.Duration(i) * 1100 * time.Millisecond))
			r.StatusSince = r.FirstSeen
			if i%5 == 0 {
				r.MessageGroupID = "g" // one group, spread over the partitions
			}
			if i%7 == 3 {
				r.FailureClass = quarantine.ClassValidation // filtered out below
			}
		})
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids[i], byID[r.DLQID] = r.DLQID, r
	}
	for i, id := range ids {
		if i%7 == 3 {
			continue
		}
		want = append(want, id)
		if i%5 == 0 {
			group = append(group, id)
		}
	}
	var others []string
	for i := range 5 {
		r := editedIn(t, other, "pgo", func(r *quarantine.Record) {
			r.FirstSeen = quarantine.At(base.Add(time.Duration(i) * time.Hour))
		})
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		others = append(others, r.DLQID)
	}

	q := quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Classes: []quarantine.Class{quarantine.ClassExhausted}, Limit: 7}
	t.Run("small pages hand out each record once, oldest first", func(t *testing.T) {
		got := listIDs(t, l, q)
		if !slices.Equal(got, want) {
			t.Fatalf("listed %d ids, want %d in first_seen order\n got %v\nwant %v", len(got), len(want), got, want)
		}
		var g []string
		for _, id := range got {
			if byID[id].MessageGroupID == "g" {
				g = append(g, id)
			}
		}
		if !slices.Equal(g, group) {
			t.Fatalf("group g listed as %v, want %v", g, group)
		}
	})

	t.Run("records that move between pages", func(t *testing.T) {
		page, err := l.List(ctx, q)
		if err != nil || page.Cursor == "" || len(page.IDs) == 0 {
			t.Fatalf("first page %v, cursor %q, %v", page.IDs, page.Cursor, err)
		}
		listed, later := page.IDs[len(page.IDs)-1], want[len(want)-10]
		for _, id := range []string{listed, later} {
			cur, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			next, err := cur.ParkManual("ops", "moved between pages", cur.FirstSeen.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Replace(ctx, cur, next); err != nil {
				t.Fatal(err)
			}
		}
		rest := q
		rest.Cursor = page.Cursor
		got := append(slices.Clone(page.IDs), listIDs(t, l, rest)...)
		expect := slices.DeleteFunc(slices.Clone(want), func(id string) bool { return id == later })
		if !slices.Equal(got, expect) {
			t.Fatalf("listed across the moves\n got %v\nwant %v", got, expect)
		}
		want = slices.DeleteFunc(want, func(id string) bool { return id == listed || id == later })
	})

	t.Run("across sources, each record once, each source in order", func(t *testing.T) {
		all := listIDs(t, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Classes: []quarantine.Class{quarantine.ClassExhausted}, Limit: 9})
		// (Other tests' records are in the table too, some changing
		// meanwhile: only this test's are checked.)
		var mine, theirs []string
		for _, id := range all {
			if r := byID[id]; r != nil {
				mine = append(mine, id)
			}
			if slices.Contains(others, id) {
				theirs = append(theirs, id)
			}
		}
		if !slices.Equal(mine, want) || !slices.Equal(theirs, others) {
			t.Fatalf("across sources: %v and %v\nwant %v and %v", mine, theirs, want, others)
		}
	})

	t.Run("the oldest of a source", func(t *testing.T) {
		e, ok, err := quarantine.Oldest(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Limit: 1})
		if err != nil || !ok || e.ID != ids[0] {
			t.Fatalf("oldest = %q, %v, %v; want %s", e.ID, ok, err, ids[0])
		}
		e, ok, err = quarantine.Oldest(ctx, l, quarantine.ListQuery{Status: quarantine.StatusParked, Source: source, Limit: 1})
		if err != nil || !ok || byID[e.ID] == nil {
			t.Fatalf("oldest parked = %q, %v, %v", e.ID, ok, err)
		}
	})

	if sl, ok := l.(quarantine.SourceLister); ok {
		t.Run("the sources are named", func(t *testing.T) {
			names, err := sl.ListSources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(names, source) || !slices.Contains(names, other) || !slices.IsSorted(names) {
				t.Fatalf("sources %v lack %s or %s, or are not sorted", names, source, other)
			}
		})
	}
}
