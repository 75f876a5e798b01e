package redrive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/time/rate"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/bytegate"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
)

// MaxRemainingCount bounds how far a run counts the records it did not
// reach; a report with this many remaining means "at least".
const MaxRemainingCount = 10000

// DefaultApprovalTTL and MaxApprovalTTL bound how long a pending approval
// waits for its second person.
const (
	DefaultApprovalTTL = 24 * time.Hour
	MaxApprovalTTL     = 7 * 24 * time.Hour
)

// Config tunes the service. Zero values take the defaults.
type Config struct {
	// TaggedSources are the sources whose queue the role may send to only
	// while it carries the tag sources.SourceTagKey with the value
	// SourceTagValue (TaggedSourceAccess; sources.Grants): a run reads
	// the tag of such a queue (ListQueueTags) before it claims anything
	// for it, and refuses the run when the tag is not there.
	TaggedSources  map[string]bool
	SourceTagValue string
	// Region, when set (AWS_REGION, which Lambda sets), is the function's
	// Region: a run replays only into queues of it. The SQS client looks
	// a queue up by name in its own Region, so a source (or target) whose
	// ARN names another Region would reach a same-named queue here; SQS
	// moves dead letters within a Region, so none of its records can come
	// from there either.
	Region string
	// Lease is how long a claim holds a record (default 15 minutes, longer
	// than the function's timeout, so a live run never loses its claim).
	Lease time.Duration
	// SettleWindow is how long a replay must stay away from the DLQ before
	// its record is RESOLVED (default 15 minutes). A run settles with the
	// longer of it and MinSettleWindow of the source queue, read at run time.
	SettleWindow time.Duration
	// SettleMargin is the ingest lag MinSettleWindow allows (default
	// DefaultSettleMargin).
	SettleMargin time.Duration
	// ApprovalThreshold is the most messages a run may replay without
	// approve (default 100).
	ApprovalThreshold int
	// ApprovalTTL is how long a pending approval waits for its second
	// person (default 24 hours, at most MaxApprovalTTL).
	ApprovalTTL time.Duration
	// TrustedSessionRoles are IAM role names whose role session names a
	// trusted broker sets (IAM Identity Center's permission-set roles, an
	// IdP's SAML role): two sessions of such a role with different
	// session names are different principals. Any other role is one
	// principal however many sessions assume it (identity.Same).
	TrustedSessionRoles []string
	// DeadlineMargin is the time left at which a run stops claiming
	// (default 20 seconds).
	DeadlineMargin time.Duration
	// SendAttempts bounds tries per entry of a batch call (default 4).
	SendAttempts int
	// SendTimeout bounds one SendMessageBatch call (default 10 s): a call
	// that takes longer ends, and its entries count as possibly sent.
	SendTimeout time.Duration
	// MaxBackoff caps the jittered backoff between tries (default 2 s).
	MaxBackoff time.Duration
	// KeyAttribute is the attribute ingest reads producer idempotency keys
	// from (default "idempotency-key"); corrections of records keyed by
	// body hash carry the key in it.
	KeyAttribute string
	// CountersOff says nothing keeps the breakers' counters (the ledger,
	// which counts from the table's stream, reads nothing: its mapping is
	// off during an upgrade). A policies run then sends nothing and says
	// why (Report.PoliciesSkipped): no breaker could see its replays come
	// back. Manual runs are not affected.
	CountersOff bool
}

func (c Config) withDefaults() Config {
	if c.Lease <= 0 {
		c.Lease = 15 * time.Minute
	}
	if c.SettleWindow <= 0 {
		c.SettleWindow = 15 * time.Minute
	}
	if c.SettleMargin <= 0 {
		c.SettleMargin = DefaultSettleMargin
	}
	if c.ApprovalThreshold <= 0 {
		c.ApprovalThreshold = 100
	}
	if c.ApprovalTTL <= 0 {
		c.ApprovalTTL = DefaultApprovalTTL
	}
	if c.DeadlineMargin <= 0 {
		c.DeadlineMargin = 20 * time.Second
	}
	if c.SendAttempts <= 0 {
		c.SendAttempts = 4
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 10 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 2 * time.Second
	}
	return c
}

