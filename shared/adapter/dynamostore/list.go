package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
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

// Lister implements quarantine.Lister with one Query on the status index
// per page: status is the partition key, first_seen the sort key and range,
// source, class and signature filters. It never scans the table.
type Lister struct {
	api   QueryAPI
	table string
}

// NewLister returns a Lister on table's status index.
func NewLister(api QueryAPI, table string) *Lister {
	return &Lister{api: api, table: table}
}

// List implements quarantine.Lister. A page may hold fewer ids than Limit
// (filters apply after the index read); keep going while Cursor is set.
func (l *Lister) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	in, err := listInput(l.table, q)
	if err != nil {
		return quarantine.ListPage{}, err
	}
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
	key := expression.Key(statusAttr).Equal(expression.Value(string(q.Status)))
	from, to := q.FirstSeenFrom, q.FirstSeenTo
	switch {
	case !from.IsZero() && !to.IsZero():
		key = key.And(expression.Key(firstSeenAttr).Between(expression.Value(quarantine.At(from).String()), expression.Value(quarantine.At(to).String())))
	case !from.IsZero():
		key = key.And(expression.Key(firstSeenAttr).GreaterThanEqual(expression.Value(quarantine.At(from).String())))
	case !to.IsZero():
		key = key.And(expression.Key(firstSeenAttr).LessThanEqual(expression.Value(quarantine.At(to).String())))
	}
	b := expression.NewBuilder().WithKeyCondition(key).WithProjection(entryProjection())
	// Held records are left out of every listing but the one that asks
	// for them (integrity_hold is projected into the index).
	conds := []expression.ConditionBuilder{expression.AttributeNotExists(expression.Name(HoldAttr))}
	if q.Held {
		conds[0] = expression.AttributeExists(expression.Name(HoldAttr))
	}
	if q.Source != "" {
		conds = append(conds, expression.Name(sourceAttr).Equal(expression.Value(q.Source)))
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
	if len(conds) == 1 {
		b = b.WithFilter(conds[0])
	} else {
		b = b.WithFilter(expression.And(conds[0], conds[1], conds[2:]...))
	}
	expr, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("build query: %w", err)
	}
	input := &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	if q.Limit > 0 {
		input.Limit = aws.Int32(int32(q.Limit))
	}
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil {
			return nil, fmt.Errorf("cursor: %w", err)
		}
		var key map[string]string
		if err := json.Unmarshal(raw, &key); err != nil {
			return nil, fmt.Errorf("cursor: %w", err)
		}
		input.ExclusiveStartKey, err = attributevalue.MarshalMap(key)
		if err != nil {
			return nil, fmt.Errorf("cursor: %w", err)
		}
	}
	return input, nil
}

// FilteredAttributes names every attribute a List filters on, beyond the
// index keys: the status index must project each of them, since a filter
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
		if name != statusAttr && name != firstSeenAttr && name != KeyAttr {
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

// queryPartition hands each item of one partition of the status index (a
// source's counters or policies) to each, page by page.
func queryPartition(ctx context.Context, api QueryAPI, table, partition string, each func(map[string]types.AttributeValue) error) error {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(statusAttr).Equal(expression.Value(partition))).Build()
	if err != nil {
		return err
	}
	p := dynamodb.NewQueryPaginator(api, &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, item := range page.Items {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}
