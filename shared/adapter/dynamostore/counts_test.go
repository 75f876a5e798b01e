package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// image is a record's item as the ledger records it, with its hold if any.
func image(t *testing.T, r *quarantine.Record, h *quarantine.IntegrityHold) ledger.Item {
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
	it, err := dynamostore.LedgerItem(item)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// ledgerEntry is the ledger's entry of one change of key, numbered seq
// (made 21 digits long, as DynamoDB's are): the new image, and the old
// one on a MODIFY or REMOVE.
func ledgerEntry(t *testing.T, seq int, key string, old, next *quarantine.Record, oldHold, newHold *quarantine.IntegrityHold) ledger.Entry {
	t.Helper()
	e := ledger.Entry{Seq: fmt.Sprintf("%021d", 100000000000000000+seq), Event: ledger.EventModify, Key: key,
		At: "2026-11-30T08:00:00Z", Item: image(t, next, newHold), OldItem: image(t, old, oldHold)}
	switch {
	case old == nil:
		e.Event = ledger.EventInsert
	case next == nil:
		e.Event, e.Removed = ledger.EventRemove, e.OldItem
	}
	return e
}

// life is the ledgered changes of a few records of one source (their
// creations, a claim, a hold, a send, a deletion) and the counters they
// make, summed.
type life struct {
	source  string
	entries []ledger.Entry
	want    map[quarantine.CounterKey]int64
}

func (l *life) add(t *testing.T, key string, old, next *quarantine.Record, oldHold, newHold *quarantine.IntegrityHold) {
	t.Helper()
	l.entries = append(l.entries, ledgerEntry(t, len(l.entries)+1, key, old, next, oldHold, newHold))
	for _, d := range quarantine.ChangeDeltas(old, next, oldHold, newHold) {
		l.want[counterOf(d.CounterKey)] += d.N
	}
}

// counterOf is the counter a shard's key belongs to (shard 0 stands for
// all): readers sum the shards, and the ledger moves a change's delta to
// its stream shard's counter shard.
func counterOf(k quarantine.CounterKey) quarantine.CounterKey {
	k.Shard = 0
	return k
}

// shardsOf are the keys of every shard of counter k.
func shardsOf(k quarantine.CounterKey) []quarantine.CounterKey {
	out := make([]quarantine.CounterKey, quarantine.CounterShards)
	for i := range out {
		out[i] = k
		out[i].Shard = i
	}
	return out
}

// read reads every shard of every counter the life touched.
func (l *life) read(t *testing.T) map[quarantine.CounterKey]int64 {
	t.Helper()
	var keys []quarantine.CounterKey
	for k := range l.want {
		keys = append(keys, shardsOf(k)...)
	}
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	got, err := s.ReadCounters(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// segment is the segment of the life's entries [from, to).
func (l *life) segment(t *testing.T, from, to int) ledger.Segment {
	t.Helper()
	seg, err := ledger.NewSegment("arn:stream", "shard", nil, l.entries[from:to])
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

// newLife is the changes of n records' lives; each gets its own signature
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
			l.add(t, r.DLQID, r, nil, nil, nil) // a REMOVE
		}
	}
	// A change that counts nothing: a policy.
	pol := ledger.Item{dynamostore.KeyAttr: ledger.Str("#pol#" + l.source + "#p1")}
	l.entries = append(l.entries, ledger.Entry{Seq: fmt.Sprintf("%021d", 100000000000000000+len(l.entries)+1), Event: ledger.EventInsert,
		At: "2026-11-30T08:00:00Z", Key: "#pol#" + l.source + "#p1", Item: pol})
	return l
}

// check compares every counter the life touched (the sum of its shards,
// as readers sum them) with what it counted.
func (l *life) check(t *testing.T) {
	t.Helper()
	got := l.read(t)
	nonzero := 0
	for k, want := range l.want {
		var sum int64
		for _, s := range shardsOf(k) {
			sum += got[s]
		}
		if sum != want {
			t.Errorf("counter %s (all shards) = %d, want %d", dynamostore.CounterItemKey(k), sum, want)
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

// One segment writes one shard of each counter, its stream shard's
// (quarantine.CounterShardOf), each counter once: a storm's batch touches
// a few items, and the sums are the changes' deltas.
func TestCountsASegmentWritesItsStreamShardsCounterShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 24)
	seg := l.segment(t, 0, len(l.entries))
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	if err := newCounts(api).Count(ctx, storetest.UniqueID("shard"), 1, seg); err != nil {
		t.Fatal(err)
	}
	l.check(t)
	own := quarantine.CounterShardOf(seg.Shard)
	nonzero := 0
	for k, v := range l.read(t) {
		if v != 0 && k.Shard != own {
			t.Errorf("counter shard %s = %d: not the stream shard's (%d)", dynamostore.CounterItemKey(k), v, own)
		}
	}
	for _, v := range l.want {
		if v != 0 {
			nonzero++
		}
	}
	updates := 0
	for _, n := range api.txSizes {
		updates += n - 1 // the checkpoint's move
	}
	if updates != nonzero {
		t.Fatalf("%d counter updates for %d counters that changed", updates, nonzero)
	}
}

// A shard's segments counted twice (a retried invocation) count once, on
// a second applier as well: the checkpoint is in the table.
func TestCountsSegmentsCountedTwiceCountOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 8)
	shard := storetest.UniqueID("shard")
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	half := len(l.entries) / 2
	segs := []ledger.Segment{l.segment(t, 0, half), l.segment(t, half, len(l.entries))}
	for range 2 {
		c := newCounts(api)
		for i, seg := range segs {
			if err := c.Count(ctx, shard, int64(i+1), seg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if api.txs != 2 {
		t.Fatalf("%d transactions, want 2 (the second round has nothing left to count)", api.txs)
	}
	if n, err := newCounts(api).Counted(ctx, shard); err != nil || n != 2 {
		t.Fatalf("Counted = %d, %v; want 2", n, err)
	}
	l.check(t)
	// Another shard's checkpoint is its own: the same changes count again.
	if err := newCounts(api).Count(ctx, shard+"-other", 1, l.segment(t, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if api.txs != 3 {
		t.Fatalf("%d transactions, want 3", api.txs)
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
	if err := newCounts(ddb).Count(ctx, storetest.UniqueID("shard"), 1, l.segment(t, 0, len(l.entries))); err != nil {
		t.Fatal(err)
	}
	if lose.Lost() != 1 {
		t.Fatalf("%d answers lost", lose.Lost())
	}
	l.check(t)
}

// More than 99 counter shards in one segment take several transactions of
// at most 100 actions; a failure between them, and the segment counted
// again (twice), count every change once.
func TestCountsManyCountersAndARetryFromTheMiddle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 120)
	shard := storetest.UniqueID("shard")
	seg := l.segment(t, 0, len(l.entries))
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB, failTx: map[int]bool{2: true}}
	if err := newCounts(api).Count(ctx, shard, 1, seg); err == nil {
		t.Fatal("count with its second transaction failed = nil")
	}
	for range 2 {
		if err := newCounts(api).Count(ctx, shard, 1, seg); err != nil {
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

// A segment that counts nothing (a policy, a record rewritten as it was)
// moves the checkpoint only, so the next segment follows it.
func TestCountsNothingToCountMovesOnlyTheCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 0)
	r := storetest.Record(t, storetest.UniqueID("same"))
	l.add(t, r.DLQID, r, r, nil, nil) // rewritten as it was
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	shard := storetest.UniqueID("shard")
	if err := newCounts(api).Count(ctx, shard, 1, l.segment(t, 0, len(l.entries))); err != nil {
		t.Fatal(err)
	}
	if api.txs != 1 || len(api.txSizes) != 1 || api.txSizes[0] != 1 {
		t.Fatalf("%d transactions of %v actions, want one of the checkpoint alone", api.txs, api.txSizes)
	}
	if n, err := newCounts(api).Counted(ctx, shard); err != nil || n != 1 {
		t.Fatalf("Counted = %d, %v; want 1", n, err)
	}
}

// A segment whose predecessor is not counted, a malformed entry, no shard:
// refused before anything is written.
func TestCountsRefusesOutOfOrderAndMalformedSegments(t *testing.T) {
	t.Parallel()
	r := storetest.Record(t, storetest.UniqueID("bad"))
	l := newLife(t, 0)
	l.add(t, r.DLQID, nil, r, nil, nil)
	l.add(t, r.DLQID, r, r, nil, nil)
	good := l.segment(t, 1, 2) // entry 0 is the life's policy
	noOld := l.segment(t, 2, 3)
	noOld.Entries[0].OldItem = nil
	unknown := l.segment(t, 1, 2)
	unknown.Entries[0].Event = "UPSERT"
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB}
	for name, tc := range map[string]struct {
		shard string
		n     int64
		seg   ledger.Segment
	}{
		"no shard":                  {"", 1, good},
		"no segment number":         {storetest.UniqueID("s"), 0, good},
		"segment 2 before 1":        {storetest.UniqueID("s"), 2, good},
		"a MODIFY without old_item": {storetest.UniqueID("s"), 1, noOld},
		"an unknown event":          {storetest.UniqueID("s"), 1, unknown},
	} {
		if err := newCounts(api).Count(context.Background(), tc.shard, tc.n, tc.seg); err == nil {
			t.Errorf("%s: count = nil", name)
		}
	}
	if api.txs != 0 {
		t.Fatalf("%d transactions for refused segments", api.txs)
	}
}

// Counted by another writer after this one read the checkpoint: the
// checkpoint's condition refuses the transaction, and the read-back says
// it is done.
func TestCountsStaleCheckpointCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 6)
	shard := storetest.UniqueID("shard")
	seg := l.segment(t, 0, len(l.entries))
	if err := newCounts(stack.Clients.DynamoDB).Count(ctx, shard, 1, seg); err != nil {
		t.Fatal(err)
	}
	api := &countingAPI{CountsAPI: stack.Clients.DynamoDB, staleGets: 1}
	if err := newCounts(api).Count(ctx, shard, 1, seg); err != nil {
		t.Fatal(err)
	}
	if api.gets != 2 || api.txs != 1 {
		t.Fatalf("%d reads, %d transactions: want the stale read, a refused transaction and the read-back", api.gets, api.txs)
	}
	l.check(t)
}

// F8: a MODIFY that keeps the version but changes the status (a direct
// write) moves the state counters as the table's contents moved; an event
// bucket does not move (there was no event).
func TestCountsFollowAnInPlaceStatusRewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLife(t, 0)
	r := storetest.Record(t, storetest.UniqueID("inplace"))
	r.Source = l.source
	l.add(t, r.DLQID, nil, r, nil, nil)
	rewritten := *r
	rewritten.Status = quarantine.StatusResolved
	l.entries = append(l.entries, ledgerEntry(t, len(l.entries)+1, r.DLQID, r, &rewritten, nil, nil))
	shard := storetest.UniqueID("shard")
	if err := newCounts(stack.Clients.DynamoDB).Count(ctx, shard, 1, l.segment(t, 0, len(l.entries))); err != nil {
		t.Fatal(err)
	}
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	var keys []quarantine.CounterKey
	for sh := range quarantine.CounterShards {
		keys = append(keys, quarantine.StateCounterKey(r.Source, r.Status, r.FailureClass, sh),
			quarantine.StateCounterKey(r.Source, quarantine.StatusResolved, r.FailureClass, sh))
	}
	got, err := s.ReadCounters(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	var was, now int64
	for k, n := range got {
		if k.Status == r.Status {
			was += n
		} else {
			now += n
		}
	}
	if was != 0 || now != 1 {
		t.Fatalf("state counters %s %d, RESOLVED %d; want 0 and 1 (the table holds it RESOLVED)", r.Status, was, now)
	}
	for _, d := range quarantine.CounterDeltas(nil, r) {
		if !d.Bucket.IsZero() {
			b, err := s.ReadCounters(ctx, shardsOf(d.CounterKey))
			var sum int64
			for _, n := range b {
				sum += n
			}
			if err != nil || sum != d.N {
				t.Fatalf("bucket %s = %v (%v), want %d (the insert's only)", dynamostore.CounterItemKey(d.CounterKey), b, err, d.N)
			}
		}
	}
}

// A checkpoint of the old format (ctr_seq) is refused: counting from the
// first segment again would count twice.
func TestCountsRefusesAnOldCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shard := storetest.UniqueID("shard")
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: map[string]ddbtypes.AttributeValue{
		dynamostore.KeyAttr:            &ddbtypes.AttributeValueMemberS{Value: dynamostore.LedgerCountKey(shard)},
		dynamostore.LedgerCountSeqAttr: &ddbtypes.AttributeValueMemberS{Value: "0000000000000000000100000000000000000001"},
	}}); err != nil {
		t.Fatal(err)
	}
	l := newLife(t, 1)
	if err := newCounts(stack.Clients.DynamoDB).Count(ctx, shard, 1, l.segment(t, 0, len(l.entries))); err == nil {
		t.Fatal("count over an old-format checkpoint = nil")
	}
}
