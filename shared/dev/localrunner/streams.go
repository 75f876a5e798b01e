package localrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/awslabs/goformation/v7/cloudformation"
)

// StreamMapping is a DynamoDB stream event source mapping, as the
// template declares it.
type StreamMapping struct {
	StreamARN string
	BatchSize int
	Bisect    bool
	// Window is the tumbling window (the event names the shard only with one).
	Window time.Duration
	// ReportBatchItemFailures enables partial batch responses.
	ReportBatchItemFailures bool
}

// StreamMappingFromTemplate reads the stream mapping with the given logical
// id, so the runner cannot drift from the template. streamARN is the
// stream's real ARN (the template resolves it to a placeholder).
func StreamMappingFromTemplate(t *cloudformation.Template, logicalID, streamARN string) (StreamMapping, error) {
	m, err := t.GetLambdaEventSourceMappingWithName(logicalID)
	if err != nil {
		return StreamMapping{}, err
	}
	if streamARN == "" {
		return StreamMapping{}, fmt.Errorf("mapping %s: the table has no stream", logicalID)
	}
	out := StreamMapping{StreamARN: streamARN, BatchSize: 100}
	if m.BatchSize != nil {
		out.BatchSize = *m.BatchSize
	}
	out.Bisect = aws.ToBool(m.BisectBatchOnFunctionError)
	if m.TumblingWindowInSeconds != nil {
		out.Window = time.Duration(*m.TumblingWindowInSeconds) * time.Second
	}
	out.ReportBatchItemFailures = slices.Contains(m.FunctionResponseTypes, "ReportBatchItemFailures")
	if out.Window <= 0 {
		return StreamMapping{}, fmt.Errorf("mapping %s has no tumbling window: its events would not name the shard", logicalID)
	}
	return out, nil
}

// StreamsAPI is the part of the DynamoDB Streams client the stream poller
// uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// StreamHandler is a Lambda handler of DynamoDB stream batches with a
// tumbling window (the one event shape that names the shard).
type StreamHandler func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error)

// StreamPoller feeds a DynamoDB stream to a handler the way Lambda's event
// source mapping does (kumo never polls a stream itself): per shard, in
// stream order, parents before children, one batch at a time; a batch
// whose invocation fails is delivered again (halved first when Bisect is
// set, as BisectBatchOnFunctionError does); a partial batch response
// acknowledges the records before the first failed sequence number and
// delivers the rest again. Each event carries the shard id, the stream ARN
// and the state the handler returned last for that shard, as a tumbling
// window does.
type StreamPoller struct {
	API       StreamsAPI
	StreamARN string
	Handler   StreamHandler
	// BatchSize is the most records per invocation (default 100).
	BatchSize int
	// Bisect halves a batch after a failed invocation.
	Bisect bool
	// MaxRetries bounds the deliveries of one failing batch in a Drain
	// (default 3); Run retries without bound, as a mapping with
	// MaximumRetryAttempts -1 does until the records expire.
	MaxRetries int
	// PollEvery is Run's pause between drains (default 200 ms).
	PollEvery time.Duration
	Log       *slog.Logger
	// Gate, when set, is the mapping the poller stands for (LedgerMapping):
	// nothing is polled while it is disabled (or absent), and when it is
	// replaced by a new one (a new UUID) the poller starts again at the new
	// one's starting position: LATEST skips what the stream holds, as
	// Lambda's new mapping does; TRIM_HORIZON reads the stream again.
	Gate MappingGate

	mu      sync.Mutex
	shards  map[string]*shardCursor
	stats   StreamStats
	mapping string // the UUID the cursors belong to
}

// MappingGate says whether, and from where, a stream poller polls.
type MappingGate interface {
	State(ctx context.Context) (MappingState, error)
}

// StreamStats counts what a poller delivered.
type StreamStats struct {
	// Invocations counts handler calls; Failed those that returned an
	// error (or failed items); Records the records acknowledged.
	Invocations, Failed, Records int
}

// shardCursor is where a poller is in one shard: the records read and not
// yet acknowledged, and the iterator after them (nil: the shard is closed
// and read to its end).
type shardCursor struct {
	id       string
	iterator *string
	pending  []events.DynamoDBEventRecord
	// last is the sequence number of the newest record read, to skip what
	// was read already when an iterator must be replaced.
	last    string
	started bool
	state   map[string]string
	size    int // the next batch's size (halved by Bisect)
	fails   int
}

// ErrStreamBatchFailed says a batch still failed after MaxRetries.
var ErrStreamBatchFailed = errors.New("stream batch failed")

