package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// The demo's other sources (embedded.WithLocalSources): an existing
// standard queue that shares the stack's DLQ with the example source, and
// an existing FIFO pair attached as the template's extra DLQ. Once the
// example source's scenario is done, each gets its own events (ids of its
// own), a consumer that rejects malformed ones and cannot reach one
// facility, a replay of what the outage dead-lettered, and a settle. Each
// record must be under its own source: a message of the shared DLQ routed
// by its DeadLetterQueueSourceArn to the wrong source is a misrouted
// record, and fails the run.

// SourceEvents is how many events the demo sends to each other source.
const SourceEvents = 120

// SourceReport is one source's triage: what it was sent and what its
// consumer did, what ingest took off the DLQ for it, its records by class
// and signature, what was replayed and where each record ended.
type SourceReport struct {
	Name string
	// Setup says what the source is: the template's example queue, an
	// existing queue sharing the stack's DLQ, an attached FIFO pair.
	Setup string
	// DLQ is the name of the DLQ its messages reach.
	DLQ string
	// Sent counts the events sent, Failing those the consumer rejects
	// until SQS dead-letters them (malformed, facility down).
	Sent, Failing int
	// DLQMessages are the distinct DLQ messages ingest was handed whose
	// source this is (by DeadLetterQueueSourceArn, else the DLQ's own
	// source), replays that failed again included.
	DLQMessages int
	// Records as quarantined, by class and by signature, and by
	// signature within each class.
	Records         int
	ByClass         map[quarantine.Class]int
	BySignature     map[string]int
	ClassSignatures map[quarantine.Class]map[string]int
	// Replayed is what redrive sent to the source (its rounds), Consumed
	// the replays its consumer took, Deferred what a FIFO source's replay
	// held back behind an earlier record of its group that stays.
	Replayed, Consumed, Deferred int
	// Final counts the records by their state at the end.
	Final map[quarantine.Status]int
	// Problems: an event without its record (lost, or misrouted under
	// another source: named so), a record no event of the source explains,
	// a seal that fails, a state the scenario did not lead to.
	Problems []string
}

// OK says the source's triage holds: every failing event has one record,
// under this source, in the state expected.
func (s *SourceReport) OK() bool {
	return len(s.Problems) == 0 && s.Records == s.Failing
}

// otherSource is one of the demo's other sources as it runs.
type otherSource struct {
	rep      *SourceReport
	prefix   string // its event ids' prefix, its name's end ("returns", "ledger")
	url      string
	fifo     bool
	gen      []Generated
	mu       sync.Mutex
	outage   bool
	consumed map[string]int // event id → deliveries consumed
	replays  int
	round    *redrive.Report // the replay of the outage's records
}

// otherSources are the configured sources besides the example one, with
// the queue each reads, sorted by name; a source whose queue is not one
// of the stack's is left out (the stack did not start it).
func otherSources(st *embedded.Stack, fns *localrunner.Functions) []*otherSource {
	var out []*otherSource
	for _, name := range slices.Sorted(maps.Keys(fns.IngestConfig.Sources)) {
		cfg := fns.IngestConfig.Sources[name]
		url, ok := st.QueueURLByARN(cfg.ARN)
		if name == fns.Source || !ok {
			continue
		}
		setup := "existing standard queue, its own DLQ"
		fifo := strings.HasSuffix(name, ".fifo")
		switch {
		case fifo:
			setup = "existing FIFO queue with its own FIFO DLQ (the attached DLQ)"
		case cfg.DLQ == st.Names["DeadLetterQueue"]:
			setup = "existing standard queue sharing the stack's DLQ"
		}
		out = append(out, &otherSource{url: url, fifo: fifo, consumed: map[string]int{},
			rep: &SourceReport{Name: name, Setup: setup, DLQ: cfg.DLQ, ByClass: map[quarantine.Class]int{}, BySignature: map[string]int{},
				ClassSignatures: map[quarantine.Class]map[string]int{}, Final: map[quarantine.Status]int{}}})
	}
	return out
}

