package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// PolicyStore keeps standing policies in the quarantine table. Each is one
// item: key "#pol#<source>#<id>" (policyKey), the policy as sealed JSON,
// and its version; the status index lists a source's policies under
// "#pol#<source>" (PolicyPartition).
type PolicyStore struct {
	api   API
	table string
	// writer, when set, proves every policy version put (writer.go).
	writer *writerproof.Prover
	idx    *indexState
}

// NewPolicyStore returns a PolicyStore on table.
func NewPolicyStore(api API, table string) *PolicyStore {
	return &PolicyStore{api: api, table: table, idx: newIndexState(api, table)}
}

func (s *PolicyStore) item(p *policy.Policy) (map[string]types.AttributeValue, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return map[string]types.AttributeValue{
		KeyAttr:       &types.AttributeValueMemberS{Value: policyKey(p.Source, p.ID)},
		statusAttr:    &types.AttributeValueMemberS{Value: PolicyPartition(p.Source)},
		IndexKeyAttr:  &types.AttributeValueMemberS{Value: PolicyPartition(p.Source)},
		firstSeenAttr: &types.AttributeValueMemberS{Value: p.CreatedAt.String()},
		sourceAttr:    &types.AttributeValueMemberS{Value: p.Source},
		VersionAttr:   &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Version, 10)},
		policyAttr:    &types.AttributeValueMemberS{Value: string(raw)},
	}, nil
}

// Create stores a new policy; it fails if the id exists.
func (s *PolicyStore) Create(ctx context.Context, p *policy.Policy) error {
	return s.put(ctx, p, expression.AttributeNotExists(expression.Name(KeyAttr)))
}

// Replace stores p if the stored version is still version.
func (s *PolicyStore) Replace(ctx context.Context, p *policy.Policy, version int64) error {
	return s.put(ctx, p, expression.Name(VersionAttr).Equal(expression.Value(version)))
}

// put writes p's item on cond; a failed condition is policy.ErrConflict.
func (s *PolicyStore) put(ctx context.Context, p *policy.Policy, cond expression.ConditionBuilder) error {
	item, err := s.item(p)
	if err != nil {
		return err
	}
	return provedPut(ctx, s.api, s.table, s.writer, item, writerproof.Leaf{Key: policyKey(p.Source, p.ID), Version: p.Version, Seal: p.Seal}, cond, policy.ErrConflict)
}

// provedPut writes item, proved with w (when set) as leaf, on cond; a
// failed condition is conflict. Policies and approvals are written so.
func provedPut(ctx context.Context, api API, table string, w *writerproof.Prover, item map[string]types.AttributeValue, leaf writerproof.Leaf,
	cond expression.ConditionBuilder, conflict error) error {
	if err := prove(ctx, w, item, leaf); err != nil {
		return err
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	if conditionFailed(err) {
		return conflict
	}
	return err
}

// readItem reads the item with key k (a consistent read); nil when there
// is none.
func readItem(ctx context.Context, api API, table, k string) (map[string]types.AttributeValue, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: itemKey(k)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Get reads one policy and checks its seal.
func (s *PolicyStore) Get(ctx context.Context, source, id string) (*policy.Policy, error) {
	p, err := s.get(ctx, policyKey(source, id))
	if err == nil && p == nil {
		return nil, policy.ErrNotFound
	}
	return p, err
}

// get reads the policy item with key k and checks its seal; nil when
// there is none.
func (s *PolicyStore) get(ctx context.Context, k string) (*policy.Policy, error) {
	item, err := readItem(ctx, s.api, s.table, k)
	if err != nil || item == nil {
		return nil, wrapErr("read policy", err)
	}
	return decodePolicy(item)
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
	return listPartition(ctx, s.api, s.table, s.idx, PolicyPartition(source), "policies", s.get, func(k string, p *policy.Policy) error {
		if p.Source != source || k != policyKey(p.Source, p.ID) {
			return fmt.Errorf("list policies: the item %q holds the policy %q of source %q", k, p.ID, p.Source)
		}
		return nil
	})
}

// listPartition reads the items of a status-index partition that only the
// redrive role writes (policies, approvals): their keys through the index,
// then each item with get (nil: gone since), checked by check. The other
// roles write records, whose status could name the partition: only keys
// under it are read.
func listPartition[T any](ctx context.Context, api API, table string, idx *indexState, partition, what string, get func(context.Context, string) (*T, error),
	check func(key string, v *T) error) ([]*T, error) {
	var keys []string
	err := queryPartition(ctx, api, table, idx, partition, func(item map[string]types.AttributeValue) error {
		if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, partition+"#") {
			keys = append(keys, k.Value)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	var out []*T
	for _, k := range slices.Compact(keys) {
		v, err := get(ctx, k)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if err := check(k, v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// wrapErr is err under op, nil when err is.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