// Stats returns what the poller delivered so far.
func (p *StreamPoller) Stats() StreamStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Run drains the stream until ctx ends.
func (p *StreamPoller) Run(ctx context.Context) error {
	every := p.PollEvery
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	for ctx.Err() == nil {
		if _, err := p.drain(ctx, -1); err != nil && ctx.Err() == nil {
			p.log().Warn("stream poll failed; retrying", "stream", p.StreamARN, "error", err)
		}
		sleep(ctx, every)
	}
	return nil
}

// Drain delivers every record the stream holds now, shard by shard, and
// returns how many it acknowledged. A batch that still fails after
// MaxRetries deliveries ends it with ErrStreamBatchFailed (the records
// stay pending: a later Drain delivers them again).
func (p *StreamPoller) Drain(ctx context.Context) (int, error) {
	max := p.MaxRetries
	if max <= 0 {
		max = 3
	}
	return p.drain(ctx, max)
}

func (p *StreamPoller) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (p *StreamPoller) drain(ctx context.Context, maxRetries int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	latest := false
	if p.Gate != nil {
		m, err := p.Gate.State(ctx)
		if err != nil {
			return 0, fmt.Errorf("stream mapping: %w", err)
		}
		if !m.Enabled {
			return 0, nil // a disabled mapping polls nothing
		}
		if m.UUID != p.mapping {
			if p.mapping != "" { // a new mapping: its own position, not ours
				p.shards = nil
				latest = m.StartingPosition == "LATEST"
				p.log().Warn("stream mapping re-created: starting again", "uuid", m.UUID, "starting_position", m.StartingPosition)
			}
			p.mapping = m.UUID
		}
	}
	shards, err := p.describe(ctx)
	if err != nil {
		return 0, err
	}
	if p.shards == nil {
		p.shards = map[string]*shardCursor{}
	}
	if latest {
		if err := p.skipToLatest(ctx, shards); err != nil {
			return 0, err
		}
	}
	total := 0
	for _, sh := range shards {
		c := p.shards[aws.ToString(sh.ShardId)]
		if c == nil {
			c = &shardCursor{id: aws.ToString(sh.ShardId), state: map[string]string{}}
			p.shards[c.id] = c
		}
		n, err := p.drainShard(ctx, c, maxRetries)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// describe lists the stream's shards, parents before their children.
func (p *StreamPoller) describe(ctx context.Context) ([]streamtypes.Shard, error) {
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := p.API.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.StreamARN), ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("describe stream: %w", err)
		}
		if out.StreamDescription == nil {
			return nil, errors.New("describe stream: no description")
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	known := map[string]bool{}
	for _, s := range shards {
		known[aws.ToString(s.ShardId)] = true
	}
	// Parents first: a shard's depth is the length of its known ancestry.
	depth := func(s streamtypes.Shard) int {
		d := 0
		byID := map[string]streamtypes.Shard{}
		for _, x := range shards {
			byID[aws.ToString(x.ShardId)] = x
		}
		for parent := aws.ToString(s.ParentShardId); parent != "" && known[parent] && d < len(shards); d++ {
			parent = aws.ToString(byID[parent].ParentShardId)
		}
		return d
	}
	sort.SliceStable(shards, func(i, j int) bool { return depth(shards[i]) < depth(shards[j]) })
	return shards, nil
}

func (p *StreamPoller) drainShard(ctx context.Context, c *shardCursor, maxRetries int) (int, error) {
	batch := p.BatchSize
	if batch <= 0 {
		batch = 100
	}
	if c.size <= 0 {
		c.size = batch
	}
	acked := 0
	for ctx.Err() == nil {
		if err := p.fill(ctx, c, batch); err != nil {
			return acked, err
		}
		if len(c.pending) == 0 {
			return acked, nil
		}
		recs := c.pending[:min(c.size, len(c.pending))]
		ev := events.DynamoDBTimeWindowEvent{
			DynamoDBEvent: events.DynamoDBEvent{Records: recs},
			TimeWindowProperties: events.TimeWindowProperties{
				ShardID: c.id, EventSourceARN: p.StreamARN, State: c.state,
				Window: events.Window{Start: events.RFC3339EpochTime{Time: time.Now().Truncate(time.Minute)}, End: events.RFC3339EpochTime{Time: time.Now().Truncate(time.Minute).Add(time.Minute)}},
			},
		}
		p.stats.Invocations++
		resp, err := p.Handler(ctx, ev)
		done := len(recs)
		if err != nil {
			done = 0 // a failed invocation acknowledges nothing
		} else if len(resp.BatchItemFailures) > 0 {
			done = indexOfSeq(recs, resp.BatchItemFailures[0].ItemIdentifier)
			if done < 0 {
				err = fmt.Errorf("batch item failure %q names no record of the batch", resp.BatchItemFailures[0].ItemIdentifier)
				done = 0
			}
		}
		if err == nil && done == len(recs) {
			c.state = resp.State
			if c.state == nil {
				c.state = map[string]string{}
			}
		}
		c.pending = c.pending[done:]
		acked += done
		p.stats.Records += done
		if err == nil && done == len(recs) {
			c.fails, c.size = 0, batch
			continue
		}
		p.stats.Failed++
		c.fails++
		if err == nil {
			err = fmt.Errorf("record %s failed", resp.BatchItemFailures[0].ItemIdentifier)
		}
		p.log().Warn("stream batch failed; delivering it again", "shard", c.id, "records", len(recs), "acknowledged", done, "try", c.fails, "error", err)
		if p.Bisect && c.size > 1 && done == 0 {
			c.size = (min(c.size, len(c.pending)) + 1) / 2
		}
		if maxRetries >= 0 && c.fails >= maxRetries {
			c.fails = 0
			return acked, fmt.Errorf("shard %s: %w after %d deliveries: %v", c.id, ErrStreamBatchFailed, maxRetries, err)
		}
		sleep(ctx, min(time.Duration(c.fails)*50*time.Millisecond, time.Second))
	}
	return acked, ctx.Err()
}

// fill reads records after the pending ones until there are at least n
// pending or the shard has no more now.
func (p *StreamPoller) fill(ctx context.Context, c *shardCursor, n int) error {
	for len(c.pending) < n {
		if !c.started {
			it, err := p.iteratorAfter(ctx, c)
			if err != nil {
				return err
			}
			c.iterator, c.started = it, true
		}
		if c.iterator == nil {
			return nil // closed and read to its end
		}
		out, err := p.API.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: c.iterator, Limit: aws.Int32(int32(n - len(c.pending)))})
		var expired *streamtypes.ExpiredIteratorException
		if errors.As(err, &expired) {
			c.started = false // a new iterator, past what was read
			continue
		}
		if err != nil {
			return fmt.Errorf("get records of %s: %w", c.id, err)
		}
		c.iterator = out.NextShardIterator
		added := 0
		for _, r := range out.Records {
			e, err := ToStreamEvent(r, p.StreamARN)
			if err != nil {
				return fmt.Errorf("shard %s: %w", c.id, err)
			}
			if c.last != "" && !seqLess(c.last, e.Change.SequenceNumber) {
				continue // read before this iterator was replaced
			}
			c.pending = append(c.pending, e)
			c.last = e.Change.SequenceNumber
			added++
		}
		if added == 0 && len(out.Records) == 0 {
			return nil // nothing more now
		}
	}
	return nil
}

