package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Options size the scenario.
type Options struct {
	Seed   uint64
	Events int
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Log receives the functions' JSON logs (discarded when nil).
	Log io.Writer
	// Progress receives one line as each phase starts (nothing when nil).
	Progress io.Writer
}

// StackParams are the template parameters the demo deploys with: short
// visibility timeouts and settle window so retries happen in seconds, and
// parked records due for the archive at once.
var StackParams = map[string]any{
	"MaxReceiveCount":                3,
	"SourceVisibilityTimeoutSeconds": 2,
	"DLQVisibilityTimeoutSeconds":    2,
	// At least MaxReceiveCount × visibility + margin (redrive would
	// settle later anyway).
	"SettleWindowSeconds": 7,
	"SettleMarginSeconds": 1,
	"ParkAgeSeconds":      0,
}

// Report is what the scenario found.
type Report struct {
	// Sent is what the producer sent, Consumed what the consumer consumed
	// before the outage cleared, DeadLettered the distinct messages ingest
	// took off the DLQ before the first redrive (measured at the DLQ, not
	// predicted from the generator), Recalled the lots the consumer
	// dead-lettered itself.
	Sent, Consumed, DeadLettered, Recalled int
	// Kinds counts the generated events by what the consumer does with them.
	Kinds map[Kind]int
	// ReplaysConsumed and ReplaysDeadLettered are the replays the consumer
	// consumed and dead-lettered again (recalled lots failing again).
	ReplaysConsumed, ReplaysDeadLettered int
	// IngestMessages is how many distinct DLQ messages (by message id)
	// ingest was handed (Ingest.Received counts a message received twice
	// twice); IngestRedeliveries how many of the deliveries SQS marked as
	// a repeat (ApproximateReceiveCount above 1), counted apart so that
	// "received = distinct + redeliveries" can fail; IngestDeletesRefused
	// the deletes SQS refused because the receipt had expired (the message
	// was visible again, to be received again).
	IngestMessages, IngestRedeliveries, IngestDeletesRefused int
	// Replays is the sum of the records' redrive counts, read back from
	// the table at the end: the replays sent, as the records tell it.
	Replays int
	// Records as quarantined, before any redrive.
	Records     []*quarantine.Record
	ByClass     map[quarantine.Class]int
	BySignature map[string]int
	Ingest      localrunner.Stats
	// Redrive rounds after the outage cleared, and the final states.
	Rounds         []*redrive.Report
	ClearedReasons []string
	Final          map[quarantine.Status]int
	// OpenBySignature counts the records still QUARANTINED at the end by
	// failure signature.
	OpenBySignature map[string]int
	// Corrected are the malformed events a pharmacist corrected, by event
	// id; Policies what the standing policy did with them.
	Corrected map[string]bool
	Policies  []redrive.PolicyOutcome
	// Approvals counts the high-risk actions operator-a asked for and
	// operator-b approved (each redrive round, each correction, the
	// policy); Approver is operator-b's ARN.
	Approvals                        int
	Approver                         string
	Sweep                            *sweeper.Report
	Lost, Unexpected, SealFailures   []string
	Duplicated, WrongState, BadStubs []string
	// Ledger is what the ledger function wrote, checked against the
	// table's stream and the table.
	Ledger *LedgerReport
	// Metrics as the emulator's CloudWatch holds them, and their units.
	Metrics     map[string]float64
	MetricUnits map[string]string
	Elapsed     time.Duration
}

// OK reports whether every invariant held, every reconciliation line
// adds up and every checked metric agrees (see Unreconciled).
func (r *Report) OK() bool {
	return len(r.Lost)+len(r.Unexpected)+len(r.SealFailures)+len(r.Duplicated)+len(r.WrongState)+len(r.BadStubs) == 0 &&
		(r.Ledger == nil || len(r.Ledger.Problems) == 0) &&
		len(r.Records) == r.DeadLettered && len(r.Unreconciled()) == 0
}