// Sender is the part of the SQS client redrive uses.
type Sender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	// GetQueueAttributes reads the source queue's redrive policy and
	// visibility timeout, which bound the settle window.
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	// ListQueueTags reads the tag that grants a tagged source's queue
	// (Config.TaggedSources).
	ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, opts ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error)
}

// Service runs redrive requests.
type Service struct {
	store    quarantine.Store
	lister   quarantine.Lister
	payloads quarantine.PayloadStore
	sqs      Sender
	sources  map[string]*quarantine.Source
	now      func() time.Time
	log      *slog.Logger
	cfg      Config
	policies *Policies
	// approvals keeps four-eyes approvals (WithApprovals); nil: a
	// high-risk request through the operator endpoint is refused.
	approvals ApprovalStore
	// timeLeft, when set, says how long until a deadline (tests: a
	// virtual clock); nil: time.Until.
	timeLeft func(deadline time.Time) time.Duration
	// decoding bounds the bodies checked against their schemas at once
	// (bytegate.DecodeBudget).
	decoding *bytegate.Gate
	// sending bounds the payload of the SendMessageBatch calls in flight
	// (MaxSendBytes).
	sending *bytegate.Gate
}

// New returns a Service. payloads may be nil when no record uses the claim
// check; now may be nil for time.Now.
func New(store quarantine.Store, lister quarantine.Lister, payloads quarantine.PayloadStore, sender Sender,
	sources map[string]*quarantine.Source, now func() time.Time, log *slog.Logger, cfg Config) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, lister: lister, payloads: payloads, sqs: sender, sources: sources, now: now, log: log, cfg: cfg.withDefaults(),
		decoding: bytegate.New(bytegate.DecodeBudget), sending: bytegate.New(MaxSendBytes)}
}

// Run executes a normalized request.
func (s *Service) Run(ctx context.Context, req Request) (*Report, error) {
	ctx = s.withBudget(ctx)
	if err := req.normalize(); err != nil {
		return nil, err
	}
	src := s.source(req.Source)
	if src == nil {
		return nil, &RequestError{Problems: []string{fmt.Sprintf("source %q: %v", req.Source, ErrUnknownSource)}}
	}
	for i, id := range req.IDs {
		if !strings.HasPrefix(id, src.Name+"#") {
			return nil, &RequestError{Problems: []string{fmt.Sprintf("ids[%d] does not belong to source %q", i, src.Name)}}
		}
	}
	target, err := s.target(req, src)
	if err != nil {
		return nil, err
	}
	rep := &Report{RunID: runID(), Action: req.Action, Source: src.Name, Target: req.Target, RequestedBy: req.RequestedBy, DryRun: req.DryRun, StartedAt: s.now().UTC(), Stopped: StoppedDone}
	if req.Action == ActionApprove || req.Action == ActionReject {
		return s.decide(ctx, req, src, rep)
	}
	if done, err := s.gate(ctx, &req, src, rep); done != nil || err != nil {
		return done, err
	}
	if req.approved != nil {
		req.RequestedBy = quarantine.WithApproval(req.RequestedBy, req.approved.ID)
	}
	switch req.Action {
	case ActionCorrect:
		return s.correct(ctx, req, src, rep)
	case ActionPolicies:
		return s.applyPolicies(ctx, src, rep)
	case ActionPark, ActionUnpark, ActionRead:
		return s.operate(ctx, req, rep)
	case ActionPolicyAdd, ActionPolicyRevoke, ActionPolicyResume:
		return s.changePolicy(ctx, req, src, rep)
	}
	r := &run{s: s, req: req, src: src, target: target, rep: rep, budget: s.budgetOf(ctx)}
	if left, ok := s.left(ctx); ok {
		r.settleUntilLeft = left - left/3
	}
	if target != nil {
		// Every claim, send and release of the run names the target in
		// the record's sealed history.
		r.req.RequestedBy = quarantine.WithTarget(r.req.RequestedBy, target.Name)
	}
	err = r.execute(ctx)
	if req.Action == ActionRedrive && !rep.DryRun {
		// Given back or held back, they are the request's still: the
		// next invocation takes them up (dlqctl keeps going while any
		// remain). Not the possibly sent (Unknown): SQS may have
		// enqueued them, so the request counts them as done; a later
		// run may replay them, never the same request at once.
		rep.Remaining += rep.Deferred.Count + rep.Failed.Count
	}
	err = errors.Join(append([]error{err}, r.errs...)...)
	rep.FinishedAt = s.now().UTC()
	rep.logFinished(ctx, s.log, err)
	return rep, err
}

