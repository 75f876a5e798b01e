package dynamostore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// counterUpdate adds d.N to one counter shard, creating it if need be.
func counterUpdate(table string, d quarantine.CounterDelta) (*types.Update, error) {
	key := CounterItemKey(d.CounterKey)
	upd := expression.Add(expression.Name(CounterAttr), expression.Value(d.N)).
		Set(expression.Name(sourceAttr), expression.Value(d.Source)).
		Set(expression.Name(counterKindAttr), expression.Value(d.Kind))
	if d.Signature != "" {
		// Open-signature counters sit in the status index, one partition per
		// source, so that the metrics function lists them with one query.
		upd = upd.Set(expression.Name(statusAttr), expression.Value(OpenCounterPartition(d.Source))).
			Set(expression.Name(IndexKeyAttr), expression.Value(OpenCounterPartition(d.Source))).
			Set(expression.Name(firstSeenAttr), expression.Value(key)).
			Set(expression.Name(signatureAttr), expression.Value(d.Signature))
	}
	if exp := counterExpiry(d.CounterKey); exp != 0 {
		upd = upd.Set(expression.Name(expiresAtAttr), expression.Value(exp))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter update: %w", err)
	}
	return &types.Update{
		TableName: aws.String(table), Key: itemKey(key),
		// One line: kumo drops the clauses after a newline (docs/emulators.md).
		UpdateExpression:         aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// ReadCounters returns the values of the given counter shards (absent: 0),
// with consistent BatchGetItem calls of at most 100 keys.
func (s *Store) ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	return s.readCounters(ctx, keys, true)
}

// ReadCountersEventually is ReadCounters with eventually consistent reads,
// at half the read units: a value may miss the latest changes, so it is
// for gauges read again on the next run, never for a bucket read only
// once.
func (s *Store) ReadCountersEventually(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	return s.readCounters(ctx, keys, false)
}

func (s *Store) readCounters(ctx context.Context, keys []quarantine.CounterKey, consistent bool) (map[quarantine.CounterKey]int64, error) {
	out := make(map[quarantine.CounterKey]int64, len(keys))
	byItem := make(map[string]quarantine.CounterKey, len(keys))
	ids := make([]string, len(keys))
	for i, k := range keys {
		out[k] = 0
		ids[i] = CounterItemKey(k)
		byItem[ids[i]] = k
	}
	proj, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(KeyAttr), expression.Name(CounterAttr))).Build()
	if err != nil {
		return nil, err
	}
	err = s.batchGet(ctx, ids, &proj, consistent, func(item map[string]types.AttributeValue) error {
		var c struct {
			Key string `dynamodbav:"dlq_id"`
			N   int64  `dynamodbav:"n"`
		}
		if err := attributevalue.UnmarshalMap(item, &c); err != nil {
			return fmt.Errorf("read counters: %w", err)
		}
		if k, ok := byItem[c.Key]; ok {
			out[k] = c.N
		}
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
//
// Only the ledger writes #ctr# keys (the template's Deny), but the other
// functions write records, and a record's status could name this
// partition: an item counts only if its key is the open-signature counter
// shard of this source and of the signature it carries (isOpenCounterKey).
func (l *Lister) OpenSignatures(ctx context.Context, source string) (map[string]int64, error) {
	out := map[string]int64{}
	err := queryPartition(ctx, l.api, l.table, l.idx, OpenCounterPartition(source), func(item map[string]types.AttributeValue) error {
		var c struct {
			Key       string `dynamodbav:"dlq_id"`
			Signature string `dynamodbav:"failure_signature"`
			N         int64  `dynamodbav:"n"`
		}
		if err := attributevalue.UnmarshalMap(item, &c); err != nil {
			return err
		}
		if !isOpenCounterKey(c.Key, source, c.Signature) {
			return nil // not a counter of this partition: an impostor
		}
		out[c.Signature] += c.N
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open signatures: %w", err)
	}
	for sig, n := range out {
		if n == 0 {
			delete(out, sig)
		}
	}
	return out, nil
}

// isOpenCounterKey reports whether k is the key of a shard of source's
// open-signature counter for signature, exactly as CounterItemKey writes
// it.
func isOpenCounterKey(k, source, signature string) bool {
	prefix := strings.TrimSuffix(CounterItemKey(quarantine.OpenCounterKey(source, signature, 0)), "0")
	rest, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return false
	}
	shard, err := strconv.Atoi(rest)
	return err == nil && shard >= 0 && CounterItemKey(quarantine.OpenCounterKey(source, signature, shard)) == k
}
