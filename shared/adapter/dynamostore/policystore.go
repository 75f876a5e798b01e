package dynamostore

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

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
)

// PolicyAPI is the part of the DynamoDB client the policy store uses.
type PolicyAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// PolicyStore keeps standing policies in the quarantine table. Each is one
// item: key "#pol#<source>#<id>" (policyKey), the policy as sealed JSON,
// and its version; the status index lists a source's policies under
// "#pol#<source>" (PolicyPartition).
type PolicyStore struct {
	api   PolicyAPI
	table string
}

// NewPolicyStore returns a PolicyStore on table.
func NewPolicyStore(api PolicyAPI, table string) *PolicyStore {
	return &PolicyStore{api: api, table: table}
}

func (s *PolicyStore) item(p *policy.Policy) (map[string]types.AttributeValue, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return map[string]types.AttributeValue{
		KeyAttr:       &types.AttributeValueMemberS{Value: policyKey(p.Source, p.ID)},
		statusAttr:    &types.AttributeValueMemberS{Value: PolicyPartition(p.Source)},
		firstSeenAttr: &types.AttributeValueMemberS{Value: p.CreatedAt.String()},
		sourceAttr:    &types.AttributeValueMemberS{Value: p.Source},
		VersionAttr:   &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Version, 10)},
		policyAttr:    &types.AttributeValueMemberS{Value: string(raw)},
	}, nil
}

// Create stores a new policy; it fails if the id exists.
func (s *PolicyStore) Create(ctx context.Context, p *policy.Policy) error {
	item, err := s.item(p)
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(KeyAttr))).Build()
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()})
	if conditionFailed(err) {
		return policy.ErrConflict
	}
	return err
}

// Replace stores p if the stored version is still version.
func (s *PolicyStore) Replace(ctx context.Context, p *policy.Policy, version int64) error {
	item, err := s.item(p)
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.Name(VersionAttr).Equal(expression.Value(version))).Build()
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
	if conditionFailed(err) {
		return policy.ErrConflict
	}
	return err
}

// Get reads one policy and checks its seal.
func (s *PolicyStore) Get(ctx context.Context, source, id string) (*policy.Policy, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: policyKey(source, id)}}})
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	if out.Item == nil {
		return nil, policy.ErrNotFound
	}
	return decodePolicy(out.Item)
}

func decodePolicy(item map[string]types.AttributeValue) (*policy.Policy, error) {
	v, ok := item[policyAttr].(*types.AttributeValueMemberS)
	if !ok {
		return nil, errors.New("policy item without its policy")
	}
	var p policy.Policy
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
func (s *PolicyStore) List(ctx context.Context, source string) ([]*policy.Policy, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(statusAttr).Equal(expression.Value(PolicyPartition(source)))).Build()
	if err != nil {
		return nil, err
	}
	var ids []string
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list policies: %w", err)
		}
		for _, item := range page.Items {
			if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok {
				ids = append(ids, k.Value)
			}
		}
	}
	var out []*policy.Policy
	for _, k := range slices.Compact(ids) {
		got, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: k}}})
		if err != nil {
			return nil, fmt.Errorf("read policy: %w", err)
		}
		if got.Item == nil {
			continue
		}
		pol, err := decodePolicy(got.Item)
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