// target is the registered source req replays into instead of src (nil:
// src itself). Only a source SOURCES names, by its name, of src's kind.
func (s *Service) target(req Request, src *quarantine.Source) (*quarantine.Source, error) {
	if req.Target == "" {
		return nil, nil
	}
	t, ok := s.sources[req.Target]
	kind := func(name string) string {
		if strings.HasSuffix(name, ".fifo") {
			return "a FIFO queue"
		}
		return "a standard queue"
	}
	switch {
	case !ok:
		return nil, &RequestError{Problems: []string{fmt.Sprintf("target %q is not a registered source: a run replays only into a source SOURCES names (by its name)", req.Target)}}
	case t == src:
		return nil, &RequestError{Problems: []string{fmt.Sprintf("target %q is the source itself: leave target out", req.Target)}}
	case kind(t.Name) != kind(src.Name):
		return nil, &RequestError{Problems: []string{fmt.Sprintf("target %q is %s and source %q %s: a replay goes to a queue of its own kind", t.Name, kind(t.Name), src.Name, kind(src.Name))}}
	}
	return t, nil
}

func (s *Service) source(nameOrARN string) *quarantine.Source {
	if src, ok := s.sources[nameOrARN]; ok {
		return src
	}
	for _, src := range s.sources {
		if src.ARN == nameOrARN {
			return src
		}
	}
	return nil
}

func runID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run is the state of one invocation.
type run struct {
	mu  sync.Mutex // guards rep while a batch works concurrently
	s   *Service
	req Request
	src *quarantine.Source
	// target is the registered source the run replays into instead of
	// src (request field target); nil: src.
	target   *quarantine.Source
	rep      *Report
	queueURL map[string]string // by queue name
	windows  map[string]time.Duration
	limiter  *rate.Limiter
	// blocked are the FIFO message groups that send nothing more this run.
	blocked map[string]bool
	// errs are the per-record errors, returned when the run ends.
	errs []error
	// budget is the invocation's time plan; longestBatch the longest a
	// batch took so far (claims to outcomes); settleUntilLeft the time
	// left at which a run that also replays stops settling.
	budget          budget
	longestBatch    time.Duration
	settleUntilLeft time.Duration
	// settleCut: the settle step stopped at its share of the time.
	settleCut bool
	// slowed: a write was throttled (or failed with a 5xx) past the
	// SDK's retries: the run stops overlapping its batches.
	slowed atomic.Bool
}

// slowDown makes the run claim its next batches only once the batch
// before is done: a throttled table gets half the requests in flight.
func (r *run) slowDown() { r.slowed.Store(true) }

