// Package dynamostore is the DynamoDB adapter for quarantine.Store, and the
// one owner of the table layout (layout.go): record, counter and policy
// items, their keys, attribute names and the status index. A record write
// is one conditional write of the record's item and nothing else: Create
// is one PutItem conditional on attribute_not_exists of the key, Replace
// one PutItem conditional on prev's version and no integrity hold, Hold one
// UpdateItem that sets the two hold attributes while the item holds the
// version read and no hold. The record item is written whole, because
// partial update expressions are where emulators (and hand-written
// expressions) go wrong. A write that fails (its condition, or an answer
// lost after the SDK's tries) is read back with a consistent read: if the
// item holds exactly the version written (quarantine.SameVersion), the
// write was applied and succeeds.
//
// Counters are not written with the record: they follow the table's
// stream. Counts (counts.go) derives each change's counter deltas from the
// stream images (quarantine.ChangeDeltas) and applies them idempotently
// per stream shard, in transactions that also advance the shard's
// checkpoint. Policies (PolicyStore) are single conditional PutItems.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// API is the part of the DynamoDB client the stores use (Store and
// PolicyStore; a Lister needs only QueryAPI).
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	QueryAPI
}

// Store is a quarantine.Store on one DynamoDB table.
type Store struct {
	api   API
	table string
	// writer, when set, proves every record version put (writer.go).
	writer *writerproof.Prover
	// marked holds the sources whose markers this Store wrote or found.
	marked sync.Map
	// idx says which index the payload intents are read from (indexState).
	idxOnce sync.Once
	idx     *indexState
}

// New returns a Store on table.
func New(api API, table string) *Store {
	return &Store{api: api, table: table}
}

// Create implements quarantine.Store.
func (s *Store) Create(ctx context.Context, r *quarantine.Record) error {
	// The source's marker first: a record is never listed by no source.
	if err := s.markSource(ctx, r.Source, r.FirstSeen); err != nil {
		return fmt.Errorf("create %s: %w", r.DLQID, err)
	}
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
func (s *Store) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if err := quarantine.CheckReplace(prev, r); err != nil {
		return err
	}
	// A held record is never overwritten: its item is the evidence.
	cond := expression.Name(VersionAttr).Equal(expression.Value(prev.Version)).And(expression.AttributeNotExists(expression.Name(HoldAttr)))
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

// put writes r in place of prev's item (a new record when cond says the key
// does not exist) with one conditional PutItem. A write that fails for any
// reason but a cancelled context is read back: a retry (the SDK's, after an
// answer lost) whose first try was applied fails its own condition, and the
// item then holds exactly what we wrote, so the write succeeded. It returns
// errConditionFailed when the condition failed and the item is not r.
func (s *Store) put(ctx context.Context, r *quarantine.Record, cond expression.ConditionBuilder) error {
	item, err := Marshal(r)
	if err != nil {
		return err
	}
	if n := ItemSize(item); n > MaxItemBytes {
		return fmt.Errorf("item is %d bytes: %w", n, quarantine.ErrItemTooLarge)
	}
	if err := prove(ctx, s.writer, item, writerproof.Leaf{Key: r.DLQID, Version: r.Version, Seal: r.Seal}); err != nil {
		return err
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("build condition: %w", err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil && ctx.Err() == nil && s.applied(ctx, r) {
		return nil
	}
	return asConditionFailed(err)
}

// asConditionFailed maps a failed condition of a single write to
// errConditionFailed; other errors pass through.
func asConditionFailed(err error) error {
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return errConditionFailed
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
	err := s.batchGet(ctx, ids, nil, true, func(item map[string]types.AttributeValue) error {
		r := decode(item)
		out[r.DLQID] = r
		return nil
	})
	return out, err
}

// batchGet reads the items with the given keys (duplicates read once) in
// consistent BatchGetItem calls of at most 100 keys, retrying unprocessed
// keys after the one jittered backoff, and hands each item to each.
func (s *Store) batchGet(ctx context.Context, ids []string, projection *expression.Expression, consistent bool, each func(map[string]types.AttributeValue) error) error {
	for start := 0; start < len(ids); start += maxBatchGet {
		var keys []map[string]types.AttributeValue
		seen := map[string]bool{}
		for _, id := range ids[start:min(start+maxBatchGet, len(ids))] {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, itemKey(id))
			}
		}
		ka := types.KeysAndAttributes{Keys: keys, ConsistentRead: aws.Bool(consistent)}
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
			// read stays as consistent and projected as asked.
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