// Run plays the scenario on st, whose resources come from the template.
func Run(ctx context.Context, st *embedded.Stack, o Options) (*Report, error) {
	start := time.Now()
	if o.Timeout == 0 {
		// About 75 s for the default 3000 events on 2 busy cores, the
		// ledger included.
		o.Timeout = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// Invocations run concurrently here (one at a time in Lambda): their log
	// and metric lines share one writer.
	logw := syncio.NewWriter(o.Log)
	log := slog.New(slog.NewJSONHandler(logw, nil))
	fns, err := localrunner.NewFunctions(st, nil, log, logw)
	if err != nil {
		return nil, err
	}
	// The operators act through a local operator endpoint, where a SigV4
	// check stands in for AWS's: operator-a asks, operator-b approves.
	ops, err := startOperators(st, fns.Redrive)
	if err != nil {
		return nil, err
	}
	defer ops.close()
	seen := newIngestTap()
	dlq := &refusedDeletes{SQSAPI: st.Clients.SQS}
	poller := &localrunner.Poller{SQS: dlq, Mapping: fns.Mapping, Handler: seen.wrap(fns.Ingest.Handle), Log: log}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() { defer pollers.Done(); _ = poller.Run(pollCtx) }()
	defer func() { stopPolling(); pollers.Wait() }()
	// The ledger function, fed the table's stream as its mapping does, for
	// the whole run (it also counts the metrics counters). A batch it has
	// started is seen through when the run stops it.
	ledgerPoller := fns.LedgerPoller(st.Clients, func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return fns.Ledger.HandleStream(ctx, ev)
	})
	ledgerCtx, stopLedger := context.WithCancel(ctx)
	var ledgering sync.WaitGroup
	ledgering.Add(1)
	go func() { defer ledgering.Done(); _ = ledgerPoller.Run(ledgerCtx) }()
	defer func() { stopLedger(); ledgering.Wait() }()
	led := &LedgerReport{}
	digest := func() error {
		d, err := fns.Ledger.Digest(ctx)
		if err != nil {
			return fmt.Errorf("ledger digest: %w", err)
		}
		if d.Written {
			led.Signed++
		}
		return nil
	}

	// Phase 1: the consumer rejects malformed events, dead-letters recalled
	// lots and cannot reach one facility's system.
	gen := Generate(o.Seed, o.Events)
	rep := &Report{Sent: len(gen), Kinds: map[Kind]int{}, ByClass: map[quarantine.Class]int{}, BySignature: map[string]int{},
		Final: map[quarantine.Status]int{}, OpenBySignature: map[string]int{}}
	for _, g := range gen {
		rep.Kinds[g.Kind]++
	}
	progress := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  · "+format+"\n", a...)
		}
	}
	progress("the consumer takes %d events: it fails %d malformed and %d outage events until SQS dead-letters them, and dead-letters %d recalled lots itself …",
		len(gen), rep.Kinds[Malformed], rep.Kinds[Outage], rep.Kinds[Recalled])
	c, err := deadLetter(ctx, st, gen)
	if err != nil {
		return nil, err
	}
	// Measured at the DLQ: the scenario's expectation (c.deadLettered) is
	// the generator's, which the reconciliation compares it with.
	rep.DeadLettered = seen.count()
	rep.Consumed, rep.Recalled = int(c.consumed.Load()), int(c.recalled.Load())
	if err := verify(ctx, st, fns.IngestConfig, gen, rep); err != nil {
		return nil, err
	}
	// The digest schedule fires while the run goes on.
	if err := digest(); err != nil {
		return nil, err
	}

	// Phase 2: the outage clears; the on-call engineer marks its signature
	// (and, mistakenly, the recall's) as cleared and replays. Outage events
	// go through; recalled lots fail again until their cap parks them.
	c.outage.Store(false)
	rep.ClearedReasons = []string{"consumer|retries exhausted|v#", "allocation|lot under recall|v#"}
	for round := 0; round <= fns.RedriveCap; round++ {
		progress("the outage clears: redrive round %d of %d …", round+1, fns.RedriveCap+1)
		// Above the approval threshold: operator-a (on call) asks,
		// operator-b approves, and the plan runs once.
		rr, err := ops.run(ctx, redrive.Request{
			Source: fns.Source, ClearedReasons: rep.ClearedReasons, MaxMessages: redrive.MaxMaxMessages,
			Reason: "the facility's system is back (INC-4711)", ApprovalID: fmt.Sprintf("demo-round-%d", round+1),
		})
		if err != nil {
			return nil, fmt.Errorf("redrive round %d: %w", round+1, err)
		}
		rep.Rounds = append(rep.Rounds, rr)
		if err := c.run(ctx); err != nil {
			return nil, err
		}
		if err := waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"]); err != nil {
			return nil, err
		}
		time.Sleep(fns.Settle + 100*time.Millisecond) // let replays that stayed away settle
	}
	// Phase 2b: a pharmacist corrects the NDCs typed with a stray "NDC?"
	// prefix, and a standing policy replays corrected records.
	progress("a pharmacist corrects malformed NDCs; a standing policy replays them …")
	if err := correctAndPolicy(ctx, st, fns, ops, gen, c, rep); err != nil {
		return nil, err
	}
	settled, err := fns.Redrive.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: fns.Source, RequestedBy: "schedule:settle"})
	if err != nil {
		return nil, err
	}
	rep.Rounds = append(rep.Rounds, settled)
	stopPolling()
	pollers.Wait()
	rep.Ingest = poller.Stats()
	rep.IngestMessages, rep.IngestRedeliveries, rep.IngestDeletesRefused = seen.count(), seen.redeliveries(), int(dlq.n.Load())
	rep.ReplaysConsumed, rep.ReplaysDeadLettered = int(c.replayConsumed.Load()), int(c.replayFailed.Load())

	// Phase 3: the sweeper ages parked records into the Object Lock archive.
	progress("the sweeper archives the parked records into Object Lock; every record is verified …")
	if rep.Sweep, err = fns.Sweeper.Run(ctx); err != nil {
		return nil, err
	}
	if err := verifyFinal(ctx, st, fns, gen, c, rep); err != nil {
		return nil, err
	}
	// Phase 4: the ledger catches up with the table's stream and signs a
	// last digest; what it wrote is checked against the stream, the table
	// and a recount of the counters.
	progress("the ledger catches up with the table's stream and signs a digest; it is verified against the table …")
	stopLedger()
	ledgering.Wait()
	if _, err := ledgerPoller.Drain(ctx); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if err := digest(); err != nil {
		return nil, err
	}
	led.Batches = ledgerPoller.Stats()
	rep.Ledger = led
	if err := verifyLedger(ctx, st, fns, rep); err != nil {
		return nil, err
	}
	// Phase 5: the metrics function publishes DLQ health (from the
	// ledger's counters); read it back.
	if _, err := fns.Metrics.Run(ctx); err != nil {
		return nil, err
	}
	if rep.Metrics, rep.MetricUnits, err = readMetrics(ctx, st, fns.Source); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// ingestTap counts what ingest's handler was handed: the distinct SQS
