package capacity

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/latency"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// Options shape a storm.
type Options struct {
	// Messages is how many dead-lettered messages arrive (default 20,000).
	Messages int
	// Sources is how many source queues (default 50); the first takes
	// HotShare of the messages (default 0.8), the others share the rest
	// evenly. Every FIFOEvery-th of the others is a FIFO queue (default
	// 4: 12 of 49).
	Sources   int
	HotShare  float64
	FIFOEvery int
	// Groups is the number of message groups per FIFO source (default 4).
	Groups int
	// InvalidShare of the messages fail the source's schema (default
	// 0.1; negative: none).
	InvalidShare float64
	// Seed makes the storm repeatable.
	Seed uint64
	// Model is the latency model (latency.AWS, the benchmarks' model, when
	// it has no figures).
	Model latency.Model
	// Workers is how many ingest invocations run at once in the
	// simulation (default: the template mapping's MaximumConcurrency, at
	// most 4). The durations are wall time, CPU included: on a machine of
	// few cores more workers lengthen each invocation, so the default
	// stays at the 4 of the runs before (docs/operations.md "Storm
	// capacity").
	Workers int
	// Progress, when set, is told what the run is doing.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Messages <= 0 {
		o.Messages = 20000
	}
	if o.Sources <= 0 {
		o.Sources = 50
	}
	if o.HotShare <= 0 || o.HotShare > 1 {
		o.HotShare = 0.8
	}
	if o.FIFOEvery <= 0 {
		o.FIFOEvery = 4
	}
	if o.Groups <= 0 {
		o.Groups = 4
	}
	switch {
	case o.InvalidShare == 0 || o.InvalidShare >= 1:
		o.InvalidShare = 0.1
	case o.InvalidShare < 0:
		o.InvalidShare = 0
	}
	if len(o.Model.By) == 0 {
		o.Model = latency.AWS
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// source is one simulated source queue.
type source struct {
	name, arn, dlqARN string
	fifo              bool
	seq               int
}

// Invocation is one ingest invocation of the storm.
type Invocation struct {
	Messages int
	FIFO     bool
	Duration time.Duration
}

// Batch is one ledger invocation on a stream batch.
type Batch struct {
	// Records are the record changes it took; Skipped the ledger's own
	// changes that AWS's stream would carry in the same batch (it skips
	// them).
	Records, Skipped int
	Duration         time.Duration
	// Writes are the DynamoDB writes it made (counters, checkpoint, head).
	Writes []Write
	// Calls are its AWS requests; Calls.S3PutBytes the segment's bytes.
	Calls Snapshot
}

// Result is what a storm measured.
type Result struct {
	Options Options
	// Layout is the table's, from the template.
	Layout Layout
	// FIFOSources is how many sources were FIFO queues; Hot the hot one.
	FIFOSources int
	Hot         string
	// BodyBytes is the mean body size.
	BodyBytes int
	// IngestWrites and LedgerWrites are the writes of each phase.
	IngestWrites, LedgerWrites []Write
	Invocations                []Invocation
	IngestCalls                Snapshot
	Batches                    []Batch
	// Digest is one digest run after the storm.
	Digest         time.Duration
	DigestCalls    Snapshot
	DigestSchedule string
	// Template settings the projection uses.
	MappingConcurrency, MappingBatchSize int
	LedgerBatchSize, LedgerParallel      int
	IngestMemoryMB, LedgerMemoryMB       int
	Elapsed                              time.Duration
	// Unmodelled lists the calls the latency model has no figure for
	// (empty: none), which took no modelled time.
	Unmodelled string
	// Load is the machine's load average at the end (Linux), which the
	// measured durations depend on.
	Load string
	// Retiring is an index the template keeps only until a migration
	// drops it (the status index beside the source index: docs/operations.md
	// "Moving to the source index", step 3); empty: none.
	Retiring string
}

// Run plays a storm through the real ingest handler and the real ledger
// (its stream handler, segments in the stack's Object Lock bucket,
// counters) on st, with the functions' DynamoDB clients recorded and
// every AWS call of the functions delayed by the latency model.
func Run(ctx context.Context, st *embedded.Stack, o Options) (*Result, error) {
	o.defaults()
	start := time.Now()
	table := st.Names["QuarantineTable"]
	layout, err := LayoutFromTemplate(st.Template, "QuarantineTable")
	if err != nil {
		return nil, err
	}
	rec := NewRecorder(layout, table, st.Clients.DynamoDB)
	calls := NewCalls(st.AWS.HTTPClient, o.Model)
	cfg := st.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, rec.APIOption)
	clients := awsclients.New(cfg, awsclients.Options{Local: true, HTTPClient: calls})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	fns, err := localrunner.NewFunctions(st, clients, log, io.Discard)
	if err != nil {
		return nil, err
	}
	res := &Result{Options: o, Layout: layout, MappingConcurrency: fns.Mapping.Concurrency, MappingBatchSize: fns.Mapping.BatchSize,
		LedgerBatchSize: fns.LedgerStream.BatchSize, LedgerParallel: 1}
	if err := res.readTemplate(st); err != nil {
		return nil, err
	}
	if layout.Has(dynamostore.IndexByStatus) && layout.Has(dynamostore.IndexBySource) {
		res.Retiring = dynamostore.IndexByStatus
	}
	if o.Workers <= 0 {
		o.Workers = min(max(res.MappingConcurrency, 1), 4)
	}
	ledgerSvc, err := fns.NewLedger(clients, io.Discard)
	if err != nil {
		return nil, err
	}
	poller := fns.LedgerPoller(st.Clients, ledgerSvc.HandleStream)
	poller.BatchSize = res.LedgerBatchSize
	// What the stack's creation left on the stream is ledgered first.
	if _, err := poller.Drain(ctx); err != nil {
		return nil, fmt.Errorf("ledger before the storm: %w", err)
	}

	// The storm's sources and messages.
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	// Each stack has a table of its own: the names need not be unique.
	const prefix = "storm"
	srcs := make([]*source, o.Sources)
	icfg := fns.IngestConfig
	icfg.Sources = map[string]ingest.SourceConfig{}
	icfg.DLQARNs = nil
	for i := range srcs {
		s := &source{name: fmt.Sprintf("%s-%02d", prefix, i)}
		dlq := s.name + "-dlq"
		if i > 0 && (i-1)%o.FIFOEvery == 0 {
			s.fifo, s.name, dlq = true, s.name+".fifo", dlq+".fifo"
			res.FIFOSources++
		}
		s.arn = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.AWS.Region, embedded.Account, s.name)
		s.dlqARN = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.AWS.Region, embedded.Account, dlq)
		srcs[i] = s
		icfg.Sources[s.name] = ingest.SourceConfig{ARN: s.arn, DLQ: dlq, IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"}
		icfg.DLQARNs = append(icfg.DLQARNs, s.dlqARN)
	}
	res.Hot = srcs[0].name
	h, err := wire.Ingest(ctx, icfg, wire.From(clients), wire.Runtime{Log: log, Metrics: io.Discard})
	if err != nil {
		return nil, err
	}
	// Lambda takes batches from each DLQ in arrival order: the messages
	// of a source, in batches of the mapping's size.
	queued := make([][]events.SQSMessage, len(srcs))
	bodyBytes := 0
	for n := range o.Messages {
		i := 0
		if o.Sources > 1 && rng.Float64() >= o.HotShare {
			i = 1 + rng.IntN(o.Sources-1)
		}
		s := srcs[i]
		m := message(s, n, rng.Float64() < o.InvalidShare, o.Groups)
		bodyBytes += len(m.Body)
		queued[i] = append(queued[i], m)
	}
	res.BodyBytes = bodyBytes / o.Messages
	var batches []events.SQSEvent
	for i, q := range queued {
		for len(q) > 0 {
			n := min(len(q), res.MappingBatchSize)
			batches = append(batches, events.SQSEvent{Records: q[:n]})
			q = q[n:]
		}
		queued[i] = nil
	}
	rng.Shuffle(len(batches), func(a, b int) { batches[a], batches[b] = batches[b], batches[a] })

	fmt.Fprintf(o.Progress, "storm: %d messages in %d ingest invocations, %d at a time …\n", o.Messages, len(batches), o.Workers)
	mark, before := rec.Len(), calls.Snapshot()
	invs, err := runIngest(ctx, h, batches, o.Workers)
	if err != nil {
		return nil, err
	}
	res.Invocations = invs
	res.IngestWrites, res.IngestCalls = rec.Writes(mark), calls.Snapshot().Sub(before)
	if got := countNew(res.IngestWrites, prefix); got != o.Messages {
		return nil, fmt.Errorf("storm: %d records created for %d messages", got, o.Messages)
	}

	fmt.Fprintln(o.Progress, "ledger: the stream in batches as its mapping delivers them …")
	mark = rec.Len()
	// On AWS the ledger's own writes (its counters, checkpoint and head)
	// are changes of the table too, and take their place in the stream's
	// batches; the emulator's stream leaves the transaction's out
	// (EMULATORS.md). So each batch the poller delivers is handed to the
	// ledger in parts: each part as many record changes as a batch of
	// BatchSize holds beside the own changes of the part before it.
	var mu sync.Mutex
	own := 0
	poller.Handler = func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		var resp events.DynamoDBTimeWindowEventResponse
		recs := ev.Records
		for len(recs) > 0 {
			k := min(len(recs), max(res.LedgerBatchSize-own, 1))
			part := ev
			part.Records = recs[:k]
			from, c0 := rec.Len(), calls.Snapshot()
			t0 := time.Now()
			var err error
			resp, err = ledgerSvc.HandleStream(ctx, part)
			b := Batch{Records: k, Skipped: min(own, res.LedgerBatchSize-k), Duration: time.Since(t0), Writes: rec.Writes(from), Calls: calls.Snapshot().Sub(c0)}
			if err != nil || len(resp.BatchItemFailures) > 0 {
				return resp, err
			}
			res.Batches = append(res.Batches, b)
			own = 0
			for _, w := range b.Writes {
				if w.Target == TableTarget && w.Changed {
					own++
				}
			}
			ev.State = resp.State
			recs = recs[k:]
		}
		return resp, nil
	}
	if _, err := poller.Drain(ctx); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	res.LedgerWrites = rec.Writes(mark)

	c0 := calls.Snapshot()
	t0 := time.Now()
	rep, err := ledgerSvc.Digest(ctx)
	if err != nil {
		return nil, fmt.Errorf("digest: %w", err)
	}
	if !rep.Written {
		return nil, fmt.Errorf("digest after the storm: none written")
	}
	res.Digest, res.DigestCalls = time.Since(t0), calls.Snapshot().Sub(c0)
	res.Unmodelled = calls.Unmodelled(o.Model)
	res.Elapsed = time.Since(start)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			res.Load = " (load average " + f[0] + ")"
		}
	}
	return res, nil
}

