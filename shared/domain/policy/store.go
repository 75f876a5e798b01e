package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// API is the part of the DynamoDB client the store uses.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store keeps policies in the quarantine table. Each is one item: key
// "#pol#<source>#<id>", the policy as sealed JSON, and its version; the
// status index lists a source's policies under "#pol#<source>".
type Store struct {
	api   API
	table string
}

// NewStore returns a Store on table.
func NewStore(api API, table string) *Store { return &Store{api: api, table: table} }

func key(source, id string) string { return "#pol#" + source + "#" + id }

// Partition is the status-index partition of a source's policies.
func Partition(source string) string { return "#pol#" + source }

func (s *Store) item(p *Policy) (map[string]types.AttributeValue, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return map[string]types.AttributeValue{
		"dlq_id":     &types.AttributeValueMemberS{Value: key(p.Source, p.ID)},
		"status":     &types.AttributeValueMemberS{Value: Partition(p.Source)},
		"first_seen": &types.AttributeValueMemberS{Value: p.CreatedAt.String()},
		"source":     &types.AttributeValueMemberS{Value: p.Source},
		"version":    &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Version, 10)},
		"policy":     &types.AttributeValueMemberS{Value: string(raw)},
	}, nil
}

// Create stores a new policy; it fails if the id exists.
func (s *Store) Create(ctx context.Context, p *Policy) error {
	item, err := s.item(p)
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("dlq_id"))).Build()
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()})
	if conditionFailed(err) {
		return ErrConflict
	}
	return err
}

// Replace stores p if the stored version is still version.
func (s *Store) Replace(ctx context.Context, p *Policy, version int64) error {
	item, err := s.item(p)
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(version))).Build()
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
	if conditionFailed(err) {
		return ErrConflict
	}
	return err
}

// Get reads one policy and checks its seal.
func (s *Store) Get(ctx context.Context, source, id string) (*Policy, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"dlq_id": &types.AttributeValueMemberS{Value: key(source, id)}}})
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	return decode(out.Item)
}

func decode(item map[string]types.AttributeValue) (*Policy, error) {
	v, ok := item["policy"].(*types.AttributeValueMemberS)
	if !ok {
		return nil, errors.New("policy item without its policy")
	}
	var p Policy
	if err := json.Unmarshal([]byte(v.Value), &p); err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	if err := p.Verify(); err != nil {
		return nil, err
	}
	return &p, nil
}

// List returns a source's policies, oldest first: their ids through the
// status index, then each item (the index does not project the policy).
func (s *Store) List(ctx context.Context, source string) ([]*Policy, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key("status").Equal(expression.Value(Partition(source)))).Build()
	if err != nil {
		return nil, err
	}
	var ids []string
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(dynamostore.IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list policies: %w", err)
		}
		for _, item := range page.Items {
			if k, ok := item["dlq_id"].(*types.AttributeValueMemberS); ok {
				ids = append(ids, k.Value)
			}
		}
	}
	var out []*Policy
	for _, k := range slices.Compact(ids) {
		got, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"dlq_id": &types.AttributeValueMemberS{Value: k}}})
		if err != nil {
			return nil, fmt.Errorf("read policy: %w", err)
		}
		if got.Item == nil {
			continue
		}
		pol, err := decode(got.Item)
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// CounterReader reads summed counter shards.
type CounterReader interface {
	ReadCounters(ctx context.Context, keys []string) (map[string]int64, error)
}

// Counts returns what a policy sent and what came back, over all time.
func Counts(ctx context.Context, cr CounterReader, source, id string) (sent, cameBack int64, err error) {
	var keys []string
	for shard := range quarantine.CounterShards {
		keys = append(keys, quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicySent, shard),
			quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicyCameBack, shard))
	}
	got, err := cr.ReadCounters(ctx, keys)
	if err != nil {
		return 0, 0, fmt.Errorf("read policy counters: %w", err)
	}
	for shard := range quarantine.CounterShards {
		sent += got[quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicySent, shard)]
		cameBack += got[quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicyCameBack, shard)]
	}
	return sent, cameBack, nil
}
