// Package dynamostore is the DynamoDB adapter for quarantine.Store. A record
// write (Create, Replace) is one TransactWriteItems: the whole record as a
// Put with a condition (attribute_not_exists on the key for a new record;
// equality on version, and no integrity hold, for a replacement), plus one
// Update per counter delta of the change (an ADD to one counter shard, its
// clauses on one line: docs/emulators.md). The record item is written whole,
// because partial update expressions are where emulators (and hand-written
// expressions) go wrong. A transaction cancelled for another reason than the
// record's condition (a race on a counter shard) is retried; a write that
// still fails (its condition, or every try) is read back: if the item holds
// exactly the version written, the write was applied and succeeds. Hold is
// the one write that does not replace the item: one transaction that sets
// the two hold attributes, on the condition that the item still holds the
// version read and no hold, and counts the hold.
package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// MaxItemBytes is DynamoDB's item size limit.
const MaxItemBytes = 400 * 1024

// Key attribute names and index names used in the template.
const (
	CounterAttr   = "n"
	KeyAttr       = "dlq_id"
	VersionAttr   = "version"
	IndexByStatus = "status-first-seen-v2"
	// HoldAttr and HoldAtAttr mark a record version set aside by an
	// integrity hold (Store.Hold): the reason kind and when. They are not
	// record fields (no seal covers them), and HoldAttr is projected into
	// the status index, whose listings leave held records out.
	HoldAttr   = "integrity_hold"
	HoldAtAttr = "integrity_hold_at"
)

// API is the part of the DynamoDB client the store uses.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Store is a quarantine.Store on one DynamoDB table.
type Store struct {
	api   API
	table string
}

// New returns a Store on table.
func New(api API, table string) *Store {
	return &Store{api: api, table: table}
}

// Marshal encodes a record as a DynamoDB item; the JSON field names are the
// attribute names.
func Marshal(r *quarantine.Record) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMapWithOptions(r, func(o *attributevalue.EncoderOptions) {
		o.TagKey = "json"
		o.UseEncodingMarshalers = true // quarantine.Time: fixed-width text that sorts
	})
	if err != nil {
		return nil, fmt.Errorf("marshal record %s: %w", r.DLQID, err)
	}
	return item, nil
}

// Unmarshal decodes a DynamoDB item into a record, marked as the state the
// store holds.
func Unmarshal(item map[string]types.AttributeValue) (*quarantine.Record, error) {
	var r quarantine.Record
	if err := attributevalue.UnmarshalMapWithOptions(item, &r, func(o *attributevalue.DecoderOptions) {
		o.TagKey = "json"
		o.UseEncodingUnmarshalers = true
	}); err != nil {
		return nil, fmt.Errorf("unmarshal record: %w", err)
	}
	r.MarkStored()
	return &r, nil
}

// Create implements quarantine.Store.
func (s *Store) Create(ctx context.Context, r *quarantine.Record) error {
	cond := expression.AttributeNotExists(expression.Name(KeyAttr))
	if err := s.put(ctx, r, cond); err != nil {
		if errors.Is(err, errConditionFailed) {
			return quarantine.ErrExists
		}
		return fmt.Errorf("create %s: %w", r.DLQID, err)
	}
	return nil
}

// Replace implements quarantine.Store.
func (s *Store) Replace(ctx context.Context, r *quarantine.Record, expectedVersion int64) error {
	// A held record is never overwritten: its item is the evidence.
	cond := expression.Name(VersionAttr).Equal(expression.Value(expectedVersion)).And(expression.AttributeNotExists(expression.Name(HoldAttr)))
	if err := s.put(ctx, r, cond); err != nil {
		if errors.Is(err, errConditionFailed) {
			if held, herr := s.held(ctx, r.DLQID); herr == nil && held {
				return fmt.Errorf("replace %s: %w", r.DLQID, quarantine.ErrHeld)
			}
			return quarantine.ErrVersionConflict
		}
		return fmt.Errorf("replace %s: %w", r.DLQID, err)
	}
	return nil
}

// held reports whether id's item carries an integrity hold.
func (s *Store) held(ctx context.Context, id string) (bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key:                      map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: id}},
		ProjectionExpression:     aws.String("#h"),
		ExpressionAttributeNames: map[string]string{"#h": HoldAttr},
	})
	if err != nil {
		return false, err
	}
	return out.Item[HoldAttr] != nil, nil
}

var errConditionFailed = errors.New("condition failed")

