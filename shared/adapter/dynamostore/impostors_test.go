package dynamostore_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// putItem writes one item of string attributes (and a number n when n is
// set) straight into the table, as any role with PutItem on a key could.
func putItem(t *testing.T, attrs map[string]string, n *int64) {
	t.Helper()
	item := map[string]ddbtypes.AttributeValue{}
	for k, v := range attrs {
		item[k] = &ddbtypes.AttributeValueMemberS{Value: v}
	}
	if st, ok := attrs["status"]; ok {
		// In both indexes' partition, as the stores write a partition.
		item[dynamostore.IndexKeyAttr] = &ddbtypes.AttributeValueMemberS{Value: st}
	}
	if n != nil {
		item[dynamostore.CounterAttr] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(*n, 10)}
	}
	if _, err := stack.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(stack.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// Only the ledger writes #ctr# keys (the template's Deny), but the other
// functions write records: an item in a source's open-signature counter
// partition counts only if its key is that source's open counter of the
// signature it carries. A record-keyed item whose status names the
// partition, with a large negative n, would otherwise cancel a storm's
// count and hide it from the dominant-signature alarm.
func TestOpenSignaturesIgnoreImpostors(t *testing.T) {
	t.Parallel()
	const source, sig = "impostor-counters", "sig-storm"
	part := dynamostore.OpenCounterPartition(source)
	n := func(v int64) *int64 { return &v }
	for shard, v := range []int64{40, 2} {
		putItem(t, map[string]string{
			dynamostore.KeyAttr: dynamostore.CounterItemKey(quarantine.OpenCounterKey(source, sig, shard)),
			"status":            part, "first_seen": "c" + strconv.Itoa(shard), "failure_signature": sig,
		}, n(v))
	}
	for i, k := range []string{
		source + "#0123abcd", // a record's key
		dynamostore.CounterItemKey(quarantine.StateCounterKey(source, quarantine.StatusParked, quarantine.ClassPoison, 0)), // another kind of counter
		dynamostore.CounterItemKey(quarantine.OpenCounterKey(source, "sig-other", 0)),                                      // another signature's
		dynamostore.CounterItemKey(quarantine.OpenCounterKey("other-source", sig, 0)),                                      // another source's
		dynamostore.CounterItemKey(quarantine.OpenCounterKey(source, sig, 0)) + "x",                                        // not a shard number
		strings.TrimSuffix(dynamostore.CounterItemKey(quarantine.OpenCounterKey(source, sig, 0)), "0") + "-1",              // a negative shard
		strings.TrimSuffix(dynamostore.CounterItemKey(quarantine.OpenCounterKey(source, sig, 0)), "0") + "01",              // not as written
	} {
		putItem(t, map[string]string{dynamostore.KeyAttr: k, "status": part, "first_seen": "i" + strconv.Itoa(i), "failure_signature": sig}, n(-100000))
	}
	got, err := dynamostore.NewLister(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]).OpenSignatures(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[sig] != 42 {
		t.Fatalf("open signatures: %v, want only %s: 42 (the two real shards)", got, sig)
	}
}

// Only the redrive function writes #pol# keys (the template's Deny), but
// the others write records: a record-keyed item in a source's policy
// partition, even one carrying a well-sealed policy, is not listed; a
// #pol# item that holds another key's policy is refused.
func TestPolicyListIgnoresImpostors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const source = "impostor-policies"
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	newPolicy := func() *policy.Policy {
		p, err := policy.New(policy.Spec{Source: source, Signatures: []string{"sig-a"}, MaxPerRun: 10, ExpiresAt: now.Add(24 * time.Hour)}, "alice", now)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ps := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	real := newPolicy()
	if err := ps.Create(ctx, real); err != nil {
		t.Fatal(err)
	}
	forged := newPolicy()
	if forged.ID == real.ID {
		t.Fatalf("two policies with the id %q", real.ID)
	}
	raw, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	putItem(t, map[string]string{
		dynamostore.KeyAttr: source + "#0123abcd", "status": dynamostore.PolicyPartition(source),
		"first_seen": "0", "source": source, "policy": string(raw), dynamostore.VersionAttr: "1",
	}, nil)
	got, err := ps.List(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != real.ID {
		ids := make([]string, len(got))
		for i, p := range got {
			ids[i] = p.ID
		}
		t.Fatalf("listed %q, want only the stored policy %q", ids, real.ID)
	}

	// A policy item under another policy's key.
	putItem(t, map[string]string{
		dynamostore.KeyAttr: dynamostore.PolicyPartition(source) + "#moved", "status": dynamostore.PolicyPartition(source),
		"first_seen": "1", "source": source, "policy": string(raw), dynamostore.VersionAttr: "1",
	}, nil)
	if got, err := ps.List(ctx, source); err == nil || !strings.Contains(err.Error(), forged.ID) {
		t.Fatalf("a policy under another key: %d listed, error %v, want an error naming %q", len(got), err, forged.ID)
	}
}