// messages (by message id) and, apart, the deliveries SQS marks as a
// repeat (ApproximateReceiveCount above 1; on kumo it restarts at 1 when a
// message moves to the DLQ). The two are measured separately: a message
// id seen twice with a receive count of 1, or a first sight with a higher
// one, makes the report's "received = distinct + redeliveries" fail.
type ingestTap struct {
	mu     sync.Mutex
	ids    map[string]bool
	repeat int
}

func newIngestTap() *ingestTap { return &ingestTap{ids: map[string]bool{}} }

func (m *ingestTap) wrap(h localrunner.SQSHandler) localrunner.SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		m.mu.Lock()
		for _, r := range ev.Records {
			m.ids[r.MessageId] = true
			if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil && n > 1 {
				m.repeat++
			}
		}
		m.mu.Unlock()
		return h(ctx, ev)
	}
}

// count is the number of distinct messages handed so far.
func (m *ingestTap) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids)
}

// redeliveries is the number of deliveries SQS counted as a repeat.
func (m *ingestTap) redeliveries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.repeat
}

// refusedDeletes counts the entries of the poller's deletes that SQS
// refused.
type refusedDeletes struct {
	localrunner.SQSAPI
	n atomic.Int64
}

func (r *refusedDeletes) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out, err := r.SQSAPI.DeleteMessageBatch(ctx, in, opts...)
	if err == nil {
		r.n.Add(int64(len(out.Failed)))
	}
	return out, err
}
