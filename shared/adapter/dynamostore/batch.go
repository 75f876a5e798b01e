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

// BatchAPI is the part of the DynamoDB client GetMany uses.
type BatchAPI interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem call.
const maxBatchGet = 100

// GetMany implements quarantine.Store with consistent BatchGetItem
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