// others are the demo's other sources as they run: those whose DLQ is
// not the stack's fail early (start), while the example source's redrive
// rounds run (their DLQ and poller are their own, so the example's counts
// stay its own); the ones that share the stack's DLQ fail once the
// example source is done (finish), then every one is replayed, settled
// and checked.
type others struct {
	st    *embedded.Stack
	srcs  []*otherSource
	early chan error
	// failedAt is when the early sources' DLQ was drained.
	failedAt time.Time
}

// startOthers generates each other source's events and starts the early
// ones failing; nil when the stack has no other source.
func startOthers(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, seed uint64) *others {
	srcs := otherSources(st, fns)
	if len(srcs) == 0 {
		return nil
	}
	for i, s := range srcs {
		// Ids of its own (and a different seed): the same event id under
		// two sources would hide a record filed under the wrong one.
		s.prefix = strings.TrimSuffix(strings.TrimPrefix(s.rep.Name, st.Env.StackName+"-"), ".fifo")
		s.gen = generateAs(s.prefix, seed+uint64(i)+1, SourceEvents, 1)
		for _, g := range s.gen {
			s.rep.Sent++
			if g.Kind == Malformed || g.Kind == Outage {
				s.rep.Failing++
			}
		}
		s.outage = true
	}
	o := &others{st: st, srcs: srcs, early: make(chan error, 1)}
	go func() {
		err := o.fail(ctx, o.shares(false))
		o.failedAt = time.Now()
		o.early <- err
	}()
	return o
}

// shares are the sources that share the stack's DLQ (or, false, the others).
func (o *others) shares(stackDLQ bool) []*otherSource {
	var out []*otherSource
	for _, s := range o.srcs {
		if (s.rep.DLQ == o.st.Names["DeadLetterQueue"]) == stackDLQ {
			out = append(out, s)
		}
	}
	return out
}

// fail sends srcs their events and runs their consumers through the
// outage until SQS has dead-lettered what they reject and ingest has
// drained their DLQs.
func (o *others) fail(ctx context.Context, srcs []*otherSource) error {
	for _, s := range srcs {
		if err := s.produce(ctx, o.st); err != nil {
			return err
		}
	}
	if err := forEach(srcs, func(s *otherSource) error { return s.consume(ctx, o.st) }); err != nil {
		return err
	}
	return drained(ctx, o.st, srcs)
}

// finish plays the rest (see others) with the pollers running, and adds
// a SourceReport for each source to rep.
func (o *others) finish(ctx context.Context, fns *localrunner.Functions, ops *operators, seen *ingestTap, rep *Report) error {
	if err := o.fail(ctx, o.shares(true)); err != nil {
		return err
	}
	if err := <-o.early; err != nil {
		return err
	}
	// A FIFO source's replay leaves a group whose records are younger
	// than the status index's settle guard for a later run: the early
	// sources have had the example's rounds to age; wait out the rest.
	if slices.ContainsFunc(o.srcs, func(s *otherSource) bool { return s.fifo }) {
		time.Sleep(time.Until(o.failedAt.Add(redrive.IndexSettleGuard)))
	}
	// The outage clears: each source's on-call replays its exhausted
	// records (four eyes where the source asks for them).
	for _, s := range o.srcs {
		s.mu.Lock()
		s.outage = false
		s.mu.Unlock()
		rr, err := ops.run(ctx, redrive.Request{Source: s.rep.Name, Classes: []quarantine.Class{quarantine.ClassExhausted}, MaxMessages: redrive.MaxMaxMessages,
			Reason: "the facility's system is back (INC-4711)", ApprovalID: "demo-" + s.prefix})
		if err != nil {
			return fmt.Errorf("redrive %s: %w", s.rep.Name, err)
		}
		s.rep.Replayed, s.rep.Deferred, s.round = rr.Redriven.Count, rr.Deferred.Count, rr
	}
	srcs := o.srcs
	if err := forEach(srcs, func(s *otherSource) error { return s.consume(ctx, o.st) }); err != nil {
		return err
	}
	if err := drained(ctx, o.st, srcs); err != nil {
		return err
	}
	time.Sleep(fns.Settle + 100*time.Millisecond)
	for _, s := range srcs {
		if _, err := fns.Redrive.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: s.rep.Name, RequestedBy: "schedule:settle"}); err != nil {
			return fmt.Errorf("settle %s: %w", s.rep.Name, err)
		}
	}
	for _, s := range srcs {
		s.rep.DLQMessages = seen.count(s.rep.Name)
		s.rep.Consumed = s.replays
		if err := s.check(ctx, o.st, fns.IngestConfig); err != nil {
			return err
		}
		rep.Sources = append(rep.Sources, s.rep)
	}
	return nil
}