func (r *run) execute(ctx context.Context) error {
	if !r.req.noSettle {
		if err := r.settle(ctx); err != nil {
			return err
		}
		// Settled for the tick only when the step went through: a skipped
		// or cut-short settle is tried again by the tick's next policy.
		r.rep.settleRan = r.rep.SettleSkipped == "" && r.rep.Stopped != StoppedDeadline && !r.settleCut
	}
	if r.req.Action == ActionSettle {
		return nil
	}
	if r.req.RatePerSecond > 0 {
		r.limiter = rate.NewLimiter(rate.Limit(r.req.RatePerSecond), MaxEntriesPerCall)
	}
	// Before any claim: a queue of another Region is refused; a source
	// granted by its queue's tag alone has its queue and its tag read,
	// and a queue that lost its tag refuses the run here, nothing
	// claimed. (A dry run claims and sends nothing; the other sources'
	// queues are looked up when sent to.)
	if err := r.s.inRegion(r.dest()); err != nil {
		return err
	}
	if r.s.cfg.TaggedSources[r.dest().Name] && !r.rep.DryRun {
		if _, err := r.queue(ctx); err != nil {
			return err
		}
	}
	// Select first, then change: the index is not paged while records
	// leave it.
	ids, err := r.collect(ctx, r.candidates, r.req.MaxMessages)
	if err != nil {
		return err
	}
	if r.rep.Remaining > 0 && r.rep.Stopped == StoppedDone && len(ids) >= r.req.MaxMessages {
		r.rep.Stopped = StoppedMaxMessages
	}
	if !r.fifo() && !r.rep.DryRun {
		return r.pipeline(ctx, ids)
	}
	for i := 0; i < len(ids); {
		// A batch is claimed only while its sends still fit (a dry run
		// claims nothing: it stops at the margin).
		if r.outOfTime(ctx, i, len(ids)) {
			return nil
		}
		before, _ := r.s.left(ctx)
		n, err := r.batch(ctx, ids[i:min(i+r.req.BatchSize, len(ids))])
		if err != nil {
			return err
		}
		i += n
		if after, ok := r.s.left(ctx); ok {
			r.longestBatch = max(r.longestBatch, before-after)
		}
	}
	return nil
}

// outOfTime reports whether the batch at index i of n ids may no longer be
// claimed (a dry run: the margin is reached), and if so counts the rest as
// remaining and says why the run stopped.
func (r *run) outOfTime(ctx context.Context, i, n int) bool {
	r.mu.Lock()
	stopped := r.rep.Stopped == StoppedDeadline // a send gave its claims back
	r.mu.Unlock()
	if !stopped && !r.deadlineNear(ctx) && (r.rep.DryRun || r.timeToClaim(ctx)) {
		return false
	}
	r.stop(StoppedDeadline)
	r.mu.Lock()
	r.rep.Remaining += n - i
	r.mu.Unlock()
	if i == 0 {
		left, _ := r.s.left(ctx)
		r.s.log.WarnContext(ctx, "nothing claimed: the invocation has too little time left for one batch and its sends (raise the function's timeout)",
			"run_id", r.rep.RunID, "left_ms", left.Milliseconds(), "margin_ms", r.budget.margin.Milliseconds(), "send_timeout_ms", r.budget.sendTimeout.Milliseconds())
	}
	return true
}

// pipeline replays the batches of a standard queue (no order to keep)
// claiming each while the one before it is sent and marked: claims still
// come before their own sends, and at most two batches are in hand. A
// batch's time (for timeToClaim) is its claims plus its sends.
func (r *run) pipeline(ctx context.Context, ids []string) error {
	var inflight chan time.Duration // the sending batch's send time, once done
	var lastClaim time.Duration
	wait := func() {
		if inflight != nil {
			r.longestBatch = max(r.longestBatch, lastClaim+<-inflight)
			inflight = nil
		}
	}
	defer wait()
	for i := 0; i < len(ids); {
		if _, deadline := r.s.left(ctx); deadline && r.longestBatch == 0 || r.slowed.Load() {
			// The first batch's time is not known yet (the deadline
			// plan needs it), or the table throttles: no overlap.
			wait()
		}
		if r.outOfTime(ctx, i, len(ids)) {
			return nil
		}
		before, _ := r.s.left(ctx)
		ready, n, err := r.claimBatch(ctx, ids[i:min(i+r.req.BatchSize, len(ids))])
		after, _ := r.s.left(ctx)
		wait() // the batch before is sent and marked
		if err != nil {
			return err
		}
		i += n
		lastClaim = before - after
		if len(ready) == 0 {
			continue
		}
		done := make(chan time.Duration, 1)
		go func() {
			start, _ := r.s.left(ctx)
			r.send(ctx, ready)
			end, _ := r.s.left(ctx)
			done <- start - end
		}()
		inflight = done
		if payloadBytes(ready) > MaxOverlapBytes {
			wait() // large bodies: one batch's in hand at a time
		}
	}
	return nil
}

