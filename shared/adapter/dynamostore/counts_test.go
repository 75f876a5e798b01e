package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// toStream converts an SDK item into a Lambda stream image.
func toStream(t *testing.T, item map[string]ddbtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	if item == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		out[k] = toStreamValue(t, v)
	}
	return out
}

func toStreamValue(t *testing.T, v ddbtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *ddbtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberL:
		var l []events.DynamoDBAttributeValue
		for _, e := range v.Value {
			l = append(l, toStreamValue(t, e))
		}
		return events.NewListAttribute(l)
	case *ddbtypes.AttributeValueMemberM:
		return events.NewMapAttribute(toStream(t, v.Value))
	}
	t.Fatalf("attribute type %T", v)
	return events.DynamoDBAttributeValue{}
}

// image is a record's item as the stream shows it, with its hold if any.
func image(t *testing.T, r *quarantine.Record, h *quarantine.IntegrityHold) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	if r == nil {
		return nil
	}
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		item[dynamostore.HoldAttr] = &ddbtypes.AttributeValueMemberS{Value: h.Reason}
		item[dynamostore.HoldAtAttr] = &ddbtypes.AttributeValueMemberS{Value: quarantine.At(h.At).String()}
	}
	return toStream(t, item)
}

// streamChange is the stream record of one change of key, numbered seq
// (made 21 digits long, as DynamoDB's are).
func streamChange(t *testing.T, seq int, key string, old, next *quarantine.Record, oldHold, newHold *quarantine.IntegrityHold) events.DynamoDBEventRecord {
	t.Helper()
	name := "MODIFY"
	switch {
	case old == nil:
		name = "INSERT"
	case next == nil:
		name = "REMOVE"
	}
	return events.DynamoDBEventRecord{EventName: name, EventID: strconv.Itoa(seq), Change: events.DynamoDBStreamRecord{
		SequenceNumber: fmt.Sprintf("%021d", 100000000000000000+seq),
		Keys:           map[string]events.DynamoDBAttributeValue{dynamostore.KeyAttr: events.NewStringAttribute(key)},
		OldImage:       image(t, old, oldHold), NewImage: image(t, next, newHold),
		StreamViewType: "NEW_AND_OLD_IMAGES",
	}}
}

// life is the stream of changes of a few records of one source (their
// creations, a claim, a hold, a send, a deletion) and the counters they
// make, summed.
type life struct {
	source string
	recs   []events.DynamoDBEventRecord
	want   map[quarantine.CounterKey]int64
}

func (l *life) add(t *testing.T, key string, old, next *quarantine.Record, oldHold, newHold *quarantine.IntegrityHold) {
	t.Helper()
	l.recs = append(l.recs, streamChange(t, len(l.recs)+1, key, old, next, oldHold, newHold))
	for _, d := range quarantine.ChangeDeltas(old, next, oldHold, newHold) {
		l.want[d.CounterKey] += d.N
	}
}

// newLife is the stream of n records' lives; each gets its own signature
// and minute, so that n records touch about 2n counter shards.
func newLife(t *testing.T, n int) *life {
	t.Helper()
	l := &life{source: storetest.UniqueID("ctsrc"), want: map[quarantine.CounterKey]int64{}}
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range n {
		r := storetest.Record(t, fmt.Sprintf("k%d", i))
		r.Source, r.DLQID = l.source, l.source+"#"+r.IdempotencyKey
		r.FailureSignature = fmt.Sprintf("sig-%d", i)
		r.FirstSeen = quarantine.At(base.Add(time.Duration(i) * time.Minute))
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		l.add(t, r.DLQID, nil, r, nil, nil)
		switch i % 4 {
		case 1:
			next, err := r.Claim("policy:p1", base, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			l.add(t, r.DLQID, r, next, nil, nil)
			sent, err := next.MarkRedriven("policy:p1", "m-"+r.DLQID, base)
			if err != nil {
				t.Fatal(err)
			}
			l.add(t, r.DLQID, next, sent, nil, nil)
		case 2:
			h := &quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: "seal_mismatch", At: base}
			l.add(t, r.DLQID, r, r, nil, h)
		case 3:
			l.add(t, r.DLQID, r, nil, nil, nil) // a decoded REMOVE
		}
	}
	// Changes that count nothing: a counter shard, a policy, the ledger's
	// own checkpoint, a record rewritten as it was.
	for _, key := range []string{"#ctr#" + l.source + "#held#0", "#pol#" + l.source + "#p1", dynamostore.CounterCheckpointKey("shard-x")} {
		l.recs = append(l.recs, events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
			SequenceNumber: fmt.Sprintf("%021d", 100000000000000000+len(l.recs)+1),
			Keys:           map[string]events.DynamoDBAttributeValue{dynamostore.KeyAttr: events.NewStringAttribute(key)},
			NewImage:       map[string]events.DynamoDBAttributeValue{dynamostore.KeyAttr: events.NewStringAttribute(key), "n": events.NewNumberAttribute("3")},
		}})
	}
	return l
}

