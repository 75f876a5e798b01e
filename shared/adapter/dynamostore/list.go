package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// QueryAPI is the part of the DynamoDB client List uses.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Lister implements quarantine.Lister on the source index: a source's
// listing queries each of its IndexShards partitions of the status asked
// (ListQuery's first_seen range as the key condition; class, signature,
// age and the integrity hold as filters) and merges them by first_seen
// (mergeSource). A listing across sources (Source "") goes source by
// source, in name order (ListSources), each source oldest first: its cost
// grows with the number of sources, not with their records. Until the
// backfill of status_key completes (indexState), it reads the status
// index instead, one partition per status with source a filter. It never
// scans the table.
type Lister struct {
	api   QueryAPI
	table string
	idx   *indexState
	// boundOnly is set once an index query's LastEvaluatedKey came back
	// without the index's keys (kumo's): see mergeSource.
	boundOnly atomic.Bool
}

// NewLister returns a Lister on table's indexes.
func NewLister(api QueryAPI, table string) *Lister {
	return &Lister{api: api, table: table, idx: newIndexState(api, table)}
}

// List implements quarantine.Lister. A page may hold fewer ids than Limit
// (filters apply after the index read); keep going while Cursor is set.
func (l *Lister) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	c, legacy, err := decodeCursor(q.Cursor)
	if err != nil {
		return quarantine.ListPage{}, err
	}
	v3 := false
	if legacy == nil {
		if v3, err = l.idx.bySource(ctx); err != nil {
			return quarantine.ListPage{}, err
		}
		if c != nil && !v3 {
			return quarantine.ListPage{}, errors.New("cursor: a source index cursor, and the source index is not in use")
		}
	}
	if !v3 {
		return l.listByStatus(ctx, q, legacy)
	}
	if c == nil {
		c = &mergeCursor{V: mergeCursorVersion}
	}
	if q.Source != "" {
		c.Source = q.Source
		page, pos, err := l.mergeSource(ctx, q, q.Source, c.Pos, pageLimit(q))
		if err != nil || pos == nil {
			return page.ListPage, err
		}
		c.Pos = pos
		page.Cursor, err = c.encode()
		return page.ListPage, err
	}
	return l.listAcross(ctx, q, c)
}

// listAcross lists every source's records, source by source in name
// order, from cursor c on: the sources are the markers' (ListSources).
func (l *Lister) listAcross(ctx context.Context, q quarantine.ListQuery, c *mergeCursor) (quarantine.ListPage, error) {
	sources, err := l.ListSources(ctx)
	if err != nil {
		return quarantine.ListPage{}, err
	}
	limit := pageLimit(q)
	var out quarantine.ListPage
	read := 0
	for i := 0; i < len(sources); i++ {
		src := sources[i]
		if src < c.Source {
			continue
		}
		if src != c.Source {
			c.Source, c.Pos = src, nil
		}
		if len(out.IDs) >= limit || read >= mergeBudget(limit) {
			return out, c.encodeInto(&out.Cursor)
		}
		sq := q
		sq.Source = src
		page, pos, err := l.mergeSource(ctx, sq, src, c.Pos, limit-len(out.IDs))
		if err != nil {
			return quarantine.ListPage{}, err
		}
		out.IDs, out.Entries = append(out.IDs, page.IDs...), append(out.Entries, page.Entries...)
		read += page.read
		if pos != nil {
			c.Pos = pos
			return out, c.encodeInto(&out.Cursor)
		}
		// The source is done: the next one starts afresh (a source name
		// after every queue name ends the listing).
		c.Source, c.Pos = src+"\x00", nil
	}
	return out, nil
}