func forEach(srcs []*otherSource, f func(*otherSource) error) error {
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(s) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// drained waits until ingest has taken everything off the sources' DLQs.
func drained(ctx context.Context, st *embedded.Stack, srcs []*otherSource) error {
	for _, s := range srcs {
		url, ok := st.QueueURLs[s.rep.DLQ]
		if !ok {
			url = st.QueueURLs["DeadLetterQueue"]
		}
		if err := waitEmpty(ctx, st.Clients.SQS, url); err != nil {
			return err
		}
	}
	return nil
}

// produce sends the source's events; to a FIFO queue, grouped by facility.
func (s *otherSource) produce(ctx context.Context, st *embedded.Stack) error {
	for i := 0; i < len(s.gen); i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, g := range s.gen[i:min(i+10, len(s.gen))] {
			e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(g.Body)}
			if s.fifo {
				e.MessageGroupId, e.MessageDeduplicationId = aws.String(fifoGroup(g)), aws.String(g.ID)
			}
			entries = append(entries, e)
		}
		out, err := st.Clients.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.url), Entries: entries})
		if err != nil {
			return fmt.Errorf("produce to %s: %w", s.rep.Name, err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("produce to %s: %d entries failed", s.rep.Name, len(out.Failed))
		}
	}
	return nil
}

// fifoGroup is the message group the demo's producer sends an event in to
// a FIFO source: its lot's movements keep their order (a body without a
// lot, or not JSON, goes to group "unparsed").
func fifoGroup(g Generated) string {
	var ev Event
	_ = json.Unmarshal([]byte(g.Body), &ev)
	return "lot-" + cmp.Or(ev.Lot, "unparsed")
}

// deferred are the failing events of a FIFO source that its replay holds
// back: each behind an earlier failing event of its group that stays
// quarantined (a malformed one), since nothing of the group may go before
// it (invariant 13). The replay reports each as deferred; an outage event
// among them is not replayed.
func (s *otherSource) deferred() map[string]bool {
	out := map[string]bool{}
	if !s.fifo {
		return out
	}
	blocked := map[string]bool{}
	for _, g := range s.gen {
		if g.Kind != Malformed && g.Kind != Outage {
			continue
		}
		if blocked[fifoGroup(g)] {
			out[g.ID] = true
		}
		if g.Kind == Malformed {
			blocked[fifoGroup(g)] = true
		}
	}
	return out
}

// consume runs the source's consumer until its queue is empty: it
// rejects malformed events and, while the outage lasts, the facility's
// (visibility 0: SQS counts the receive and dead-letters them after
// MaxReceiveCount), and consumes the rest.
func (s *otherSource) consume(ctx context.Context, st *embedded.Stack) error {
	kind := map[string]Kind{}
	for _, g := range s.gen {
		kind[g.Body] = g.Kind
	}
	api := st.Clients.SQS
	for ctx.Err() == nil {
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.url), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			return fmt.Errorf("consume %s: %w", s.rep.Name, err)
		}
		if len(out.Messages) == 0 {
			empty, err := isEmpty(ctx, api, s.url)
			if err != nil || empty {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for _, m := range out.Messages {
			s.mu.Lock()
			k := kind[aws.ToString(m.Body)]
			fail := k == Malformed || (k == Outage && s.outage)
			if !fail {
				s.consumed[aws.ToString(m.MessageId)]++
				if _, replay := m.MessageAttributes[quarantine.AttrRecordID]; replay && s.consumed[aws.ToString(m.MessageId)] == 1 {
					s.replays++
				}
			}
			s.mu.Unlock()
			if fail {
				_, err = api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(s.url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				_, err = api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.url), ReceiptHandle: m.ReceiptHandle})
			}
			if err := redelivered(err); err != nil {
				return fmt.Errorf("consume %s: %w", s.rep.Name, err)
			}
		}
	}
	return ctx.Err()
}

