package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// CountsAPI is the part of the DynamoDB client Counts uses.
type CountsAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Counts applies the counter changes of the table's stream records: the
// ledger's port for counters (design section 4). Each stream record of a
// quarantine record is one change, whose deltas are
// quarantine.ChangeDeltas of its old and new images; records of other
// keys (counter shards, policies, the ledger's own items) count nothing.
//
// Changes are applied idempotently per stream shard: the shard's
// checkpoint item (CounterCheckpointKey) holds ctr_seq, the sequence
// number (zero-padded to 40 digits) up to which every change is counted.
// Apply reads it (consistent), drops the changes at or before it, and
// applies the rest in seq order in chunks: one TransactWriteItems of at
// most 99 counter updates (the chunk's deltas summed per counter shard)
// and the checkpoint's update to the chunk's last seq, conditioned on
// ctr_seq being absent or before the chunk's first. So a batch applied
// twice, retried from its middle (bisected) or applied and unanswered
// counts each change once: a transaction whose checkpoint condition failed
// is read back, and a checkpoint at or past the chunk's last seq means it
// was applied. This rests on one writer per shard seeing its changes in
// stream order (ParallelizationFactor 1; children after parents).
type Counts struct {
	api   CountsAPI
	table string
}

// NewCounts returns a Counts on table.
func NewCounts(api CountsAPI, table string) *Counts {
	return &Counts{api: api, table: table}
}

// maxChunkUpdates is the most counter updates one transaction carries:
// TransactWriteItems takes at most 100 actions, one is the checkpoint.
const maxChunkUpdates = 99

// maxCountTries bounds the tries of one chunk lost to contention.
const maxCountTries = 20

// change is one stream record's counter deltas.
type change struct {
	seq    string // padded to 40 digits
	deltas []quarantine.CounterDelta
}

// Apply counts the changes recs (one batch of stream shard shard) make.
// A batch with nothing to count reads and writes nothing. A malformed
// record (no sequence number, an image missing, an image that does not
// decode) is an error before anything is written.
func (c *Counts) Apply(ctx context.Context, shard string, recs []events.DynamoDBEventRecord) error {
	if shard == "" {
		return errors.New("count changes: no stream shard id")
	}
	changes, err := countedChanges(recs)
	if err != nil || len(changes) == 0 {
		return err
	}
	ctr, err := c.checkpoint(ctx, shard)
	if err != nil {
		return err
	}
	for tries := 0; ; {
		i, _ := slices.BinarySearchFunc(changes, ctr, func(ch change, seq string) int {
			if ch.seq <= seq {
				return -1
			}
			return 1
		})
		if changes = changes[i:]; len(changes) == 0 {
			return nil
		}
		n, updates := nextChunk(changes)
		first, last := changes[0].seq, changes[n-1].seq
		err := c.transact(ctx, shard, first, last, updates)
		var moved bool
		switch {
		case err == nil:
			ctr, tries = last, 0
			continue
		case errors.Is(err, errCheckpointMoved):
			moved = true
		case !errors.Is(err, errContended):
			return err
		}
		if tries++; tries >= maxCountTries {
			return fmt.Errorf("count changes of shard %s: %d tries: %w", shard, tries, quarantine.ErrContention)
		}
		if moved {
			// Applied by an earlier try whose answer was lost, or by
			// another writer: the checkpoint says how far.
			if ctr, err = c.checkpoint(ctx, shard); err != nil {
				return err
			}
			continue
		}
		if err := quarantine.Backoff(ctx, tries, 20*time.Millisecond, 1280*time.Millisecond); err != nil {
			return err
		}
	}
}

// countedChanges decodes recs into the changes that count something,
// sorted by seq, each seq once.
func countedChanges(recs []events.DynamoDBEventRecord) ([]change, error) {
	var out []change
	for i := range recs {
		ch, err := changeOf(&recs[i])
		if err != nil {
			return nil, fmt.Errorf("count changes: record %d (%s): %w", i, recs[i].EventID, err)
		}
		if len(ch.deltas) > 0 {
			out = append(out, ch)
		}
	}
	slices.SortStableFunc(out, func(a, b change) int { return strings.Compare(a.seq, b.seq) })
	return slices.CompactFunc(out, func(a, b change) bool { return a.seq == b.seq }), nil
}

