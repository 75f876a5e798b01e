// Package countstream feeds the quarantine table's change stream to the
// counters (dynamostore.Counts) in dev and tests, as the ledger function
// does in a deployed stack: record writes no longer touch a counter, so
// whoever reads counters after writes through dynamostore first lets the
// counting catch up (DrainCounts, or a Reader that does it on each read).
// It runs the ledger's own service (usecase/ledger) over a ledger kept in
// memory (no bucket, no signing key), so its counting is the ledger's:
// segment by segment, late changes included. memstore needs none of this:
// it counts on each write.
package countstream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// Table is the logical id of the table whose stream is counted.
const Table = "QuarantineTable"

// Handler is a stream handler (a tumbling-window batch, the one event
// shape that names its shard) that ledgers the batch in memory and counts
// the ledger's new segments with c. An event without a shard id is
// refused: the counters never guess a checkpoint. On a failure the batch
// is retried (a partial batch response): the checkpoint makes that count
// each change once. Counting the same table with the ledger function too
// would count twice (each its own chain): run one of them. As the ledger
// does, it takes only batches of streamARN on a shard shards lists.
func Handler(c *dynamostore.Counts, streamARN string, shards ledger.Shards) localrunner.StreamHandler {
	svc := &ledger.Service{Objects: newObjects(), State: newState(), Counts: own{c}, Decode: dynamostore.LedgerItemFromStream,
		Shards: shards, Config: ledger.Config{StreamARN: streamARN, Retention: time.Hour}}
	return svc.HandleStream
}

// CheckpointPrefix prefixes the shard ids of countstream's counters
// checkpoints: its chain in memory is not the ledger function's, so the
// two must not share a checkpoint.
const CheckpointPrefix = "countstream-"

// own counts under countstream's own checkpoints.
type own struct{ c *dynamostore.Counts }

func (o own) Counted(ctx context.Context, shard string) (int64, error) {
	return o.c.Counted(ctx, CheckpointPrefix+shard)
}

func (o own) Count(ctx context.Context, shard string, n int64, seg dl.Segment) error {
	return o.c.Count(ctx, CheckpointPrefix+shard, n, seg)
}

var (
	mu      sync.Mutex
	pollers = map[*embedded.Stack]*localrunner.StreamPoller{}
)

// poller is st's one poller of the table's stream: its cursors stay
// between drains, so each drain reads only what is new.
func poller(st *embedded.Stack) (*localrunner.StreamPoller, error) {
	mu.Lock()
	defer mu.Unlock()
	if p := pollers[st]; p != nil {
		return p, nil
	}
	arn := st.StreamARNs[Table]
	if arn == "" {
		return nil, fmt.Errorf("count changes: table %s has no stream", Table)
	}
	counts := dynamostore.NewCounts(st.Clients.DynamoDB, st.Names[Table])
	p := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, Handler: Handler(counts, arn, dynamostore.StreamShards{API: st.Clients.DynamoDBStreams, StreamARN: arn}), Bisect: true}
	pollers[st] = p
	return p, nil
}

// DrainCounts counts every change st's table stream holds now: once it
// returns, the counters are what the ledger has once it caught up with
// every write made before the call.
func DrainCounts(ctx context.Context, st *embedded.Stack) error {
	p, err := poller(st)
	if err != nil {
		return err
	}
	if _, err := p.Drain(ctx); err != nil {
		return fmt.Errorf("count changes: %w", err)
	}
	return nil
}

// Counters reads counters (dynamostore.Store, Lister, memstore.Store).
type Counters interface {
	ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// Signatures lists a source's open records by signature.
type Signatures interface {
	OpenSignatures(ctx context.Context, source string) (map[string]int64, error)
}

// Reader reads st's counters after counting every change made before the
// read: a caught-up ledger's counters, for tests and local runs that read
// counters right after their writes.
type Reader struct {
	Stack      *embedded.Stack
	Counters   Counters
	Signatures Signatures
}

// NewReader is a Reader of st's table.
func NewReader(st *embedded.Stack) *Reader {
	table := st.Names[Table]
	return &Reader{Stack: st, Counters: dynamostore.New(st.Clients.DynamoDB, table), Signatures: dynamostore.NewLister(st.Clients.DynamoDB, table)}
}

// ReadCounters drains the stream into the counters, then reads them.
func (r *Reader) ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	if err := DrainCounts(ctx, r.Stack); err != nil {
		return nil, err
	}
	return r.Counters.ReadCounters(ctx, keys)
}

// OpenSignatures drains the stream into the counters, then lists them.
func (r *Reader) OpenSignatures(ctx context.Context, source string) (map[string]int64, error) {
	if err := DrainCounts(ctx, r.Stack); err != nil {
		return nil, err
	}
	return r.Signatures.OpenSignatures(ctx, source)
}

// Run counts st's table stream as it grows, until ctx ends: a local stack's
// stand-in for the ledger function's counting (its checkpoint makes the
// two agree if both run).
func Run(ctx context.Context, st *embedded.Stack, log *slog.Logger) error {
	p, err := poller(st)
	if err != nil {
		return err
	}
	p.Log = log
	return p.Run(ctx)
}
