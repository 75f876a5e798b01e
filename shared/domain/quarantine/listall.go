package quarantine

import (
	"context"
	"iter"
)

// Pages pages through what q selects: it yields each page in turn,
// following the cursor from q.Cursor ("" for the first page) to the last
// page. A failed List is yielded once, with its error, and ends the
// sequence; a loop that breaks stops the listing after the page in hand,
// so a caller that needs only so many ids reads no page more than it needs:
//
//	for page, err := range quarantine.Pages(ctx, lister, q) {
//		if err != nil {
//			return err
//		}
//		ids = append(ids, page.IDs...)
//		if len(ids) >= limit {
//			break
//		}
//	}
func Pages(ctx context.Context, l Lister, q ListQuery) iter.Seq2[ListPage, error] {
	return func(yield func(ListPage, error) bool) {
		for {
			page, err := l.List(ctx, q)
			if err != nil {
				yield(ListPage{}, err)
				return
			}
			if !yield(page, nil) || page.Cursor == "" {
				return
			}
			q.Cursor = page.Cursor
		}
	}
}

// ListIDs returns every id q selects, first to last page.
func ListIDs(ctx context.Context, l Lister, q ListQuery) ([]string, error) {
	var ids []string
	for page, err := range Pages(ctx, l, q) {
		if err != nil {
			return nil, err
		}
		ids = append(ids, page.IDs...)
	}
	return ids, nil
}

// firstMoreLimit is the page size FirstID reads on with after an empty
// first page.
const firstMoreLimit = 100

// FirstID returns the first id q selects, or "" when it selects none. A
// store may return an empty page with a cursor (DynamoDB applies a
// listing's filter, the integrity hold's say, after its Limit): FirstID
// then reads on, from q.Limit to at least 100 items a page, until an id or
// the end. Use a Limit of 1 for the common case of one query.
func FirstID(ctx context.Context, l Lister, q ListQuery) (string, error) {
	e, ok, err := FirstEntry(ctx, l, q)
	if !ok {
		return "", err
	}
	return e.ID, err
}

// FirstEntry is FirstID's entry: the first entry q selects, ok false when
// it selects none.
func FirstEntry(ctx context.Context, l Lister, q ListQuery) (ListEntry, bool, error) {
	page, err := l.List(ctx, q)
	if err != nil || len(page.IDs) > 0 || page.Cursor == "" {
		return firstOf(page), len(page.IDs) > 0 && err == nil, err
	}
	q.Cursor, q.Limit = page.Cursor, max(q.Limit, firstMoreLimit)
	for page, err := range Pages(ctx, l, q) {
		if err != nil || len(page.IDs) > 0 {
			return firstOf(page), len(page.IDs) > 0 && err == nil, err
		}
	}
	return ListEntry{}, false, nil
}

func firstOf(p ListPage) ListEntry {
	if len(p.IDs) == 0 {
		return ListEntry{}
	}
	if len(p.Entries) > 0 {
		return p.Entries[0]
	}
	return ListEntry{ID: p.IDs[0]}
}

// SourceLister is a Lister that names every source that has records,
// configured or not, in name order.
type SourceLister interface {
	ListSources(ctx context.Context) ([]string, error)
}

// OldestLister is a Lister whose listings across sources (Source "") go
// source by source: Oldest finds the entry with the oldest first_seen
// that q selects across them.
type OldestLister interface {
	Oldest(ctx context.Context, q ListQuery) (ListEntry, bool, error)
}

// Oldest is the entry with the oldest first_seen that q selects, ok false
// when it selects none. A store's listing across sources is in first_seen
// order within each source only (OldestLister): it is asked for the oldest
// instead.
func Oldest(ctx context.Context, l Lister, q ListQuery) (ListEntry, bool, error) {
	if ol, ok := l.(OldestLister); ok && q.Source == "" {
		return ol.Oldest(ctx, q)
	}
	return FirstEntry(ctx, l, q)
}