// Oldest implements quarantine.OldestLister: across sources it asks each
// source for its oldest entry (IndexShards queries of one item each).
func (l *Lister) Oldest(ctx context.Context, q quarantine.ListQuery) (quarantine.ListEntry, bool, error) {
	v3, err := l.idx.bySource(ctx)
	if err != nil {
		return quarantine.ListEntry{}, false, err
	}
	if !v3 || q.Source != "" {
		return quarantine.FirstEntry(ctx, l, q)
	}
	sources, err := l.ListSources(ctx)
	if err != nil {
		return quarantine.ListEntry{}, false, err
	}
	var best quarantine.ListEntry
	found := false
	for _, src := range sources {
		sq := q
		sq.Source = src
		e, ok, err := quarantine.FirstEntry(ctx, l, sq)
		if err != nil {
			return quarantine.ListEntry{}, false, err
		}
		if ok && (!found || e.FirstSeen.Before(best.FirstSeen)) {
			best, found = e, true
		}
	}
	return best, found, nil
}

// listByStatus is List on the status index (before the backfill is
// complete): one Query of one status partition, source a filter.
func (l *Lister) listByStatus(ctx context.Context, q quarantine.ListQuery, start map[string]types.AttributeValue) (quarantine.ListPage, error) {
	in, err := listInput(l.table, q)
	if err != nil {
		return quarantine.ListPage{}, err
	}
	in.ExclusiveStartKey = start
	out, err := l.api.Query(ctx, in)
	if err != nil {
		return quarantine.ListPage{}, fmt.Errorf("query %s records: %w", q.Status, err)
	}
	var page quarantine.ListPage
	for _, item := range out.Items {
		if v, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok {
			page.IDs = append(page.IDs, v.Value)
			page.Entries = append(page.Entries, entryOf(item))
		}
	}
	if len(out.LastEvaluatedKey) > 0 {
		var key map[string]string
		if err := attributevalue.UnmarshalMap(out.LastEvaluatedKey, &key); err != nil {
			return quarantine.ListPage{}, fmt.Errorf("cursor: %w", err)
		}
		raw, _ := json.Marshal(key)
		page.Cursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	return page, nil
}

func listInput(table string, q quarantine.ListQuery) (*dynamodb.QueryInput, error) {
	key := firstSeenRange(expression.Key(statusAttr).Equal(expression.Value(string(q.Status))), q)
	conds := listFilters(q)
	if q.Source != "" {
		conds = append(conds, expression.Name(sourceAttr).Equal(expression.Value(q.Source)))
	}
	input, err := queryInput(table, IndexByStatus, key, conds)
	if err != nil {
		return nil, err
	}
	if q.Limit > 0 {
		input.Limit = aws.Int32(int32(q.Limit))
	}
	return input, nil
}

// firstSeenRange adds q's first_seen bounds to a key condition.
func firstSeenRange(key expression.KeyConditionBuilder, q quarantine.ListQuery) expression.KeyConditionBuilder {
	from, to := q.FirstSeenFrom, q.FirstSeenTo
	switch {
	case !from.IsZero() && !to.IsZero():
		key = key.And(expression.Key(firstSeenAttr).Between(expression.Value(quarantine.At(from).String()), expression.Value(quarantine.At(to).String())))
	case !from.IsZero():
		key = key.And(expression.Key(firstSeenAttr).GreaterThanEqual(expression.Value(quarantine.At(from).String())))
	case !to.IsZero():
		key = key.And(expression.Key(firstSeenAttr).LessThanEqual(expression.Value(quarantine.At(to).String())))
	}
	return key
}

// listFilters are q's filters but the source (which the source index
// partitions by): never a held record, unless q asks for held ones only
// (integrity_hold is projected into both indexes), and the status age,
// classes and signatures asked.
func listFilters(q quarantine.ListQuery) []expression.ConditionBuilder {
	conds := []expression.ConditionBuilder{expression.AttributeNotExists(expression.Name(HoldAttr))}
	if q.Held {
		conds[0] = expression.AttributeExists(expression.Name(HoldAttr))
	}
	if !q.StatusSinceBefore.IsZero() {
		conds = append(conds, expression.Name(statusSinceAttr).LessThanEqual(expression.Value(quarantine.At(q.StatusSinceBefore).String())))
	}
	if len(q.Classes) > 0 {
		conds = append(conds, in(classAttr, q.Classes))
	}
	if len(q.Signatures) > 0 {
		conds = append(conds, in(signatureAttr, q.Signatures))
	}
	return conds
}

// queryInput is a listing's Query of index: key, the filters conds and the
// entries' projection.
func queryInput(table, index string, key expression.KeyConditionBuilder, conds []expression.ConditionBuilder) (*dynamodb.QueryInput, error) {
	b := expression.NewBuilder().WithKeyCondition(key).WithProjection(entryProjection())
	if len(conds) == 1 {
		b = b.WithFilter(conds[0])
	} else {
		b = b.WithFilter(expression.And(conds[0], conds[1], conds[2:]...))
	}
	expr, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("build query: %w", err)
	}
	return &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(index),
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// FilteredAttributes names every attribute a List filters on, beyond the
// index keys: both indexes must project each of them (and the source
// index the status too, which is not its key), since a filter
// on an index sees only the attributes the index holds (an attribute it
// does not project looks absent, and attribute_not_exists holds).
func FilteredAttributes() []string {
	in, err := listInput("t", quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: "s", StatusSinceBefore: time.Unix(1, 0),
		Classes: []quarantine.Class{quarantine.ClassExhausted}, Signatures: []string{"a"}})
	if err != nil {
		panic(err) // a fixed query: cannot fail
	}
	var out []string
	for _, name := range in.ExpressionAttributeNames {
		if name != statusAttr && name != firstSeenAttr && name != KeyAttr && name != IndexKeyAttr {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// entryAttrs are the attributes a listing entry is read from; the status
// index projects each of them (TestTable checks the template).
var entryAttrs = []string{KeyAttr, statusAttr, firstSeenAttr, classAttr, signatureAttr, groupAttr, idempotencyKeyAttr, sequenceAttr, leaseUntilAttr, statusSinceAttr}

// EntryAttributes are the attributes listing entries are read from.
func EntryAttributes() []string { return append([]string(nil), entryAttrs...) }

func entryProjection() expression.ProjectionBuilder {
	names := make([]expression.NameBuilder, len(entryAttrs)-1)
	for i, n := range entryAttrs[1:] {
		names[i] = expression.Name(n)
	}
	return expression.NamesList(expression.Name(entryAttrs[0]), names...)
}

// entryOf reads a listing entry from an index item.
func entryOf(item map[string]types.AttributeValue) quarantine.ListEntry {
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	e := quarantine.ListEntry{ID: str(KeyAttr), Status: quarantine.Status(str(statusAttr)), Class: quarantine.Class(str(classAttr)),
		Signature: str(signatureAttr), Group: str(groupAttr), Sequence: str(sequenceAttr)}
	if e.Group == "" {
		e.Group = str(idempotencyKeyAttr)
	}
	var t quarantine.Time
	if t.UnmarshalText([]byte(str(firstSeenAttr))) == nil {
		e.FirstSeen = t.Time
	}
	var lease quarantine.Time
	if v := str(leaseUntilAttr); v != "" && lease.UnmarshalText([]byte(v)) == nil {
		e.LeaseUntil = lease.Time
	}
	var since quarantine.Time
	if since.UnmarshalText([]byte(str(statusSinceAttr))) == nil {
		e.StatusSince = since.Time
	}
	return e
}

func in[T ~string](name string, values []T) expression.ConditionBuilder {
	ops := make([]expression.OperandBuilder, len(values))
	for i, v := range values {
		ops[i] = expression.Value(string(v))
	}
	if len(ops) == 1 {
		return expression.Name(name).Equal(ops[0].(expression.ValueBuilder))
	}
	return expression.Name(name).In(ops[0], ops[1:]...)
}