// MaxOverlapBytes is the most payload a batch may hold for the next batch
// to be claimed while it is sent: a batch of larger bodies (50 of up to
// 1 MiB each) is sent before the next is read, so that a run holds one
// batch's bodies, not two (TestPeakMemoryFitsTheTemplate).
const MaxOverlapBytes = 8 << 20

// MaxSendBytes is the most payload in SendMessageBatch calls in flight at
// once: Concurrency calls of small messages, eight of 1 MiB.
const MaxSendBytes = 8 << 20

// payloadBytes is the size of the messages of cs.
func payloadBytes(cs []*claimed) int {
	n := 0
	for _, c := range cs {
		n += c.size
	}
	return n
}

// collect gathers up to limit ids from list and counts the rest, up to
// MaxRemainingCount, into the report's Remaining.
func (r *run) collect(ctx context.Context, list func(context.Context, func(string) (bool, error)) error, limit int) ([]string, error) {
	var ids []string
	err := list(ctx, func(id string) (bool, error) {
		if len(ids) < limit {
			ids = append(ids, id)
			return true, nil
		}
		r.rep.Remaining++
		return r.rep.Remaining < MaxRemainingCount, nil
	})
	return ids, err
}

// Concurrency is how many records of a batch are claimed, marked or settled
// at once, and how many SendMessageBatch calls of a wave are in flight: at
// DynamoDB's single-digit milliseconds per write, 25 in flight claim a
// batch of 50 in two rounds. With a batch's calls marking their records
// and the next batch claimed meanwhile, a run has up to about 80 requests
// in flight (sdkhttp keeps 100 connections per host open).
const Concurrency = 25

// each runs f for every index below n, Concurrency at a time, and returns
// the errors joined.
func each(n int, f func(i int) error) error {
	return errors.Join(fanout.Run(context.Background(), n, Concurrency, func(_ context.Context, i int) error { return f(i) })...)
}

// fail records a per-record error: the record's outcome is Failed, the run
// goes on with the others, and the error is returned when the run ends.
func (r *run) fail(ctx context.Context, id string, op string, err error) {
	r.note(&r.rep.Failed, id)
	if retryableAfterSend(err) {
		r.slowDown()
	}
	r.failLater(ctx, id, op, err)
}

// failLater records an error of a step after the outcome was noted (a mark
// or release that could not be written: the record's lease takes it over).
func (r *run) failLater(ctx context.Context, id string, op string, err error) {
	r.s.log.WarnContext(ctx, "redrive step failed", "run_id", r.rep.RunID, "step", op, "record", quarantine.LogRef(id), "error_kind", quarantine.ErrorKind(err))
	r.mu.Lock()
	defer r.mu.Unlock()
	e := fmt.Errorf("%s: %w", op, err)
	switch {
	case len(r.errs) < maxStepErrors:
		r.errs = append(r.errs, e)
	case quarantine.MoreSevere(e, errors.Join(r.errs...)):
		// The list is full: the worst error still takes a place, so that
		// an outage after many refusals names the run's error kind.
		r.errs[len(r.errs)-1] = e
	}
}

// maxStepErrors bounds the step errors a run returns.
const maxStepErrors = 20
