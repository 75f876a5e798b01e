package dynamostore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// unprocessing answers each BatchGetItem with only its first key read and
// the rest handed back as UnprocessedKeys, as DynamoDB does under
// throttling or past 16 MB, and records whether every call it saw asked for
// a strongly consistent read.
type unprocessing struct {
	dynamostore.API
	calls        int
	inconsistent bool
	// reads is each call's ConsistentRead, in order.
	reads []bool
}

func (u *unprocessing) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	u.calls++
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]ddbtypes.AttributeValue{}, UnprocessedKeys: map[string]ddbtypes.KeysAndAttributes{}}
	for table, ka := range in.RequestItems {
		if !aws.ToBool(ka.ConsistentRead) {
			u.inconsistent = true
		}
		u.reads = append(u.reads, aws.ToBool(ka.ConsistentRead))
		first := ka
		first.Keys = ka.Keys[:1]
		res, err := u.API.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{table: first}}, opts...)
		if err != nil {
			return nil, err
		}
		out.Responses[table] = res.Responses[table]
		if len(ka.Keys) > 1 {
			out.UnprocessedKeys[table] = ddbtypes.KeysAndAttributes{Keys: ka.Keys[1:]} // read settings not echoed
		}
	}
	return out, nil
}

// GetMany reads every record although DynamoDB processes one key a call,
// and every retry stays a strongly consistent read.
func TestGetManyRetriesUnprocessedKeysConsistently(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	plain := dynamostore.New(stack.Clients.DynamoDB, table)
	var ids []string
	for range 4 {
		r := storetest.Record(t, storetest.UniqueID("unproc"))
		if err := plain.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.DLQID)
	}
	api := &unprocessing{API: stack.Clients.DynamoDB}
	got, err := dynamostore.New(api, table).GetMany(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got[id] == nil {
			t.Errorf("record %s missing from GetMany: an unprocessed key was dropped", id)
		}
	}
	if api.calls != len(ids) {
		t.Errorf("%d BatchGetItem calls for %d keys processed one a call", api.calls, len(ids))
	}
	if api.inconsistent {
		t.Error("a retry of unprocessed keys asked for an eventually consistent read")
	}
}

// ReadCountersEventually asks for eventually consistent reads (half the
// read units), on its retries too; ReadCounters for strongly consistent
// ones. Both read the same values.
func TestCountersAreReadAsAsked(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	src := storetest.UniqueID("eventual-src")
	keys := []quarantine.CounterKey{quarantine.HeldCounterKey(src, 0), quarantine.HeldCounterKey(src, 1), quarantine.HeldCounterKey(src, 2)}
	for i, k := range keys {
		item := map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.CounterItemKey(k)},
			dynamostore.CounterAttr: &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(i + 5)}}
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name       string
		consistent bool
		read       func(*dynamostore.Store) (map[quarantine.CounterKey]int64, error)
	}{
		{"ReadCountersEventually", false, func(s *dynamostore.Store) (map[quarantine.CounterKey]int64, error) {
			return s.ReadCountersEventually(ctx, keys)
		}},
		{"ReadCounters", true, func(s *dynamostore.Store) (map[quarantine.CounterKey]int64, error) { return s.ReadCounters(ctx, keys) }},
	} {
		api := &unprocessing{API: stack.Clients.DynamoDB}
		got, err := c.read(dynamostore.New(api, table))
		if err != nil {
			t.Fatal(err)
		}
		if len(api.reads) != len(keys) || slices.Contains(api.reads, !c.consistent) {
			t.Errorf("%s: reads %v (consistent), want %d calls of %v (a call per key)", c.name, api.reads, len(keys), c.consistent)
		}
		for i, k := range keys {
			if got[k] != int64(i+5) {
				t.Errorf("%s: counter %d is %d, want %d", c.name, i, got[k], i+5)
			}
		}
	}
}
