package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
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
	// Sources is the triage per source: the example source's (the
	// scenario above) first, then each other source's (sources.go).
	Sources []*SourceReport
}

// OK reports whether every invariant held, every reconciliation line
// adds up and every checked metric agrees (see Unreconciled).
func (r *Report) OK() bool {
	for _, s := range r.Sources {
		if !s.OK() {
			return false
		}
	}
	return len(r.Lost)+len(r.Unexpected)+len(r.SealFailures)+len(r.Duplicated)+len(r.WrongState)+len(r.BadStubs) == 0 &&
		(r.Ledger == nil || len(r.Ledger.Problems) == 0) &&
		len(r.Records) == r.DeadLettered && len(r.Unreconciled()) == 0
}

// Run plays the scenario on st, whose resources come from the template.
func Run(ctx context.Context, st *embedded.Stack, o Options) (*Report, error) {
	start := time.Now()
	if o.Timeout == 0 {
		// About 75 s for the default 3000 events on 2 busy cores, the
		// ledger and the other sources included; several times that
		// under -race on a loaded machine.
		o.Timeout = 5 * time.Minute
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
	seen := newIngestTap(ownSources(st, fns))
	dlq := &refusedDeletes{SQSAPI: st.Clients.SQS}
	// The stack's DLQ's mapping, and the attached DLQ's (a FIFO source's)
	// when the stack has one: one poller each, as Lambda runs each mapping.
	poller := &localrunner.Poller{SQS: dlq, Mapping: fns.Mapping, Handler: seen.wrap(fns.Ingest.Handle), Log: log}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	for _, p := range append([]*localrunner.Poller{poller}, extraPollers(st, fns, seen, log)...) {
		pollers.Add(1)
		go func() { defer pollers.Done(); _ = p.Run(pollCtx) }()
	}
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
	rep.DeadLettered = seen.count(fns.Source)
	rep.Consumed, rep.Recalled = int(c.consumed.Load()), int(c.recalled.Load())
	if err := verify(ctx, st, fns.IngestConfig, fns.Source, gen, rep); err != nil {
		return nil, err
	}
	// The digest schedule fires while the run goes on.
	if err := digest(); err != nil {
		return nil, err
	}

	// The other sources whose DLQ is their own fail meanwhile (sources.go).
	others := startOthers(ctx, st, fns, o.Seed)
	if others != nil {
		progress("%d other sources get events of their own: %s; those with a DLQ of their own fail now …", len(others.srcs), sourceNames(others.srcs))
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
	// The example source's part is done: what ingest did for it, before
	// the other sources share its DLQ's poller.
	rep.Ingest = poller.Stats()
	rep.IngestMessages, rep.IngestRedeliveries, rep.IngestDeletesRefused = seen.count(fns.Source), seen.redeliveries(fns.Source), int(dlq.n.Load())
	rep.ReplaysConsumed, rep.ReplaysDeadLettered = int(c.replayConsumed.Load()), int(c.replayFailed.Load())
	// Phase 2c: the other sources, standard and FIFO, one of them sharing
	// the stack's DLQ (embedded.WithLocalSources), each triaged apart.
	if others != nil {
		began := time.Now()
		progress("the sources that share the DLQ fail; every other source is replayed, settled and checked …")
		if err := others.finish(ctx, fns, ops, seen, rep); err != nil {
			return nil, err
		}
		progress("the other sources took %s more", time.Since(began).Round(100*time.Millisecond))
		if n := seen.count(fns.Source); n != rep.IngestMessages {
			rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%d DLQ messages of %s arrived while the other sources ran", n-rep.IngestMessages, fns.Source))
		}
	}
	stopPolling()
	pollers.Wait()

	// Phase 3: the sweeper ages parked records into the Object Lock archive.
	progress("the sweeper archives the parked records into Object Lock; every record is verified …")
	if rep.Sweep, err = fns.Sweeper.Run(ctx); err != nil {
		return nil, err
	}
	if err := verifyFinal(ctx, st, fns, gen, c, rep); err != nil {
		return nil, err
	}
	rep.Sources = append([]*SourceReport{rep.exampleSource(st, fns)}, rep.Sources...)
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

// ingestTap counts what ingest's handler was handed, by source: the
// distinct SQS messages (by message id) and, apart, the deliveries SQS
// marks as a repeat (ApproximateReceiveCount above 1; on kumo it restarts
// at 1 when a message moves to the DLQ). The two are measured separately:
// a message id seen twice with a receive count of 1, or a first sight with
// a higher one, makes the report's "received = distinct + redeliveries"
// fail. A message's source is the queue its DeadLetterQueueSourceArn
// names, else its DLQ's own source (own: by DLQ ARN), as ingest resolves
// it.
type ingestTap struct {
	own    map[string]string
	mu     sync.Mutex
	ids    map[string]map[string]bool
	repeat map[string]int
}

func newIngestTap(own map[string]string) *ingestTap {
	return &ingestTap{own: own, ids: map[string]map[string]bool{}, repeat: map[string]int{}}
}

func (m *ingestTap) wrap(h localrunner.SQSHandler) localrunner.SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		m.mu.Lock()
		for _, r := range ev.Records {
			src := m.own[r.EventSourceARN]
			if arn := r.Attributes["DeadLetterQueueSourceArn"]; arn != "" {
				src = ingest.ARNResource(arn)
			}
			if m.ids[src] == nil {
				m.ids[src] = map[string]bool{}
			}
			m.ids[src][r.MessageId] = true
			if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil && n > 1 {
				m.repeat[src]++
			}
		}
		m.mu.Unlock()
		return h(ctx, ev)
	}
}

// count is the number of distinct messages of source handed so far.
func (m *ingestTap) count(source string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids[source])
}

