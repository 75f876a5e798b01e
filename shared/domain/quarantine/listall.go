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
	page, err := l.List(ctx, q)
	if err != nil || len(page.IDs) > 0 || page.Cursor == "" {
		return firstOf(page), err
	}
	q.Cursor, q.Limit = page.Cursor, max(q.Limit, firstMoreLimit)
	for page, err := range Pages(ctx, l, q) {
		if err != nil || len(page.IDs) > 0 {
			return firstOf(page), err
		}
	}
	return "", nil
}

func firstOf(p ListPage) string {
	if len(p.IDs) == 0 {
		return ""
	}
	return p.IDs[0]
}