// MemoryMB is the template's MemorySize of the function logicalID, in MB
// (Lambda's default, 128, when it sets none).
func MemoryMB(st *embedded.Stack, logicalID string) (int, error) {
	fn, err := st.Template.GetServerlessFunctionWithName(logicalID)
	if err != nil {
		return 0, err
	}
	if fn.MemorySize == nil {
		return 128, nil
	}
	return *fn.MemorySize, nil
}

// readTemplate reads the functions' memory sizes and the digest schedule.
func (res *Result) readTemplate(st *embedded.Stack) error {
	for id, dst := range map[string]*int{"IngestFunction": &res.IngestMemoryMB, "LedgerFunction": &res.LedgerMemoryMB} {
		mb, err := MemoryMB(st, id)
		if err != nil {
			return err
		}
		*dst = mb
	}
	m, err := st.Template.GetLambdaEventSourceMappingWithName("LedgerStreamMapping")
	if err != nil {
		return err
	}
	if m.ParallelizationFactor != nil {
		res.LedgerParallel = *m.ParallelizationFactor
	}
	rule, err := st.Template.GetEventsRuleWithName("LedgerDigestSchedule")
	if err != nil {
		return err
	}
	if rule.ScheduleExpression != nil {
		res.DigestSchedule = *rule.ScheduleExpression
	}
	return nil
}