// put writes r under cond and, in the same transaction, the counter changes
// the write makes (quarantine.Record.CounterDeltas). Transactions that lose
// a race on a counter shard to another transaction are retried here: the
// record's own condition did not fail.
func (s *Store) put(ctx context.Context, r *quarantine.Record, cond expression.ConditionBuilder) error {
	item, err := Marshal(r)
	if err != nil {
		return err
	}
	if n := ItemSize(item); n > MaxItemBytes {
		return fmt.Errorf("item is %d bytes: %w", n, quarantine.ErrItemTooLarge)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("build condition: %w", err)
	}
	put := &types.Put{
		TableName: aws.String(s.table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	items := []types.TransactWriteItem{{Put: put}}
	for _, d := range r.CounterDeltas() {
		u, err := counterUpdate(s.table, d)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	err = s.transact(ctx, items)
	if err != nil && ctx.Err() == nil && s.applied(ctx, r) {
		// A retried write whose first try was applied fails its own
		// condition (or the call ran out of tries after it was applied):
		// the item holds exactly what we wrote, so the write succeeded.
		err = nil
	}
	if err != nil {
		return err
	}
	r.MarkStored()
	return nil
}

// transact runs one transaction whose first item is the record's own
// conditional write, retrying when it loses a race on a counter shard to
// another transaction. It returns errConditionFailed when the record's
// condition failed.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	var err error
	for attempt := 0; ; attempt++ {
		_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) {
			break
		}
		if len(tc.CancellationReasons) > 0 && aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			err = errConditionFailed
			break
		}
		if attempt >= 20 {
			return fmt.Errorf("counters contended: %w", quarantine.ErrContention)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.IntN(5<<min(attempt, 5))+1) * time.Millisecond):
		}
	}
	return err
}

// Hold implements quarantine.Store: one transaction that sets the hold
// attributes on the record item, only while it still holds h.Version and
// no hold, and counts the hold in the source's counter. Nothing else of
// the item is written.
func (s *Store) Hold(ctx context.Context, h quarantine.IntegrityHold) error {
	reason := h.Reason
	if reason == "" {
		reason = quarantine.HoldReason(nil)
	}
	cond := expression.AttributeExists(expression.Name(KeyAttr)).
		And(expression.AttributeNotExists(expression.Name(HoldAttr)))
	if h.Version >= 0 {
		// (A negative version holds an item whose version does not decode.)
		cond = cond.And(expression.Name(VersionAttr).Equal(expression.Value(h.Version)))
	}
	upd := expression.Set(expression.Name(HoldAttr), expression.Value(reason)).
		Set(expression.Name(HoldAtAttr), expression.Value(quarantine.At(h.At).String()))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("build hold: %w", err)
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(s.table), Key: map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: h.ID}},
		UpdateExpression:    aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}}}
	for _, d := range quarantine.HoldDeltas(h.ID, h.At) {
		counter, err := counterUpdate(s.table, d)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Update: counter})
	}
	err = s.transact(ctx, items)
	if !errors.Is(err, errConditionFailed) {
		if err != nil {
			return fmt.Errorf("hold %s: %w", h.ID, err)
		}
		return nil
	}
	// Why did the condition fail? Gone, already held, or another version.
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key:                      map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: h.ID}},
		ProjectionExpression:     aws.String("#v, #h"),
		ExpressionAttributeNames: map[string]string{"#v": VersionAttr, "#h": HoldAttr},
	})
	switch {
	case err != nil:
		return fmt.Errorf("hold %s: %w", h.ID, err)
	case len(out.Item) == 0:
		return fmt.Errorf("hold %s: %w", h.ID, quarantine.ErrNotFound)
	case out.Item[HoldAttr] != nil:
		return nil // held already: once is enough, and counted once
	}
	return quarantine.ErrVersionConflict
}

// HoldOf returns the integrity hold an item carries, if any.
func HoldOf(item map[string]types.AttributeValue) (quarantine.IntegrityHold, bool) {
	reason, ok := item[HoldAttr].(*types.AttributeValueMemberS)
	if !ok {
		return quarantine.IntegrityHold{}, false
	}
	h := quarantine.IntegrityHold{Reason: reason.Value}
	if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok {
		h.ID = k.Value
	}
	if v, ok := item[VersionAttr].(*types.AttributeValueMemberN); ok {
		fmt.Sscan(v.Value, &h.Version)
	}
	if at, ok := item[HoldAtAttr].(*types.AttributeValueMemberS); ok {
		var t quarantine.Time
		if t.UnmarshalText([]byte(at.Value)) == nil {
			h.At = t.Time
		}
	}
	return h, true
}

// applied reads r's item back and reports whether it is the version r
// writes. A failed read says nothing: the write counts as not applied.
func (s *Store) applied(ctx context.Context, r *quarantine.Record) bool {
	cur, err := s.Get(ctx, r.DLQID)
	return err == nil && quarantine.SameVersion(cur, r)
}

