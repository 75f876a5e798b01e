package demo

import (
	"context"
	"strconv"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// indexLister lists like dynamostore on DynamoDB: a page examines Limit
// index items and only then applies the filters (source, held), so a page
// whose items are all filtered out is empty and still has a cursor.
type indexLister struct {
	items []indexItem
}

type indexItem struct {
	id, source string
	status     quarantine.Status
	held       bool
}

func (l *indexLister) List(_ context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	var index []indexItem
	for _, it := range l.items {
		if it.status == q.Status {
			index = append(index, it)
		}
	}
	from := 0
	if q.Cursor != "" {
		from, _ = strconv.Atoi(q.Cursor)
	}
	to := len(index)
	if q.Limit > 0 {
		to = min(from+q.Limit, len(index))
	}
	var page quarantine.ListPage
	for _, it := range index[from:to] {
		if it.held == q.Held && (q.Source == "" || it.source == q.Source) {
			page.IDs = append(page.IDs, it.id)
		}
	}
	if to < len(index) {
		page.Cursor = strconv.Itoa(to)
	}
	return page, nil
}

// A held record, or another source's, ahead in the status index empties
// the first page of a filtered listing without ending it: the soak's
// in-flight and parked checks page on until an entry or the end.
func TestSoakChecksPagePastFilteredPages(t *testing.T) {
	ctx := context.Background()
	ahead := func(status quarantine.Status) []indexItem {
		return []indexItem{
			{id: "held", source: "src", status: status, held: true},
			{id: "other", source: "other-src", status: status},
		}
	}
	for _, tc := range []struct {
		name   string
		items  []indexItem
		check  func(*soak, context.Context) (bool, error)
		listed bool
	}{
		{"redriving behind a held record", append(ahead(quarantine.StatusRedriving), indexItem{id: "r", source: "src", status: quarantine.StatusRedriving}),
			(*soak).inFlight, true},
		{"redriven behind a held record", append(ahead(quarantine.StatusRedriven), indexItem{id: "r", source: "src", status: quarantine.StatusRedriven}),
			(*soak).inFlight, true},
		{"only held and other sources in flight", append(ahead(quarantine.StatusRedriving), ahead(quarantine.StatusRedriven)...),
			(*soak).inFlight, false},
		{"parked behind a held record", append(ahead(quarantine.StatusParked), indexItem{id: "p", source: "src", status: quarantine.StatusParked}),
			(*soak).parkedLeft, true},
		{"only held and other sources parked", ahead(quarantine.StatusParked),
			(*soak).parkedLeft, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{fns: &localrunner.Functions{Source: "src"}, lister: &indexLister{items: tc.items}}
			got, err := tc.check(s, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.listed {
				t.Fatalf("got %v, want %v", got, tc.listed)
			}
		})
	}
}
