package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The sweeper's payload intents (quarantine.PayloadIntent): one item per
// archived record version with claim-check objects, #swp#<id>#<version>,
// that the sweeper role alone writes and deletes (the template's
// DropItsPayloadIntents and OnlySweeperWritesPayloadIntentsPolicy). The
// ledger ignores it (ledger.Ledgered); it sits in its own index partition
// (PayloadIntentPartition, sorted by when it was written), where a later
// run finds the ones left behind.
const (
	payloadIntentPrefix = "#swp#"
	// PayloadIntentPartition is the index partition of the intents.
	PayloadIntentPartition = "#swp"
	payloadIntentAttr      = "intent" // the intent's JSON
)

// PayloadIntentAttributes are every attribute an intent item has.
var PayloadIntentAttributes = []string{KeyAttr, statusAttr, IndexKeyAttr, firstSeenAttr, payloadIntentAttr}

// RecordPayloadIntent implements quarantine.PayloadIntents: an
// unconditional put (the same record version's intent is replaced). The
// revision is the stored JSON itself.
func (s *Store) RecordPayloadIntent(ctx context.Context, in quarantine.PayloadIntent) (string, error) {
	return s.putPayloadIntent(ctx, in, nil)
}

// ReplacePayloadIntent implements quarantine.PayloadIntents: a put
// conditioned on the stored JSON being in.Rev.
func (s *Store) ReplacePayloadIntent(ctx context.Context, in quarantine.PayloadIntent) (string, error) {
	return s.putPayloadIntent(ctx, in, &in.Rev)
}

func (s *Store) putPayloadIntent(ctx context.Context, in quarantine.PayloadIntent, prev *string) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("record payload intent: %w", err)
	}
	put := &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			KeyAttr:           &types.AttributeValueMemberS{Value: quarantine.PayloadIntentKey(in.ID, in.Version)},
			statusAttr:        &types.AttributeValueMemberS{Value: PayloadIntentPartition},
			IndexKeyAttr:      &types.AttributeValueMemberS{Value: PayloadIntentPartition},
			firstSeenAttr:     &types.AttributeValueMemberS{Value: in.At.String()},
			payloadIntentAttr: &types.AttributeValueMemberS{Value: string(raw)},
		},
	}
	if prev != nil {
		put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = atRevision(*prev)
	}
	if _, err = s.api.PutItem(ctx, put); err != nil {
		if conditionFailed(err) {
			return "", quarantine.ErrIntentMoved
		}
		return "", fmt.Errorf("record payload intent: %w", err)
	}
	return string(raw), nil
}

// DuePayloadIntents implements quarantine.PayloadIntents: one query of the
// intents' index partition (the index that listings read), then each
// intent read with a consistent read (the index is eventually consistent;
// one dropped since is left out).
func (s *Store) DuePayloadIntents(ctx context.Context, before time.Time, limit int) ([]quarantine.PayloadIntent, error) {
	if limit <= 0 {
		return nil, nil
	}
	index, keyAttr, err := s.indexState().listed(ctx)
	if err != nil {
		return nil, fmt.Errorf("payload intents: %w", err)
	}
	key := expression.Key(keyAttr).Equal(expression.Value(PayloadIntentPartition)).
		And(expression.Key(firstSeenAttr).LessThan(expression.Value(quarantine.At(before).String())))
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return nil, err
	}
	var keys []string
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(index),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		Limit: aws.Int32(int32(min(limit, 1000))),
	})
	for p.HasMorePages() && len(keys) < limit {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("payload intents: %w", err)
		}
		for _, item := range page.Items {
			// Only intents' keys: any item may carry this partition's
			// status_key (a record writer's), and none other is read.
			if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok && len(keys) < limit && strings.HasPrefix(k.Value, payloadIntentPrefix) {
				keys = append(keys, k.Value)
			}
		}
	}
	var out []quarantine.PayloadIntent
	for _, k := range keys {
		got, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: itemKey(k), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read payload intent: %w", err)
		}
		if got.Item == nil {
			continue
		}
		in := readPayloadIntent(k, got.Item)
		if in.Malformed == "" && !in.At.Before(before) {
			continue // replaced since the index was read: not yet due
		}
		out = append(out, in)
	}
	return out, nil
}

// readPayloadIntent decodes the intent item stored under k; one that does
// not read, or whose key is not its record version's, is Malformed.
func readPayloadIntent(k string, item map[string]types.AttributeValue) quarantine.PayloadIntent {
	bad := func(why string) quarantine.PayloadIntent { return quarantine.PayloadIntent{Key: k, Malformed: why} }
	raw, ok := item[payloadIntentAttr].(*types.AttributeValueMemberS)
	if !ok {
		return bad(payloadIntentAttr + " is not a string")
	}
	var in quarantine.PayloadIntent
	if err := json.Unmarshal([]byte(raw.Value), &in); err != nil {
		return bad(payloadIntentAttr + " is not an intent's JSON")
	}
	switch {
	case in.ID == "" || in.Version < 1:
		return bad("no record version")
	case quarantine.PayloadIntentKey(in.ID, in.Version) != k:
		return bad("stored under another record version's key")
	case in.Archive.Bucket == "" || in.Archive.Key == "":
		return bad("no archive object")
	case len(in.Refs) == 0:
		return bad("no claim-check object")
	}
	in.Key, in.Rev = k, raw.Value
	return in
}

// atRevision is the condition that the stored intent is still rev (its
// JSON as read or written).
func atRevision(rev string) (*string, map[string]string, map[string]types.AttributeValue) {
	return aws.String("#i = :rev"), map[string]string{"#i": payloadIntentAttr},
		map[string]types.AttributeValue{":rev": &types.AttributeValueMemberS{Value: rev}}
}

// DropPayloadIntent implements quarantine.PayloadIntents.
func (s *Store) DropPayloadIntent(ctx context.Context, in quarantine.PayloadIntent) error {
	del := &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: itemKey(in.Key)}
	if in.Rev != "" {
		del.ConditionExpression, del.ExpressionAttributeNames, del.ExpressionAttributeValues = atRevision(in.Rev)
	}
	if _, err := s.api.DeleteItem(ctx, del); err != nil {
		if conditionFailed(err) {
			return quarantine.ErrIntentMoved
		}
		return fmt.Errorf("drop payload intent: %w", err)
	}
	return nil
}

// indexState is the Store's reader of which index listings read, made on
// first use.
func (s *Store) indexState() *indexState {
	s.idxOnce.Do(func() { s.idx = newIndexState(s.api, s.table) })
	return s.idx
}