// counterUpdate adds d.N to one counter shard, creating it if need be.
func counterUpdate(table string, d quarantine.CounterDelta) (*types.Update, error) {
	upd := expression.Add(expression.Name(CounterAttr), expression.Value(d.N)).
		Set(expression.Name("source"), expression.Value(d.Source)).
		Set(expression.Name("counter_kind"), expression.Value(d.Kind))
	if d.Signature != "" {
		// Open-signature counters sit in the status index, one partition per
		// source, so that the metrics function lists them with one query.
		upd = upd.Set(expression.Name("status"), expression.Value(quarantine.OpenCounterPartition(d.Source))).
			Set(expression.Name("first_seen"), expression.Value(d.Key)).
			Set(expression.Name("failure_signature"), expression.Value(d.Signature))
	}
	if d.ExpiresAt != 0 {
		upd = upd.Set(expression.Name("expires_at"), expression.Value(d.ExpiresAt))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter update: %w", err)
	}
	return &types.Update{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: d.Key}},
		// One line: kumo drops the clauses after a newline (docs/emulators.md).
		UpdateExpression:         aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// Get implements quarantine.Store with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("get %s: %w", id, quarantine.ErrNotFound)
	}
	return decode(out.Item), nil
}

// decode is Unmarshal for the store's reads: an item that does not decode
// (changed outside the system) comes back as a stand-in that fails
// verification, so that it is set aside like any tampered record instead
// of failing every read, every run and every arrival for its key.
func decode(item map[string]types.AttributeValue) *quarantine.Record {
	r, err := Unmarshal(item)
	if err == nil {
		return r
	}
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	version := int64(-1)
	if v, ok := item[VersionAttr].(*types.AttributeValueMemberN); ok {
		if n, perr := strconv.ParseInt(v.Value, 10, 64); perr == nil {
			version = n
		}
	}
	r = quarantine.Undecodable(str(KeyAttr), str("source"), quarantine.Status(str("status")), str("seal"), version, "unmarshal: "+quarantine.ErrorKind(err))
	// What else still reads: its FIFO group (so the group waits for it)
	// and its age (so metrics do not take it for a record of year 1).
	r.MessageGroupID, r.IdempotencyKey = str("message_group_id"), str("idempotency_key")
	for name, t := range map[string]*quarantine.Time{"first_seen": &r.FirstSeen, "status_since": &r.StatusSince, "last_seen": &r.LastSeen} {
		_ = t.UnmarshalText([]byte(str(name)))
	}
	return r
}