// iteratorAfter is an iterator past c.last. kumo answers every iterator
// type as TRIM_HORIZON, so the records up to c.last are skipped by fill.
func (p *StreamPoller) iteratorAfter(ctx context.Context, c *shardCursor) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.StreamARN), ShardId: aws.String(c.id), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
	if c.last != "" {
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(c.last)
	}
	out, err := p.API.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("shard iterator of %s: %w", c.id, err)
	}
	return out.ShardIterator, nil
}

func indexOfSeq(recs []events.DynamoDBEventRecord, seq string) int {
	for i, r := range recs {
		if r.Change.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// seqLess compares stream sequence numbers (decimal strings) as numbers.
func seqLess(a, b string) bool {
	x, okx := new(big.Int).SetString(a, 10)
	y, oky := new(big.Int).SetString(b, 10)
	if !okx || !oky {
		return a < b
	}
	return x.Cmp(y) < 0
}

// skipToLatest moves every shard's cursor past what it holds now (kumo
// answers every iterator type as TRIM_HORIZON, so LATEST is read and
// dropped).
func (p *StreamPoller) skipToLatest(ctx context.Context, shards []streamtypes.Shard) error {
	for _, sh := range shards {
		c := &shardCursor{id: aws.ToString(sh.ShardId), state: map[string]string{}}
		p.shards[c.id] = c
		for {
			if err := p.fill(ctx, c, 1000); err != nil {
				return err
			}
			if len(c.pending) == 0 {
				break
			}
			c.pending = nil
		}
	}
	return nil
}