// check compares every counter the life touched with what it counted.
func (l *life) check(t *testing.T) {
	t.Helper()
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	got, err := s.ReadCounters(context.Background(), slices.Collect(maps.Keys(l.want)))
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for k, want := range l.want {
		if got[k] != want {
			t.Errorf("counter %s = %d, want %d", dynamostore.CounterItemKey(k), got[k], want)
		}
		if want != 0 {
			nonzero++
		}
	}
	if nonzero < 4 {
		t.Fatalf("the life counts only %v: the test lost its coverage", l.want)
	}
}

// countingAPI counts the calls that reach DynamoDB and can fail the
// transactions numbered in failTx (1-based) before they are sent.
type countingAPI struct {
	dynamostore.CountsAPI
	mu        sync.Mutex
	gets, txs int
	failTx    map[int]bool
	// staleGets is how many first reads find no checkpoint (as if read
	// before another writer applied the batch).
	staleGets int
	txSizes   []int
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	c.gets++
	stale := c.gets <= c.staleGets
	c.mu.Unlock()
	if stale {
		return &dynamodb.GetItemOutput{}, nil
	}
	return c.CountsAPI.GetItem(ctx, in, opts...)
}

func (c *countingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	c.txs++
	fail := c.failTx[c.txs]
	c.txSizes = append(c.txSizes, len(in.TransactItems))
	c.mu.Unlock()
	if fail {
		return nil, errors.New("injected: not applied")
	}
	return c.CountsAPI.TransactWriteItems(ctx, in, opts...)
}

func newCounts(api dynamostore.CountsAPI) *dynamostore.Counts {
	return dynamostore.NewCounts(api, stack.Names["QuarantineTable"])
}

// A batch applied twice (a retried invocation) counts once, on a second
// applier as well: the checkpoint is in the table.
func TestCountsBatchAppliedTwiceCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 8)
	shard := storetest.UniqueID("shard")
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	for range 2 {
		if err := newCounts(api).Apply(ctx, shard, l.recs); err != nil {
			t.Fatal(err)
		}
	}
	if api.txs != 1 {
		t.Fatalf("%d transactions, want 1 (the second apply has nothing left to count)", api.txs)
	}
	l.check(t)
	// Another shard's checkpoint is its own: the same changes count again.
	if err := newCounts(api).Apply(ctx, shard+"-other", l.recs[:1]); err != nil {
		t.Fatal(err)
	}
	if api.txs != 2 {
		t.Fatalf("%d transactions, want 2", api.txs)
	}
}

// A transaction applied whose answer is lost: the SDK's retry fails the
// checkpoint's condition (kumo ignores the ClientRequestToken that makes
// DynamoDB's retry succeed), the checkpoint is read back and says the
// chunk was applied. Counted once.
func TestCountsTransactionAppliedAnswerLostCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 6)
	ddb, lose := faults.LoseDynamoDBAnswers(stack.AWS, "TransactWriteItems", 1)
	if err := newCounts(ddb).Apply(ctx, storetest.UniqueID("shard"), l.recs); err != nil {
		t.Fatal(err)
	}
	if lose.Lost() != 1 {
		t.Fatalf("%d answers lost", lose.Lost())
	}
	l.check(t)
}

