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