// ItemSize computes an item's size by DynamoDB's rules: attribute names plus
// values, with 3 bytes of overhead per map or list and 1 per element.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return len(t.Value)
	case *types.AttributeValueMemberN:
		return (len(t.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(t.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range t.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range t.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range t.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range t.Value {
			n += (len(e)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range t.Value {
			n += len(e)
		}
		return n
	}
	return 0
}

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
	key := expression.Key("status").Equal(expression.Value(string(q.Status)))
	from, to := q.FirstSeenFrom, q.FirstSeenTo
	switch {
	case !from.IsZero() && !to.IsZero():
		key = key.And(expression.Key("first_seen").Between(expression.Value(quarantine.At(from).String()), expression.Value(quarantine.At(to).String())))
	case !from.IsZero():
		key = key.And(expression.Key("first_seen").GreaterThanEqual(expression.Value(quarantine.At(from).String())))
	case !to.IsZero():
		key = key.And(expression.Key("first_seen").LessThanEqual(expression.Value(quarantine.At(to).String())))
	}
	b := expression.NewBuilder().WithKeyCondition(key).WithProjection(entryProjection())
	// Held records are left out of every listing but the one that asks
	// for them (integrity_hold is projected into the index).
	conds := []expression.ConditionBuilder{expression.AttributeNotExists(expression.Name(HoldAttr))}
	if q.Held {
		conds[0] = expression.AttributeExists(expression.Name(HoldAttr))
	}
	if q.Source != "" {
		conds = append(conds, expression.Name("source").Equal(expression.Value(q.Source)))
	}
	if !q.StatusSinceBefore.IsZero() {
		conds = append(conds, expression.Name("status_since").LessThanEqual(expression.Value(quarantine.At(q.StatusSinceBefore).String())))
	}
	if len(q.Classes) > 0 {
		conds = append(conds, in("failure_class", q.Classes))
	}
	if len(q.Signatures) > 0 {
		conds = append(conds, in("failure_signature", q.Signatures))
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
		if name != "status" && name != "first_seen" && name != KeyAttr {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// entryAttrs are the attributes a listing entry is read from; the status
// index projects each of them (TestTable checks the template).
var entryAttrs = []string{KeyAttr, "status", "first_seen", "failure_class", "failure_signature", "message_group_id", "idempotency_key", "sequence_number", "lease_until", "status_since"}

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
	e := quarantine.ListEntry{ID: str(KeyAttr), Status: quarantine.Status(str("status")), Class: quarantine.Class(str("failure_class")),
		Signature: str("failure_signature"), Group: str("message_group_id"), Sequence: str("sequence_number")}
	if e.Group == "" {
		e.Group = str("idempotency_key")
	}
	var t quarantine.Time
	if t.UnmarshalText([]byte(str("first_seen"))) == nil {
		e.FirstSeen = t.Time
	}
	var lease quarantine.Time
	if v := str("lease_until"); v != "" && lease.UnmarshalText([]byte(v)) == nil {
		e.LeaseUntil = lease.Time
	}
	var since quarantine.Time
	if since.UnmarshalText([]byte(str("status_since"))) == nil {
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

// BatchAPI is the part of the DynamoDB client GetMany uses.
type BatchAPI interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem call.
const maxBatchGet = 100

// GetMany implements quarantine.BatchGetter with consistent BatchGetItem
// calls of at most 100 keys, retrying unprocessed keys. The store's client
// must implement BatchAPI.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*quarantine.Record, error) {
	out := make(map[string]*quarantine.Record, len(ids))
	err := s.batchGet(ctx, ids, nil, func(item map[string]types.AttributeValue) error {
		r := decode(item)
		out[r.DLQID] = r
		return nil
	})
	return out, err
}

// batchGet reads the items with the given keys (duplicates read once) in
// consistent BatchGetItem calls of at most 100 keys, retrying unprocessed
// keys with a growing pause, and hands each item to each.
func (s *Store) batchGet(ctx context.Context, ids []string, projection *expression.Expression, each func(map[string]types.AttributeValue) error) error {
	api, ok := s.api.(BatchAPI)
	if !ok {
		return errors.New("the DynamoDB client cannot BatchGetItem")
	}
	for start := 0; start < len(ids); start += maxBatchGet {
		var keys []map[string]types.AttributeValue
		seen := map[string]bool{}
		for _, id := range ids[start:min(start+maxBatchGet, len(ids))] {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: id}})
			}
		}
		ka := types.KeysAndAttributes{Keys: keys, ConsistentRead: aws.Bool(true)}
		if projection != nil {
			ka.ProjectionExpression, ka.ExpressionAttributeNames = projection.Projection(), projection.Names()
		}
		req := map[string]types.KeysAndAttributes{s.table: ka}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 8 {
				return fmt.Errorf("batch get: keys still unprocessed after %d tries", attempt)
			}
			res, err := api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return fmt.Errorf("batch get: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				if err := each(item); err != nil {
					return err
				}
			}
			req = res.UnprocessedKeys
			if len(req) > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// ReadCounters returns the values of the given counter keys (absent: 0),
// with consistent BatchGetItem calls of at most 100 keys.
func (s *Store) ReadCounters(ctx context.Context, keys []string) (map[string]int64, error) {
	out := make(map[string]int64, len(keys))
	for _, k := range keys {
		out[k] = 0
	}
	proj, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(KeyAttr), expression.Name(CounterAttr))).Build()
	if err != nil {
		return nil, err
	}
	err = s.batchGet(ctx, keys, &proj, func(item map[string]types.AttributeValue) error {
		var c struct {
			Key string `dynamodbav:"dlq_id"`
			N   int64  `dynamodbav:"n"`
		}
		if err := attributevalue.UnmarshalMap(item, &c); err != nil {
			return fmt.Errorf("read counters: %w", err)
		}
		out[c.Key] = c.N
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return out, nil
}

// OpenSignatures returns a source's open records by failure signature: one
// query of the source's counter partition in the status index, whose size
// is the number of signatures times the shards, not the number of records.
func (l *Lister) OpenSignatures(ctx context.Context, source string) (map[string]int64, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key("status").Equal(expression.Value(quarantine.OpenCounterPartition(source)))).Build()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	p := dynamodb.NewQueryPaginator(l.api, &dynamodb.QueryInput{
		TableName: aws.String(l.table), IndexName: aws.String(IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("open signatures: %w", err)
		}
		for _, item := range page.Items {
			var c struct {
				Signature string `dynamodbav:"failure_signature"`
				N         int64  `dynamodbav:"n"`
			}
			if err := attributevalue.UnmarshalMap(item, &c); err != nil {
				return nil, fmt.Errorf("open signatures: %w", err)
			}
			out[c.Signature] += c.N
		}
	}
	for sig, n := range out {
		if n == 0 {
			delete(out, sig)
		}
	}
	return out, nil
}
