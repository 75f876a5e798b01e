package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// tableItems reads the items of keys (those present) as the ledger's
// items, as verify's scan gives them.
func tableItems(t *testing.T, keys []string) []ledger.Item {
	t.Helper()
	var out []ledger.Item
	for _, k := range keys {
		got, err := stack.Clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(stack.Names["QuarantineTable"]),
			Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: k}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Item) == 0 {
			continue
		}
		it, err := dynamostore.LedgerItem(got.Item)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

// The recount with the adapter's callbacks agrees with what Counts
// applied, exactly, also with the counting stopped between two chunks of
// a segment (the checkpoint inside it), and names a counter rewritten in
// the table.
func TestRecountAgreesWithCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 120) // several chunks
	shard := storetest.UniqueID("shard")
	seg, err := ledger.NewSegment("arn:stream", shard, nil, l.entries)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := seg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	segments := map[string][]byte{ledger.SegmentKey(shard, seg.FirstSeq): raw}
	keys := []string{dynamostore.LedgerCountKey(shard)}
	for k := range l.want {
		for _, s := range shardsOf(k) {
			keys = append(keys, dynamostore.CounterItemKey(s))
		}
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	recount := func() ledger.CounterResult {
		t.Helper()
		in, probs := dynamostore.LedgerCounterInput(tableItems(t, keys), segments, nil, now)
		if len(probs) > 0 {
			t.Fatalf("table counters: %v", probs)
		}
		return ledger.RecountCounters(in)
	}
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB, failTx: map[int]bool{2: true}}
	if err := newCounts(api).Count(ctx, shard, 1, seg); err == nil {
		t.Fatal("count with its second transaction failed = nil")
	}
	if r := recount(); len(r.Problems) != 0 || r.Behind != 1 || r.Checked == 0 || r.NotChecked != "" {
		t.Fatalf("counting stopped after the first chunk: %+v", r)
	}
	if err := newCounts(api).Count(ctx, shard, 1, seg); err != nil {
		t.Fatal(err)
	}
	l.check(t)
	r := recount()
	if len(r.Problems) != 0 || r.Behind != 0 || r.Checked < len(l.want)/2 {
		t.Fatalf("counted: %+v (%d counters)", r, len(l.want))
	}
	var victim quarantine.CounterKey
	for k, n := range l.want {
		if k.Kind == quarantine.CounterState && n > 0 {
			victim = k
			break
		}
	}
	victim.Shard = quarantine.CounterShardOf(shard) // the one Count wrote
	key := dynamostore.CounterItemKey(victim)
	if _, err := stack.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(stack.Names["QuarantineTable"]),
		Key:              map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: key}},
		UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "5"}}}); err != nil {
		t.Fatal(err)
	}
	r = recount()
	if len(r.Problems) != 1 || r.Problems[0].Kind != ledger.KindCounterDrift || r.Problems[0].Subject != key {
		t.Fatalf("a counter rewritten: %+v", r)
	}
}

// Every counter key the store writes reads back as a counter, a time
// bucket with its TTL; the rest do not.
func TestCounterKeyInfo(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 7, 0, 0, time.UTC)
	for _, k := range []quarantine.CounterKey{
		quarantine.StateCounterKey("src", quarantine.StatusQuarantined, quarantine.ClassPoison, 3),
		quarantine.OpenCounterKey("src", "sig", 7),
		quarantine.HeldCounterKey("src", 0),
		quarantine.PolicyCounterKey("src", "p1", quarantine.CounterPolicySent, 1),
		quarantine.BucketCounterKey("src", quarantine.CounterArrivals, at, 2),
		quarantine.BucketCounterKey("src", quarantine.CounterNewHeld, at, 2),
	} {
		info, ok := dynamostore.CounterKeyInfo(dynamostore.CounterItemKey(k))
		if !ok {
			t.Errorf("%s: not a counter", dynamostore.CounterItemKey(k))
			continue
		}
		if bucket := !k.Bucket.IsZero(); bucket != !info.Bucket.IsZero() || (bucket && !info.Expires.Equal(at.Add(48*time.Hour))) {
			t.Errorf("%s: %+v", dynamostore.CounterItemKey(k), info)
		}
		if events := k.Bucket.IsZero() && k.Policy == ""; events == info.Events {
			t.Errorf("%s: events %v", dynamostore.CounterItemKey(k), info.Events)
		}
	}
	for _, bad := range []string{"src#a", "#ctr#src", "#ctr#src#state#x#y#9", "#ctr#src#arrivals#notatime#1", "#ctr#src#nosuchkind#1", "#pol#src#p"} {
		if _, ok := dynamostore.CounterKeyInfo(bad); ok {
			t.Errorf("%s: read as a counter", bad)
		}
	}
}

// The segment headers verify keeps are counted with the recount's own
// Chunks, so that the recount takes their deltas instead of reading and
// parsing every counted segment again.
func TestLedgerSegmentHeadersCountAsTheRecount(t *testing.T) {
	cin, _ := dynamostore.LedgerCounterInput(nil, nil, nil, time.Now())
	if !dynamostore.LedgerSegmentHeaders().CountsWith(cin.Chunks) {
		t.Fatal("LedgerSegmentHeaders counts with another function than LedgerCounterInput's Chunks")
	}
}