// changeOf decodes one stream record's change. Records whose key is not a
// quarantine record's count nothing.
func changeOf(rec *events.DynamoDBEventRecord) (change, error) {
	seq, err := padSeq(rec.Change.SequenceNumber)
	if err != nil {
		return change{}, err
	}
	oldImg, err := FromStreamImage(rec.Change.OldImage)
	if err != nil {
		return change{}, fmt.Errorf("old image: %w", err)
	}
	newImg, err := FromStreamImage(rec.Change.NewImage)
	if err != nil {
		return change{}, fmt.Errorf("new image: %w", err)
	}
	keys, err := FromStreamImage(rec.Change.Keys)
	if err != nil {
		return change{}, fmt.Errorf("keys: %w", err)
	}
	key := ""
	for _, img := range []map[string]types.AttributeValue{keys, newImg, oldImg} {
		if k, ok := img[KeyAttr].(*types.AttributeValueMemberS); ok && key == "" {
			key = k.Value
		}
	}
	if !IsRecordKey(key) {
		return change{seq: seq}, nil
	}
	var wantOld, wantNew bool
	switch rec.EventName {
	case string(events.DynamoDBOperationTypeInsert):
		wantNew = true
	case string(events.DynamoDBOperationTypeModify):
		wantOld, wantNew = true, true
	case string(events.DynamoDBOperationTypeRemove):
		wantOld = true
	default:
		return change{}, fmt.Errorf("event %q is not INSERT, MODIFY or REMOVE", rec.EventName)
	}
	if wantOld != (len(oldImg) > 0) || wantNew != (len(newImg) > 0) {
		return change{}, fmt.Errorf("%s of a record with old image %v, new image %v: the stream must carry NEW_AND_OLD_IMAGES", rec.EventName, len(oldImg) > 0, len(newImg) > 0)
	}
	old, oldHold := recordImage(oldImg)
	next, newHold := recordImage(newImg)
	return change{seq: seq, deltas: quarantine.ChangeDeltas(old, next, oldHold, newHold)}, nil
}

// recordImage decodes a record's image (nil when there is none) and its
// integrity hold, if any. An item that does not decode reads as the
// store reads it (decode: a stand-in with what still reads).
func recordImage(img map[string]types.AttributeValue) (*quarantine.Record, *quarantine.IntegrityHold) {
	if len(img) == 0 {
		return nil, nil
	}
	r := decode(img)
	if h, ok := HoldOf(img); ok {
		return r, &h
	}
	return r, nil
}

// padSeq zero-pads a stream sequence number (a decimal string of up to 40
// digits) to 40 digits, so that sequence numbers compare as strings.
func padSeq(seq string) (string, error) {
	if seq == "" || len(seq) > 40 || strings.Trim(seq, "0123456789") != "" {
		return "", fmt.Errorf("sequence number %q is not a decimal of 1..40 digits", seq)
	}
	return strings.Repeat("0", 40-len(seq)) + seq, nil
}

// nextChunk takes changes from the front while their deltas touch at
// most maxChunkUpdates counter shards, and returns how many it took and
// their summed deltas (shards that sum to 0 left out), in key order.
func nextChunk(changes []change) (int, []quarantine.CounterDelta) {
	sums := map[quarantine.CounterKey]*quarantine.CounterDelta{}
	n := 0
	for _, ch := range changes {
		fresh := 0
		for _, d := range ch.deltas {
			if sums[d.CounterKey] == nil {
				fresh++
			}
		}
		if n > 0 && len(sums)+fresh > maxChunkUpdates {
			break
		}
		for _, d := range ch.deltas {
			if s := sums[d.CounterKey]; s != nil {
				s.N += d.N
			} else {
				sums[d.CounterKey] = &quarantine.CounterDelta{CounterKey: d.CounterKey, N: d.N}
			}
		}
		n++
	}
	var out []quarantine.CounterDelta
	for _, d := range sums {
		if d.N != 0 {
			out = append(out, *d)
		}
	}
	slices.SortFunc(out, func(a, b quarantine.CounterDelta) int {
		return cmp.Compare(CounterItemKey(a.CounterKey), CounterItemKey(b.CounterKey))
	})
	return n, out
}

var (
	errCheckpointMoved = errors.New("counters checkpoint moved")
	errContended       = errors.New("counter transaction contended")
)

// transact applies one chunk: its counter updates and the checkpoint's
// move from before first to last, in one transaction.
func (c *Counts) transact(ctx context.Context, shard, first, last string, updates []quarantine.CounterDelta) error {
	seq := expression.Name(LedgerCountSeqAttr)
	cond := expression.AttributeNotExists(seq).Or(seq.LessThan(expression.Value(first)))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(expression.Set(seq, expression.Value(last))).Build()
	if err != nil {
		return fmt.Errorf("build checkpoint update: %w", err)
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(c.table), Key: itemKey(CounterCheckpointKey(shard)),
		UpdateExpression:    aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}}}
	for _, d := range updates {
		u, err := counterUpdate(c.table, d)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	_, err = c.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		if err != nil {
			return fmt.Errorf("count changes of shard %s: %w", shard, err)
		}
		return nil
	}
	for i, r := range tc.CancellationReasons {
		switch code := aws.ToString(r.Code); {
		case i == 0 && code == "ConditionalCheckFailed":
			return errCheckpointMoved
		case code == "TransactionConflict" || code == "ThrottlingError" || code == "ProvisionedThroughputExceeded":
			return errContended
		}
	}
	return fmt.Errorf("count changes of shard %s: %w", shard, err)
}

// checkpoint reads shard's ctr_seq ("" when nothing is counted yet) with a
// consistent read.
func (c *Counts) checkpoint(ctx context.Context, shard string) (string, error) {
	out, err := c.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table), Key: itemKey(CounterCheckpointKey(shard)), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: map[string]string{"#s": LedgerCountSeqAttr},
	})
	if err != nil {
		return "", fmt.Errorf("read counters checkpoint of shard %s: %w", shard, err)
	}
	if v, ok := out.Item[LedgerCountSeqAttr].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}
