package quarantine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// countingLister counts the List calls and fails the call numbered failAt
// (0: never).
type countingLister struct {
	quarantine.Lister
	calls, failAt int
}

var errList = errors.New("list failed")

func (c *countingLister) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	c.calls++
	if c.calls == c.failAt {
		return quarantine.ListPage{}, errList
	}
	return c.Lister.List(ctx, q)
}

func listStore(t *testing.T, n int) (*memstore.Store, []string) {
	t.Helper()
	store := memstore.New()
	var ids []string
	for i := range n {
		r := sealedRecord(t, fmt.Sprintf("evt-%d", i), validBody, fixtureTime.Add(time.Duration(i)*time.Second))
		if err := store.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.DLQID)
	}
	return store, ids
}

func TestPagesFollowsTheCursorToTheLastPage(t *testing.T) {
	t.Parallel()
	store, want := listStore(t, 5)
	q := quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 2}
	l := &countingLister{Lister: store}
	var pages [][]string
	for page, err := range quarantine.Pages(context.Background(), l, q) {
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, page.IDs)
	}
	if len(pages) != 3 || l.calls != 3 {
		t.Fatalf("pages = %v after %d calls, want 3 pages of at most 2", pages, l.calls)
	}
	if got := slices.Concat(pages...); !slices.Equal(got, want) {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	got, err := quarantine.ListIDs(context.Background(), store, q)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ListIDs = %v, %v; want %v", got, err, want)
	}
	got, err = quarantine.ListIDs(context.Background(), store, quarantine.ListQuery{Status: quarantine.StatusParked})
	if err != nil || len(got) != 0 {
		t.Fatalf("ListIDs of an empty status = %v, %v", got, err)
	}
}

func TestPagesStopsWhenTheLoopBreaks(t *testing.T) {
	t.Parallel()
	store, want := listStore(t, 5)
	l := &countingLister{Lister: store}
	var got []string
	for page, err := range quarantine.Pages(context.Background(), l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.IDs...)
		if len(got) >= 3 {
			break
		}
	}
	if l.calls != 2 || !slices.Equal(got, want[:4]) {
		t.Fatalf("got %v after %d calls, want %v after 2", got, l.calls, want[:4])
	}
}

func TestPagesYieldsAnErrorOnceAndEnds(t *testing.T) {
	t.Parallel()
	store, _ := listStore(t, 5)
	l := &countingLister{Lister: store, failAt: 2}
	var pages, errs int
	for _, err := range quarantine.Pages(context.Background(), l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 2}) {
		if err != nil {
			if !errors.Is(err, errList) {
				t.Fatalf("err = %v", err)
			}
			errs++
			continue
		}
		pages++
	}
	if pages != 1 || errs != 1 || l.calls != 2 {
		t.Fatalf("%d pages, %d errors, %d calls; want 1, 1, 2", pages, errs, l.calls)
	}
	if _, err := quarantine.ListIDs(context.Background(), &countingLister{Lister: store, failAt: 1}, quarantine.ListQuery{Status: quarantine.StatusQuarantined}); !errors.Is(err, errList) {
		t.Fatalf("ListIDs err = %v", err)
	}
}

func TestPagesStartsAtTheGivenCursor(t *testing.T) {
	t.Parallel()
	store, want := listStore(t, 4)
	first, err := store.List(context.Background(), quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 1})
	if err != nil || !slices.Equal(first.IDs, want[:1]) || first.Cursor == "" {
		t.Fatalf("first page %v, cursor %q, %v", first.IDs, first.Cursor, err)
	}
	got, err := quarantine.ListIDs(context.Background(), store, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 3, Cursor: first.Cursor})
	if err != nil || !slices.Equal(got, want[1:]) {
		t.Fatalf("ListIDs from %s = %v, %v; want %v", want[0], got, err, want[1:])
	}
}

// filterAfterLimit lists as DynamoDB does with a filter: it reads Limit
// items, then drops the ids in hidden, so a page may be empty with a cursor.
type filterAfterLimit struct {
	ids    []string
	hidden map[string]bool
	limits []int
}

func (f *filterAfterLimit) List(_ context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	f.limits = append(f.limits, q.Limit)
	start := 0
	if q.Cursor != "" {
		start = slices.Index(f.ids, q.Cursor) + 1
	}
	end := min(start+q.Limit, len(f.ids))
	var page quarantine.ListPage
	for _, id := range f.ids[start:end] {
		if !f.hidden[id] {
			page.IDs = append(page.IDs, id)
		}
	}
	if end < len(f.ids) {
		page.Cursor = f.ids[end-1]
	}
	return page, nil
}

func TestFirstIDReadsPastEmptyPages(t *testing.T) {
	t.Parallel()
	ids := make([]string, 150)
	for i := range ids {
		ids[i] = fmt.Sprintf("s#%03d", i)
	}
	hideFirst := func(n int) map[string]bool {
		h := map[string]bool{}
		for _, id := range ids[:n] {
			h[id] = true
		}
		return h
	}
	for _, c := range []struct {
		name   string
		hidden map[string]bool
		want   string
		limits []int
	}{
		{"first visible", nil, "s#000", []int{1}},
		{"the first hidden", hideFirst(1), "s#001", []int{1, 100}},
		{"a page and more hidden", hideFirst(120), "s#120", []int{1, 100, 100}},
		{"all hidden", hideFirst(150), "", []int{1, 100, 100}},
	} {
		l := &filterAfterLimit{ids: ids, hidden: c.hidden}
		got, err := quarantine.FirstID(context.Background(), l, quarantine.ListQuery{Status: quarantine.StatusParked, Limit: 1})
		if err != nil || got != c.want || !slices.Equal(l.limits, c.limits) {
			t.Errorf("%s: FirstID = %q, %v after limits %v; want %q after %v", c.name, got, err, l.limits, c.want, c.limits)
		}
	}
	empty := &filterAfterLimit{}
	if got, err := quarantine.FirstID(context.Background(), empty, quarantine.ListQuery{Limit: 1}); err != nil || got != "" || len(empty.limits) != 1 {
		t.Fatalf("FirstID of nothing = %q, %v after %d calls", got, err, len(empty.limits))
	}
	if _, err := quarantine.FirstID(context.Background(), &countingLister{Lister: &filterAfterLimit{ids: ids, hidden: hideFirst(5)}, failAt: 2}, quarantine.ListQuery{Limit: 1}); !errors.Is(err, errList) {
		t.Fatalf("a failed List: %v", err)
	}
}
