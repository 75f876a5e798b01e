package dynamostore

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A source's listing reads its IndexShards partitions of one status and
// merges them, oldest first_seen first. Each partition is sorted by
// first_seen; an item of a partition is handed out only when no other
// partition that still has unread items may hold an older one: every
// partition read so far up to at least its first_seen (the partition's
// frontier, its LastEvaluatedKey's first_seen). Within a page a partition
// is read on from its LastEvaluatedKey. The cursor holds, per partition,
// a first_seen to read on from (a key condition, not an item's key: an
// item handed out may have moved to another status by the next page, and
// a position is then still exact) and the ids of that first_seen already
// handed out, so that the next page resumes every partition exactly: no
// id is skipped or repeated. Items read and not handed out are read again
// by the next page. Within a FIFO message group first_seen strictly
// increases (ingest stamps it so), so group order holds across
// partitions; items of the same first_seen in different partitions come
// in id order.

const (
	// defaultPageLimit is a page's size when ListQuery.Limit is 0.
	defaultPageLimit = 1000
	// mergeParallel bounds the partition queries in flight.
	mergeParallel = 8
	// mergeCursorVersion marks a source index cursor.
	mergeCursorVersion = 3
)

func pageLimit(q quarantine.ListQuery) int {
	if q.Limit > 0 {
		return q.Limit
	}
	return defaultPageLimit
}

// mergeBudget bounds the index items one page reads (beyond a first read
// of each partition): a page whose filters drop most items ends early,
// with a cursor, as a DynamoDB page does at its Limit.
func mergeBudget(limit int) int { return max(4*limit, 4*IndexShards) }

// shardPos is where one partition's listing resumes: at first_seen
// FirstSeen ("": from the start), past the IDs of that first_seen already
// handed out; nowhere when Done.
type shardPos struct {
	Done      bool     `json:"d,omitempty"`
	FirstSeen string   `json:"f,omitempty"`
	IDs       []string `json:"i,omitempty"`
}

// mergeCursor is a source index listing's cursor: the source in progress
// and its partitions' positions (nil: from the start).
type mergeCursor struct {
	V      int        `json:"v"`
	Source string     `json:"s,omitempty"`
	Pos    []shardPos `json:"p,omitempty"`
}

func (c *mergeCursor) encode() (string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

func (c *mergeCursor) encodeInto(dst *string) error {
	s, err := c.encode()
	*dst = s
	return err
}

// decodeCursor reads a List cursor: a source index cursor (c), or a
// status index cursor (legacy: the LastEvaluatedKey to start after).
func decodeCursor(s string) (c *mergeCursor, legacy map[string]types.AttributeValue, err error) {
	if s == "" {
		return nil, nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, nil, fmt.Errorf("cursor: %w", err)
	}
	var probe map[string]any
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil, fmt.Errorf("cursor: %w", err)
	}
	if _, ok := probe["v"]; ok {
		c = &mergeCursor{}
		if err := json.Unmarshal(raw, c); err != nil || c.V != mergeCursorVersion || (c.Pos != nil && len(c.Pos) != IndexShards) {
			return nil, nil, fmt.Errorf("cursor: not a cursor of this listing")
		}
		return c, nil, nil
	}
	var key map[string]string
	if err := json.Unmarshal(raw, &key); err != nil {
		return nil, nil, fmt.Errorf("cursor: %w", err)
	}
	legacy, err = attributevalue.MarshalMap(key)
	if err != nil {
		return nil, nil, fmt.Errorf("cursor: %w", err)
	}
	return nil, legacy, nil
}

// mergedPage is a page of one source and the index items it read.
type mergedPage struct {
	quarantine.ListPage
	read int
}

// shardStream is one partition of a source's listing in one page.
type shardStream struct {
	part  string
	from  shardPos // where the page began in it
	buf   []quarantine.ListEntry
	fs    []string // buf's first_seen as the index holds it
	start map[string]types.AttributeValue
	read  bool   // read at least once this page
	more  bool   // items not read yet
	front string // first_seen of the last item read (its LastEvaluatedKey)
	// at and atIDs: the first_seen of the last item handed out and the
	// ids of that first_seen handed out (from the cursor on).
	at    string
	atIDs []string
}