// More than 99 counter shards in one batch take several transactions of
// at most 100 actions; a failure between them, and the batch retried from
// its middle (a bisected retry) then whole, count every change once.
func TestCountsManyCountersAndABisectedRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 120)
	shard := storetest.UniqueID("shard")
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB, failTx: map[int]bool{2: true}}
	if err := newCounts(api).Apply(ctx, shard, l.recs); err == nil {
		t.Fatal("apply with its second transaction failed = nil")
	}
	half := len(l.recs) / 2
	for _, part := range [][]events.DynamoDBEventRecord{l.recs[half/2 : half], l.recs[half:], l.recs} {
		if err := newCounts(api).Apply(ctx, shard, part); err != nil {
			t.Fatal(err)
		}
	}
	l.check(t)
	if api.txs < 4 {
		t.Fatalf("%d transactions for %d counter shards", api.txs, len(l.want))
	}
	for _, n := range api.txSizes {
		if n > 100 {
			t.Fatalf("a transaction of %d actions", n)
		}
	}
}

// A batch of changes that count nothing reads and writes nothing: the
// ledger's own writes stream back into it.
func TestCountsNothingToCountWritesNothing(t *testing.T) {
	t.Parallel()
	l := newLife(t, 0)
	r := storetest.Record(t, storetest.UniqueID("same"))
	l.add(t, r.DLQID, r, r, nil, nil) // rewritten as it was
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	if err := newCounts(api).Apply(context.Background(), storetest.UniqueID("shard"), l.recs); err != nil {
		t.Fatal(err)
	}
	if api.txs != 0 || api.gets != 0 || len(l.recs) != 4 {
		t.Fatalf("%d transactions, %d reads for %d changes that count nothing", api.txs, api.gets, len(l.recs))
	}
}

// Malformed batches are refused before anything is written.
func TestCountsRefusesMalformedRecords(t *testing.T) {
	t.Parallel()
	r := storetest.Record(t, storetest.UniqueID("bad"))
	good := streamChange(t, 1, r.DLQID, nil, r, nil, nil)
	noOld := streamChange(t, 2, r.DLQID, r, r, nil, nil)
	noOld.Change.OldImage = nil
	badSeq := good
	badSeq.Change.SequenceNumber = "12a"
	unknown := good
	unknown.EventName = "UPSERT"
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	for name, tc := range map[string]struct {
		shard string
		recs  []events.DynamoDBEventRecord
	}{
		"no shard":              {"", []events.DynamoDBEventRecord{good}},
		"a MODIFY without old":  {"s", []events.DynamoDBEventRecord{good, noOld}},
		"a bad sequence number": {"s", []events.DynamoDBEventRecord{badSeq}},
		"an unknown event":      {"s", []events.DynamoDBEventRecord{unknown}},
	} {
		if err := newCounts(api).Apply(context.Background(), tc.shard, tc.recs); err == nil {
			t.Errorf("%s: apply = nil", name)
		}
	}
	if api.txs != 0 {
		t.Fatalf("%d transactions for malformed batches", api.txs)
	}
}

// Half applied by another writer after this one read the checkpoint: the
// checkpoint's condition refuses the transaction, and the read-back says
// which changes are left to count.
func TestCountsStaleCheckpointCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 6)
	shard := storetest.UniqueID("shard")
	if err := newCounts(stack.Clients.DynamoDB).Apply(ctx, shard, l.recs[:len(l.recs)/2]); err != nil {
		t.Fatal(err)
	}
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB, staleGets: 1}
	if err := newCounts(api).Apply(ctx, shard, l.recs); err != nil {
		t.Fatal(err)
	}
	if api.gets != 2 || api.txs != 2 {
		t.Fatalf("%d reads, %d transactions: want the stale read, a refused transaction, the read-back and the rest counted", api.gets, api.txs)
	}
	l.check(t)
}