// countNew counts the storm's records created (a put into the table of
// an item of the storm's sources that did not exist).
func countNew(ws []Write, prefix string) int {
	n := 0
	for _, w := range ws {
		if w.Target == TableTarget && w.Kind == "write" && w.Changed && !w.Transactional && strings.HasPrefix(w.Key, prefix) {
			n++
		}
	}
	return n
}

func runIngest(ctx context.Context, h *ingest.Handler, batches []events.SQSEvent, workers int) ([]Invocation, error) {
	out := make([]Invocation, len(batches))
	errs := make(chan error, workers)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ev := batches[i]
				t0 := time.Now()
				resp, err := h.Handle(ctx, ev)
				if err == nil && len(resp.BatchItemFailures) > 0 {
					err = fmt.Errorf("ingest reported %d batch item failures", len(resp.BatchItemFailures))
				}
				if err != nil {
					errs <- err
					return
				}
				out[i] = Invocation{Messages: len(ev.Records), FIFO: strings.HasSuffix(ev.Records[0].EventSourceARN, ".fifo"), Duration: time.Since(t0)}
			}
		}()
	}
	var err error
feed:
	for i := range batches {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return out, err
}

// message is the n-th message of the storm, dead-lettered from s, as
// Lambda delivers it from s's DLQ.
func message(s *source, n int, invalid bool, groups int) events.SQSMessage {
	qty := -5
	if invalid {
		qty = 0 // the schema refuses a zero movement: a validation failure
	}
	// A note brings the body to about 770 bytes, the size the cost table
	// of docs/operations.md is measured with.
	body := fmt.Sprintf(`{"event_id":"storm-%08d","ndc":"12345-678-90","lot":"LOT-%04d","quantity_delta":%d,"schedule":"CII","facility":"FAC-%d","occurred_at":"2026-11-29T10:00:00Z","note":"%s"}`,
		n, n%5000, qty, n%7, strings.Repeat("x", 580))
	m := events.SQSMessage{
		MessageId: fmt.Sprintf("storm-msg-%08d", n), Body: body, EventSource: "aws:sqs", EventSourceARN: s.dlqARN, AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": s.arn},
	}
	if s.fifo {
		s.seq++
		m.Attributes["MessageGroupId"] = fmt.Sprintf("g%d", n%groups)
		m.Attributes["SequenceNumber"] = fmt.Sprintf("%020d", s.seq)
		m.Attributes["MessageDeduplicationId"] = fmt.Sprintf("storm-%08d", n)
	}
	return m
}
