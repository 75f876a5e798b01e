// Package dynamostore is the DynamoDB adapter for quarantine.Store, and the
// one owner of the table layout (layout.go): record, counter and policy
// items, their keys, attribute names and the status index. A record write
// (Create, Replace) is one TransactWriteItems: the whole record as a Put
// with a condition (attribute_not_exists on the key for a new record;
// equality on prev's version, and no integrity hold, for a replacement),
// plus one Update per counter delta of the change (quarantine.CounterDeltas
// of prev and next: an ADD to one counter shard, its clauses on one line:
// docs/emulators.md). The record item is written whole, because partial
// update expressions are where emulators (and hand-written expressions) go
// wrong. A transaction cancelled for another reason than the record's
// condition (a race on a counter shard) is retried; a write that still
// fails (its condition, or every try) is read back: if the item holds
// exactly the version written, the write was applied and succeeds. Hold is
// the one write that does not replace the item: one transaction that sets
// the two hold attributes, on the condition that the item still holds the
// version read and no hold, and counts the hold. Policies (PolicyStore) are
// single conditional PutItems.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// API is the part of the DynamoDB client the stores use (Store and
// PolicyStore; a Lister needs only QueryAPI).
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	QueryAPI
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

// Create implements quarantine.Store.
func (s *Store) Create(ctx context.Context, r *quarantine.Record) error {
	cond := expression.AttributeNotExists(expression.Name(KeyAttr))
	if err := s.put(ctx, nil, r, cond); err != nil {
		if errors.Is(err, errConditionFailed) {
			return quarantine.ErrExists
		}
		return fmt.Errorf("create %s: %w", r.DLQID, err)
	}
	return nil
}

// Replace implements quarantine.Store.
func (s *Store) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if err := quarantine.CheckReplace(prev, r); err != nil {
		return err
	}
	// A held record is never overwritten: its item is the evidence.
	cond := expression.Name(VersionAttr).Equal(expression.Value(prev.Version)).And(expression.AttributeNotExists(expression.Name(HoldAttr)))
	if err := s.put(ctx, prev, r, cond); err != nil {
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

// Update implements quarantine.Store with quarantine.Update.
func (s *Store) Update(ctx context.Context, id string, fn func(cur *quarantine.Record) (*quarantine.Record, error)) (*quarantine.Record, error) {
	return quarantine.Update(ctx, s, id, fn)
}

// held reports whether id's item carries an integrity hold.
func (s *Store) held(ctx context.Context, id string) (bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key:                      itemKey(id),
		ProjectionExpression:     aws.String("#h"),
		ExpressionAttributeNames: map[string]string{"#h": HoldAttr},
	})
	if err != nil {
		return false, err
	}
	return out.Item[HoldAttr] != nil, nil
}

var errConditionFailed = errors.New("condition failed")

// put writes r in place of prev (nil: a new record) under cond and, in the
// same transaction, the counter changes the write makes
// (quarantine.CounterDeltas(prev, r)): cond holds only while the item is
// prev, so they are applied exactly when the record is. Transactions that
// lose a race on a counter shard to another transaction are retried here:
// the record's own condition did not fail.
func (s *Store) put(ctx context.Context, prev, r *quarantine.Record, cond expression.ConditionBuilder) error {
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
	for _, d := range quarantine.CounterDeltas(prev, r) {
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
		// the item holds exactly what we wrote, so the write succeeded,
		// and its counter changes, in the same transaction, with it.
		err = nil
	}
	return err
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
		if err := quarantine.Backoff(ctx, attempt, 5*time.Millisecond, 160*time.Millisecond); err != nil {
			return err
		}
	}
	return err
}

// applied reads r's item back and reports whether it is the version r
// writes. A failed read says nothing: the write counts as not applied.
func (s *Store) applied(ctx context.Context, r *quarantine.Record) bool {
	cur, err := s.Get(ctx, r.DLQID)
	return err == nil && quarantine.SameVersion(cur, r)
}

// Get implements quarantine.Store with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey(id),
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

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem call.
const maxBatchGet = 100

// GetMany implements quarantine.Store with consistent BatchGetItem
// calls of at most 100 keys, retrying unprocessed keys.
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
// keys after the one jittered backoff, and hands each item to each.
func (s *Store) batchGet(ctx context.Context, ids []string, projection *expression.Expression, each func(map[string]types.AttributeValue) error) error {
	for start := 0; start < len(ids); start += maxBatchGet {
		var keys []map[string]types.AttributeValue
		seen := map[string]bool{}
		for _, id := range ids[start:min(start+maxBatchGet, len(ids))] {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, itemKey(id))
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
			res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return fmt.Errorf("batch get: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				if err := each(item); err != nil {
					return err
				}
			}
			// The unprocessed keys come back with their read settings; the
			// read stays strongly consistent and projected all the same.
			req = map[string]types.KeysAndAttributes{}
			if left, ok := res.UnprocessedKeys[s.table]; ok && len(left.Keys) > 0 {
				ka.Keys = left.Keys
				req[s.table] = ka
				if err := quarantine.Backoff(ctx, attempt, 20*time.Millisecond, 1280*time.Millisecond); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