// check reads back the source's records: each failing event has its
// record under this source (one under another source is named
// misrouted), no other record is there, every seal verifies, outage
// events are RESOLVED after one replay and malformed ones were never
// replayed.
func (s *otherSource) check(ctx context.Context, st *embedded.Stack, cfg ingest.Config) error {
	byID, err := scanRecords(ctx, st, cfg.TableName, s.rep.Name)
	if err != nil {
		return err
	}
	// Where each of this source's events would be filed under every
	// configured source: found under another one is misrouted.
	others := map[string]map[string]*quarantine.Record{}
	for name := range cfg.Sources {
		if name == s.rep.Name {
			continue
		}
		if others[name], err = scanRecords(ctx, st, cfg.TableName, name); err != nil {
			return err
		}
	}
	idOf := recordIDs(cfg, s.rep.Name)
	deferred := s.deferred()
	held := 0 // outage events deferred
	for _, g := range s.gen {
		if g.Kind == Outage && deferred[g.ID] {
			held++
		}
	}
	expected := map[string]bool{}
	exhausted := 0
	for _, r := range byID {
		if r.FailureClass == quarantine.ClassExhausted {
			exhausted++
		}
	}
	if rr := s.round; rr != nil && (rr.Redriven.Count != exhausted-held || rr.Deferred.Count != len(deferred)) {
		s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("the replay of its %d exhausted records (%d of them, and %d records in all, behind an earlier failure of their FIFO group) sent %d (skipped %d, held %d, deferred %d, failed %d, unknown %d, integrity %d; stopped %q, dry run %v %s)",
			exhausted, held, len(deferred), rr.Redriven.Count, rr.Skipped.Count, rr.Held.Count, rr.Deferred.Count, rr.Failed.Count, rr.Unknown.Count, rr.Integrity.Count, rr.Stopped, rr.DryRun, rr.DryRunReason))
	}

	for _, g := range s.gen {
		if g.Kind != Malformed && g.Kind != Outage {
			continue
		}
		id := idOf(g.Body)
		expected[id] = true
		r, ok := byID[id]
		if !ok {
			where := "lost"
			for name, recs := range others {
				if _, found := recs[recordIDs(cfg, name)(g.Body)]; found {
					where = "misrouted under " + name
				}
			}
			s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%s: no record (%s)", g.ID, where))
			continue
		}
		switch {
		case g.Kind == Outage && deferred[g.ID] && (r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0):
			s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%s: %s after %d replays, want QUARANTINED: an earlier message of its FIFO group was not replayed", r.DLQID, r.Status, r.RedriveCount))
		case g.Kind == Outage && !deferred[g.ID] && (r.Status != quarantine.StatusResolved || r.RedriveCount != 1):
			s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%s: %s after %d replays, want RESOLVED after 1", r.DLQID, r.Status, r.RedriveCount))
		case g.Kind == Malformed && (r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0):
			s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%s: %s after %d replays, want QUARANTINED, never replayed", r.DLQID, r.Status, r.RedriveCount))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		r := byID[id]
		if !expected[id] {
			s.rep.Problems = append(s.rep.Problems, id+": a record no failing event of "+s.rep.Name+" explains")
		}
		if err := quarantine.Verify(r); err != nil {
			s.rep.Problems = append(s.rep.Problems, id+": seal does not verify")
		}
		if r.SourceARN != cfg.Sources[s.rep.Name].ARN {
			s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%s: source ARN %s, want %s", id, r.SourceARN, cfg.Sources[s.rep.Name].ARN))
		}
		s.rep.Records++
		s.rep.ByClass[r.FailureClass]++
		s.rep.BySignature[r.FailureSignature]++
		if s.rep.ClassSignatures[r.FailureClass] == nil {
			s.rep.ClassSignatures[r.FailureClass] = map[string]int{}
		}
		s.rep.ClassSignatures[r.FailureClass][r.FailureSignature]++
		s.rep.Final[r.Status]++
	}
	if s.rep.DLQMessages != s.rep.Failing {
		s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("ingest took %d of its messages off the DLQ, %d events failed", s.rep.DLQMessages, s.rep.Failing))
	}
	if s.rep.Consumed != s.rep.Replayed {
		s.rep.Problems = append(s.rep.Problems, fmt.Sprintf("%d replays sent, %d consumed", s.rep.Replayed, s.rep.Consumed))
	}
	return nil
}