// redeliveries is the number of deliveries of source SQS counted as a repeat.
func (m *ingestTap) redeliveries(source string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.repeat[source]
}

// ownSources maps each DLQ of the stack to the source a message without
// a DeadLetterQueueSourceArn belongs to: the stack's DLQ to the example
// source (its consumer dead-letters recalled lots itself), any other to
// the source configured with it.
func ownSources(st *embedded.Stack, fns *localrunner.Functions) map[string]string {
	own := map[string]string{st.QueueARNs["DeadLetterQueue"]: fns.Source}
	for _, name := range slices.Sorted(maps.Keys(fns.IngestConfig.Sources)) {
		for _, m := range fns.Mappings {
			if _, taken := own[m.QueueARN]; !taken && ingest.ARNResource(m.QueueARN) == fns.IngestConfig.Sources[name].DLQ {
				own[m.QueueARN] = name
			}
		}
	}
	return own
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

// extraPollers are the pollers of the template's other SQS mappings (the
// attached DLQ's), feeding ingest through the same tap.
func extraPollers(st *embedded.Stack, fns *localrunner.Functions, seen *ingestTap, log *slog.Logger) []*localrunner.Poller {
	var out []*localrunner.Poller
	for _, m := range fns.Mappings[1:] {
		out = append(out, &localrunner.Poller{SQS: st.Clients.SQS, Mapping: m, Handler: seen.wrap(fns.Ingest.Handle), Log: log})
	}
	return out
}

func sourceNames(srcs []*otherSource) string {
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.rep.Name
	}
	return strings.Join(names, ", ")
}

// exampleSource is the example source's row of the triage per source,
// from the scenario's counts.
func (r *Report) exampleSource(st *embedded.Stack, fns *localrunner.Functions) *SourceReport {
	s := &SourceReport{Name: fns.Source, Setup: "the template's example queue (standard)", DLQ: st.Names["DeadLetterQueue"],
		Sent: r.Sent, Failing: r.DeadLettered, DLQMessages: r.IngestMessages, Records: len(r.Records),
		ByClass: r.ByClass, BySignature: r.BySignature, Replayed: r.Replays, Consumed: r.ReplaysConsumed, Final: r.Final}
	s.ClassSignatures = map[quarantine.Class]map[string]int{}
	for c := range r.ByClass {
		s.ClassSignatures[c] = r.classSignatures(c)
	}
	for _, l := range [][]string{r.Lost, r.Unexpected, r.SealFailures, r.WrongState} {
		s.Problems = append(s.Problems, l...)
	}
	return s
}
