package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

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
	Sent, Consumed, DeadLettered, Recalled int
	// Records as quarantined, before any redrive.
	Records     []*quarantine.Record
	ByClass     map[quarantine.Class]int
	BySignature map[string]int
	Ingest      localrunner.Stats
	// Redrive rounds after the outage cleared, and the final states.
	Rounds         []*redrive.Report
	ClearedReasons []string
	Final          map[quarantine.Status]int
	// Corrected are the malformed events a pharmacist corrected, by event
	// id; Policies what the standing policy did with them.
	Corrected                        map[string]bool
	Policies                         []redrive.PolicyOutcome
	Sweep                            *sweeper.Report
	Lost, Unexpected, SealFailures   []string
	Duplicated, WrongState, BadStubs []string
	// Metrics as the emulator's CloudWatch holds them.
	Metrics map[string]float64
	Elapsed time.Duration
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	return len(r.Lost)+len(r.Unexpected)+len(r.SealFailures)+len(r.Duplicated)+len(r.WrongState)+len(r.BadStubs) == 0 &&
		len(r.Records) == r.DeadLettered
}

// Run plays the scenario on st, whose resources come from the template.
func Run(ctx context.Context, st *embedded.Stack, o Options) (*Report, error) {
	start := time.Now()
	if o.Timeout == 0 {
		o.Timeout = 100 * time.Second
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
	poller := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: fns.Mapping, Handler: fns.Ingest.Handle, Log: log}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() { defer pollers.Done(); _ = poller.Run(pollCtx) }()
	defer func() { stopPolling(); pollers.Wait() }()

	// Phase 1: the consumer rejects malformed events, dead-letters recalled
	// lots and cannot reach one facility's system.
	gen := Generate(o.Seed, o.Events)
	rep := &Report{Sent: len(gen), ByClass: map[quarantine.Class]int{}, BySignature: map[string]int{}, Final: map[quarantine.Status]int{}}
	c, err := deadLetter(ctx, st, gen)
	if err != nil {
		return nil, err
	}
	rep.DeadLettered = c.deadLettered
	rep.Consumed, rep.Recalled = int(c.consumed.Load()), int(c.recalled.Load())
	if err := verify(ctx, st, fns.IngestConfig, gen, rep); err != nil {
		return nil, err
	}

	// Phase 2: the outage clears; the on-call engineer marks its signature
	// (and, mistakenly, the recall's) as cleared and replays. Outage events
	// go through; recalled lots fail again until their cap parks them.
	c.outage.Store(false)
	rep.ClearedReasons = []string{"consumer|retries exhausted|v#", "allocation|lot under recall|v#"}
	for round := 0; round <= fns.RedriveCap; round++ {
		rr, err := fns.Redrive.Run(ctx, redrive.Request{
			Source: fns.Source, RequestedBy: "oncall@demo", ClearedReasons: rep.ClearedReasons,
			MaxMessages: redrive.MaxMaxMessages, Approve: true,
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
	if err := correctAndPolicy(ctx, st, fns, gen, c, rep); err != nil {
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

	// Phase 3: the sweeper ages parked records into the Object Lock archive.
	if rep.Sweep, err = fns.Sweeper.Run(ctx); err != nil {
		return nil, err
	}
	if err := verifyFinal(ctx, st, fns, gen, c, rep); err != nil {
		return nil, err
	}
	// Phase 4: the metrics function publishes DLQ health; read it back.
	if _, err := fns.Metrics.Run(ctx); err != nil {
		return nil, err
	}
	if rep.Metrics, err = readMetrics(ctx, st, fns.Source); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}