// mergeSource lists up to limit of source's entries that q selects, from
// the partitions' positions pos (nil: from the start). It returns the
// positions to go on from, nil when every partition is done.
func (l *Lister) mergeSource(ctx context.Context, q quarantine.ListQuery, source string, pos []shardPos, limit int) (mergedPage, []shardPos, error) {
	streams := make([]*shardStream, IndexShards)
	for k := range streams {
		st := &shardStream{part: RecordPartition(source, q.Status, k), more: true}
		if pos != nil {
			st.from = pos[k]
		}
		st.more = !st.from.Done
		st.at, st.atIDs = st.from.FirstSeen, slices.Clone(st.from.IDs)
		streams[k] = st
	}
	// The first read takes a share of the page from each partition; a
	// partition read on takes its share of what the page still lacks.
	chunk := max(1, (limit+IndexShards-1)/IndexShards)
	var page mergedPage
	fetch := func(todo []*shardStream) error {
		share := max(chunk, (limit-len(page.IDs))/max(len(todo), 1))
		n, err := l.fetchShards(ctx, q, todo, share)
		page.read += n
		return err
	}
	var first []*shardStream
	for _, st := range streams {
		if st.more {
			first = append(first, st)
		}
	}
	if err := fetch(first); err != nil {
		return mergedPage{}, nil, err
	}
	for len(page.IDs) < limit {
		var head *shardStream
		for _, st := range streams {
			if len(st.buf) > 0 && (head == nil || entryBefore(st, head)) {
				head = st
			}
		}
		var blocking []*shardStream
		for _, st := range streams {
			// A partition read up to before head's first_seen (its buffer
			// is then empty) may hold an older item: read on first.
			if st.more && (head == nil || st.front < head.fs[0]) {
				blocking = append(blocking, st)
			}
		}
		if len(blocking) == 0 {
			if head == nil {
				break
			}
			e, fs := head.buf[0], head.fs[0]
			if fs != head.at {
				head.at, head.atIDs = fs, nil
			}
			head.atIDs = append(head.atIDs, e.ID)
			head.buf, head.fs = head.buf[1:], head.fs[1:]
			page.IDs, page.Entries = append(page.IDs, e.ID), append(page.Entries, e)
			continue
		}
		// Past the budget the page ends, unless it is empty and some
		// frontier is only a lower bound (kumo): its position would not
		// move, and the next page would read the same again.
		if page.read >= mergeBudget(limit) && (len(page.IDs) > 0 || !l.boundOnly.Load()) {
			break
		}
		if err := fetch(blocking); err != nil {
			return mergedPage{}, nil, err
		}
	}
	next := make([]shardPos, IndexShards)
	done := true
	for k, st := range streams {
		switch {
		case len(st.buf) == 0 && !st.more:
			next[k] = shardPos{Done: true}
		case len(st.buf) == 0 && st.front != st.at:
			// Everything read was handed out or filtered away: on from
			// the frontier (the ids of that first_seen read and filtered
			// away are read again, and filtered again).
			next[k] = shardPos{FirstSeen: st.front}
		default:
			next[k] = shardPos{FirstSeen: st.at, IDs: st.atIDs}
		}
		done = done && next[k].Done
	}
	if done {
		return page, nil, nil
	}
	return page, next, nil
}

// entryBefore orders two streams' heads: first_seen, then id.
func entryBefore(a, b *shardStream) bool {
	return cmp.Or(cmp.Compare(a.fs[0], b.fs[0]), cmp.Compare(a.buf[0].ID, b.buf[0].ID)) < 0
}

func keyString(key map[string]types.AttributeValue, name string) string {
	if v, ok := key[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// fetchShards reads the next chunk of each stream's partition, at most
// mergeParallel queries at a time; it returns the items read.
func (l *Lister) fetchShards(ctx context.Context, q quarantine.ListQuery, todo []*shardStream, chunk int) (int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		read  int
		first error
	)
	sem := make(chan struct{}, mergeParallel)
	for _, st := range todo {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			n, err := l.fetchShard(ctx, q, st, chunk)
			mu.Lock()
			defer mu.Unlock()
			read += n
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return read, first
}

// fetchShard reads one chunk of st's partition: at first from the
// cursor's position (a key condition), then after st.start.
func (l *Lister) fetchShard(ctx context.Context, q quarantine.ListQuery, st *shardStream, chunk int) (int, error) {
	rq := q
	if !st.read && st.from.FirstSeen != "" {
		var at quarantine.Time
		if err := at.UnmarshalText([]byte(st.from.FirstSeen)); err != nil {
			return 0, fmt.Errorf("cursor: %w", err)
		}
		if at.After(rq.FirstSeenFrom) {
			rq.FirstSeenFrom = at.Time
		}
	}
	in, err := queryInput(l.table, IndexBySource, firstSeenRange(expression.Key(IndexKeyAttr).Equal(expression.Value(st.part)), rq), listFilters(q))
	if err != nil {
		return 0, err
	}
	if st.read {
		in.Limit, in.ExclusiveStartKey = aws.Int32(int32(chunk)), st.start
	} else {
		// A resumed partition reads past the ids handed out already, too.
		in.Limit = aws.Int32(int32(chunk + len(st.from.IDs)))
	}
	out, err := l.api.Query(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("query %s records: %w", q.Status, err)
	}
	st.read = true
	for _, item := range out.Items {
		e, fs := entryOf(item), keyString(item, firstSeenAttr)
		if e.ID == "" || (fs == st.from.FirstSeen && slices.Contains(st.from.IDs, e.ID)) {
			continue // handed out by an earlier page
		}
		st.buf, st.fs = append(st.buf, e), append(st.fs, fs)
	}
	st.start, st.more = out.LastEvaluatedKey, len(out.LastEvaluatedKey) > 0
	if st.more {
		// DynamoDB's LastEvaluatedKey of an index query holds the index's
		// keys; kumo's holds only the table's (docs/emulators.md). Then the
		// newest first_seen read is the frontier's lower bound: an item not
		// read is no older.
		if f := keyString(out.LastEvaluatedKey, firstSeenAttr); f != "" {
			st.front = f
		} else {
			l.boundOnly.Store(true)
			if n := len(st.fs); n > 0 && st.fs[n-1] > st.front {
				st.front = st.fs[n-1]
			}
		}
	}
	return int(out.ScannedCount), nil
}
