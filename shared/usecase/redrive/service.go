package redrive

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"golang.org/x/time/rate"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// SQS limits for one SendMessageBatch call and one message.
const (
	MaxEntriesPerCall = 10
	MaxCallBytes      = 1 << 20
	MaxAttributes     = 10
	// MaxRemainingCount bounds how far a run counts the records it did not
	// reach; a report with this many remaining means "at least".
	MaxRemainingCount = 10000
	// MaxSettlePerRun bounds the records one run settles.
	MaxSettlePerRun = 5000
)

// Config tunes the service. Zero values take the defaults.
type Config struct {
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
}

// New returns a Service. payloads may be nil when no record uses the claim
// check; now may be nil for time.Now.
func New(store quarantine.Store, lister quarantine.Lister, payloads quarantine.PayloadStore, sender Sender,
	sources map[string]*quarantine.Source, now func() time.Time, log *slog.Logger, cfg Config) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, lister: lister, payloads: payloads, sqs: sender, sources: sources, now: now, log: log, cfg: cfg.withDefaults()}
}

// Handle is the Lambda entry point: a JSON request in, a report out. A bad
// request is an error (a function error the caller sees), never a partial run.
func (s *Service) Handle(ctx context.Context, raw []byte) (*Report, error) {
	req, err := ParseRequest(raw)
	if err != nil {
		return nil, err
	}
	return s.Run(ctx, req)
}

// Run executes a normalized request.
func (s *Service) Run(ctx context.Context, req Request) (*Report, error) {
	if err := req.normalize(); err != nil {
		return nil, err
	}
	src := s.source(req.Source)
	if src == nil {
		return nil, &RequestError{Problems: []string{fmt.Sprintf("source %q: %v", req.Source, errUnknownSource)}}
	}
	for i, id := range req.IDs {
		if !strings.HasPrefix(id, src.Name+"#") {
			return nil, &RequestError{Problems: []string{fmt.Sprintf("ids[%d] does not belong to source %q", i, src.Name)}}
		}
	}
	rep := &Report{RunID: runID(), Action: req.Action, Source: src.Name, RequestedBy: req.RequestedBy, DryRun: req.DryRun, StartedAt: s.now().UTC(), Stopped: StoppedDone}
	if req.Action == ActionRedrive && !req.Approve && !req.DryRun {
		switch {
		case req.IncludeParked:
			rep.DryRun, rep.DryRunReason = true, "replaying parked records needs approve: true"
		case req.MaxMessages > s.cfg.ApprovalThreshold:
			rep.DryRun, rep.DryRunReason = true, fmt.Sprintf("max_messages %d is above the approval threshold %d; approve: true is needed", req.MaxMessages, s.cfg.ApprovalThreshold)
		}
	}
	switch req.Action {
	case ActionCorrect:
		return s.correct(ctx, req, src, rep)
	case ActionPolicies:
		return s.applyPolicies(ctx, src, rep)
	}
	r := &run{s: s, req: req, src: src, rep: rep}
	err := r.execute(ctx)
	err = errors.Join(append([]error{err}, r.errs...)...)
	rep.FinishedAt = s.now().UTC()
	s.log.InfoContext(ctx, "redrive run finished",
		"run_id", rep.RunID, "action", rep.Action, "source", rep.Source, "dry_run", rep.DryRun,
		"redriven", rep.Redriven.Count, "skipped", rep.Skipped.Count, "held", rep.Held.Count,
		"parked", rep.Parked.Count, "failed", rep.Failed.Count, "settled", rep.Settled.Count, "held_integrity", rep.Integrity.Count,
		"unknown", rep.Unknown.Count, "deferred", rep.Deferred.Count,
		"remaining", rep.Remaining, "stopped", rep.Stopped, "error_kind", quarantine.ErrorKind(err))
	return rep, err
}

// correct stores a correction of the one record in req.IDs. A refusal
// (*quarantine.CorrectionError) or a lost race (quarantine.ErrCorrectionConflict)
// changes nothing.
func (s *Service) correct(ctx context.Context, req Request, src *quarantine.Source, rep *Report) (*Report, error) {
	q := quarantine.NewQuarantiner(s.store, s.payloads, s.now, quarantine.Config{Sources: map[string]*quarantine.Source{src.Name: src}, KeyAttribute: s.cfg.KeyAttribute})
	rec, err := q.Correct(ctx, req.IDs[0], quarantine.CorrectionRequest{Actor: req.RequestedBy, Reason: req.Reason, Body: []byte(req.Payload), NewKey: req.NewKey})
	rep.FinishedAt = s.now().UTC()
	if err == nil {
		rep.Corrected.add(rec.DLQID)
		c := *rec.Latest()
		c.Body = ""
		rep.Correction = &c
	}
	s.log.InfoContext(ctx, "correction finished", "run_id", rep.RunID, "action", rep.Action, "source", rep.Source,
		"record", quarantine.LogRef(req.IDs[0]), "corrected", rep.Corrected.Count, "error_kind", quarantine.ErrorKind(err))
	// The runtime logs a function error's text: leave the record id (an
	// idempotency key, maybe a payload value) out of it.
	var ce *quarantine.CorrectionError
	switch {
	case err == nil:
		return rep, nil
	case quarantine.IsIntegrityFailure(err):
		return nil, s.holdTampered(ctx, req.IDs[0], err)
	case errors.As(err, &ce):
		return nil, &quarantine.CorrectionError{Problems: ce.Problems}
	case errors.Is(err, quarantine.ErrCorrectionConflict):
		return nil, quarantine.ErrCorrectionConflict
	case errors.Is(err, quarantine.ErrNotFound):
		return nil, &RequestError{Problems: []string{"ids[0] names no record"}}
	}
	return nil, err
}

// holdTampered holds record id, whose correction was refused because it
// failed verification (cause), if the version now stored still fails.
func (s *Service) holdTampered(ctx context.Context, id string, cause error) error {
	cur, err := s.store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("read record: %w", err)
	}
	still := quarantine.Verify(cur)
	if still == nil && errors.Is(cause, quarantine.ErrPayloadMismatch) {
		if _, err := quarantine.ReplayBody(ctx, s.payloads, cur); quarantine.IsIntegrityFailure(err) {
			still = err
		}
	}
	if still == nil {
		return quarantine.ErrCorrectionConflict // it changed meanwhile: look again
	}
	reason := quarantine.HoldReason(still)
	err = s.store.Hold(ctx, quarantine.IntegrityHold{ID: cur.DLQID, Version: cur.Version, Reason: reason, At: s.now().UTC()})
	if err != nil && !errors.Is(err, quarantine.ErrVersionConflict) {
		return fmt.Errorf("hold record: %w", err)
	}
	s.log.WarnContext(ctx, "record fails verification: held, not corrected", "record", quarantine.LogRef(id), "reason", reason)
	return &HeldError{Reason: reason}
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
	mu       sync.Mutex // guards rep while a batch works concurrently
	s        *Service
	req      Request
	src      *quarantine.Source
	rep      *Report
	queueURL string
	limiter  *rate.Limiter
	// blocked are the FIFO message groups that send nothing more this run.
	blocked map[string]bool
	// errs are the per-record errors, returned when the run ends.
	errs []error
}

func (r *run) execute(ctx context.Context) error {
	if err := r.settle(ctx); err != nil {
		return err
	}
	if r.req.Action == ActionSettle {
		return nil
	}
	if r.req.RatePerSecond > 0 {
		r.limiter = rate.NewLimiter(rate.Limit(r.req.RatePerSecond), MaxEntriesPerCall)
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
	for i := 0; i < len(ids); i += r.req.BatchSize {
		if r.deadlineNear(ctx) {
			r.rep.Stopped = StoppedDeadline
			r.rep.Remaining += len(ids) - i
			return nil
		}
		if err := r.batch(ctx, ids[i:min(i+r.req.BatchSize, len(ids))]); err != nil {
			return err
		}
	}
	return nil
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

// timeForACall reports whether one SendMessageBatch try fits before the
// margin the run keeps to write outcomes: no call is in flight when the
// invocation ends.
func (r *run) timeForACall(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > r.s.cfg.SendTimeout+r.s.cfg.DeadlineMargin
}

func (r *run) deadlineNear(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < r.s.cfg.DeadlineMargin
}

// candidates calls yield with the id of every record the request selects:
// the explicit ids, or the status index for QUARANTINED (and PARKED when
// asked), plus REDRIVING records whose lease expired.
func (r *run) candidates(ctx context.Context, yield func(id string) (bool, error)) error {
	if r.fifo() {
		// Explicit ids too: a group keeps its order whoever picks it.
		return r.fifoCandidates(ctx, yield)
	}
	if len(r.req.IDs) > 0 {
		for _, id := range r.req.IDs {
			more, err := yield(id)
			if err != nil || !more {
				return err
			}
		}
		return nil
	}
	if _, ok := r.selected(); !ok {
		return nil // no requested signature is cleared
	}
	statuses := []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusQuarantined}
	if r.req.IncludeParked {
		statuses = append(statuses, quarantine.StatusParked)
	}
	for _, st := range statuses {
		q := r.listQuery(st)
		for {
			page, err := r.s.lister.List(ctx, q)
			if err != nil {
				return fmt.Errorf("list %s records: %w", st, err)
			}
			for _, id := range page.IDs {
				if st == quarantine.StatusRedriving && !r.leaseExpired(ctx, id) {
					continue
				}
				more, err := yield(id)
				if err != nil || !more {
					return err
				}
			}
			if page.Cursor == "" {
				break
			}
			q.Cursor = page.Cursor
		}
	}
	return nil
}

// fifoCandidates walks every open record of a FIFO source, REDRIVING and
// QUARANTINED (and PARKED when asked) merged in first_seen order, which
// within a message group is the order the DLQ delivered them in. A group
// replays only from its earliest open record on: a group whose earlier
// record this run does not replay (not selected by the request, in flight
// in another run) sends nothing after it; those later records are noted
// as deferred. PARKED and held records are out of the stream and block
// nothing. The listing entries come from the status index alone.
func (r *run) fifoCandidates(ctx context.Context, yield func(id string) (bool, error)) error {
	if _, ok := r.selected(); !ok && len(r.req.IDs) == 0 {
		return nil // no requested signature is cleared: nothing to walk for
	}
	var streams []*entryStream
	add := func(st quarantine.Status, held bool) {
		streams = append(streams, &entryStream{lister: r.s.lister, held: held,
			q: quarantine.ListQuery{Status: st, Source: r.src.Name, Limit: 1000, Held: held}})
	}
	for _, st := range []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusQuarantined} {
		add(st, false)
		add(st, true) // held open records: out of replay, but their group waits for them
	}
	if r.req.IncludeParked {
		add(quarantine.StatusParked, false)
	}
	now := r.s.now()
	yielded := map[string]bool{}
	// Requested ids the walk did not hand on are reported, not dropped
	// from the report (parked, held, another source's, gone).
	defer func() {
		for _, id := range r.req.IDs {
			if !yielded[id] {
				r.note(&r.rep.Skipped, id)
			}
		}
	}()
	for walked := 0; ; walked++ {
		if walked >= MaxFIFOWalk || r.deadlineNear(ctx) {
			// Bounded: the rest is for the next run (counted as remaining).
			r.rep.Remaining++
			r.rep.Stopped = StoppedWalkBound
			if r.deadlineNear(ctx) {
				r.rep.Stopped = StoppedDeadline
			}
			return nil
		}
		var next *entryStream
		for _, st := range streams {
			e, err := st.peek(ctx)
			if err != nil {
				return err
			}
			if e != nil && (next == nil || before(*e, *next.head())) {
				next = st
			}
		}
		if next == nil {
			return nil
		}
		held := next.held
		e := next.pop()
		rec := &quarantine.Record{DLQID: e.ID, MessageGroupID: e.Group, IdempotencyKey: e.Group}
		switch {
		case held:
			r.block(rec) // set aside as found: its group waits until it is resolved
			continue
		case r.isBlocked(rec):
			if e.Status != quarantine.StatusParked {
				r.note(&r.rep.Deferred, e.ID)
			}
			continue
		case now.Sub(latest(e.FirstSeen, e.StatusSince)) < IndexSettleGuard && e.Status != quarantine.StatusParked:
			// The status index is eventually consistent: an earlier record
			// of this group written (or moved) a moment ago may not be
			// listed yet. It waits for the next run, counted as remaining.
			r.block(rec)
			r.rep.Remaining++
			continue
		case e.Status == quarantine.StatusRedriving && now.Before(e.LeaseUntil):
			r.block(rec) // in flight: nothing of its group may go before it
			continue
		case !r.selects(e):
			if e.Status != quarantine.StatusParked {
				r.block(rec) // an earlier open record this run does not replay
			}
			continue
		}
		yielded[e.ID] = true
		more, err := yield(e.ID)
		if err != nil || !more {
			return err
		}
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// MaxFIFOWalk bounds the index entries one run of a FIFO source walks.
const MaxFIFOWalk = 50000

// IndexSettleGuard is how recent a record must be for a FIFO run to leave
// its group for the next run: the status index is eventually consistent
// (typically within a second), so an earlier record of the group written
// just before may not be listed yet.
const IndexSettleGuard = 10 * time.Second

// before orders listing entries by first_seen, then sequence number, then
// id: the order of a FIFO group.
func before(a, b quarantine.ListEntry) bool {
	if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
		return c < 0
	}
	if c := quarantine.CompareSequence(a.Sequence, b.Sequence); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// selects reports whether the request asks for the record e lists.
func (r *run) selects(e quarantine.ListEntry) bool {
	if len(r.req.IDs) > 0 {
		return contains(r.req.IDs, e.ID)
	}
	sigs, ok := r.selected()
	if !ok {
		return false
	}
	st := e.Status
	if st == quarantine.StatusRedriving {
		st = quarantine.StatusQuarantined
	}
	q := r.listQuery(st)
	probe := &quarantine.Record{Status: st, Source: r.src.Name, FirstSeen: quarantine.At(e.FirstSeen), StatusSince: quarantine.At(e.FirstSeen),
		FailureClass: e.Class, FailureSignature: e.Signature}
	q.Signatures = sigs
	return q.Matches(probe)
}

// entryStream pages through one status of the index, an entry at a time.
type entryStream struct {
	lister quarantine.Lister
	q      quarantine.ListQuery
	buf    []quarantine.ListEntry
	done   bool
	held   bool // lists records under an integrity hold
}

func (s *entryStream) peek(ctx context.Context) (*quarantine.ListEntry, error) {
	for len(s.buf) == 0 && !s.done {
		page, err := s.lister.List(ctx, s.q)
		if err != nil {
			return nil, fmt.Errorf("list %s records: %w", s.q.Status, err)
		}
		s.buf, s.q.Cursor, s.done = page.Entries, page.Cursor, page.Cursor == ""
	}
	return s.head(), nil
}

func (s *entryStream) head() *quarantine.ListEntry {
	if len(s.buf) == 0 {
		return nil
	}
	return &s.buf[0]
}

func (s *entryStream) pop() quarantine.ListEntry {
	e := s.buf[0]
	s.buf = s.buf[1:]
	return e
}

// selected returns the signatures the listing is restricted to: the
// request's, narrowed to cleared_reasons when those are given, so records
// whose cause is not cleared never fill a run's max_messages and starve
// the ones behind them. ok is false when nothing can match.
func (r *run) selected() (sigs []string, ok bool) {
	sigs = r.req.Signatures
	if len(r.req.ClearedReasons) == 0 {
		return sigs, true
	}
	if len(sigs) == 0 {
		return r.req.ClearedReasons, true
	}
	var both []string
	for _, s := range sigs {
		if contains(r.req.ClearedReasons, s) {
			both = append(both, s)
		}
	}
	return both, len(both) > 0
}

func (r *run) listQuery(st quarantine.Status) quarantine.ListQuery {
	sigs, _ := r.selected()
	q := quarantine.ListQuery{Status: st, Source: r.src.Name, Classes: r.req.Classes, Signatures: sigs, Limit: 1000}
	if r.req.FirstSeenFrom != nil {
		q.FirstSeenFrom = *r.req.FirstSeenFrom
	}
	if r.req.FirstSeenTo != nil {
		q.FirstSeenTo = *r.req.FirstSeenTo
	}
	if st == quarantine.StatusParked {
		// Parked records are poison: a class filter would hide them.
		q.Classes = nil
	}
	return q
}

func (r *run) leaseExpired(ctx context.Context, id string) bool {
	rec, err := r.s.store.Get(ctx, id)
	return err == nil && rec.Status == quarantine.StatusRedriving && rec.LeaseUntil != nil && !r.s.now().Before(rec.LeaseUntil.Time)
}

// eligible re-checks the request's filters on the full record, and the
// cleared-reasons allow-list.
func (r *run) eligible(rec *quarantine.Record) (bool, string) {
	st := rec.Status
	if st == quarantine.StatusRedriving {
		st = quarantine.StatusQuarantined
		if rec.ParkedCap != 0 {
			// An approved replay of a parked record, its lease expired:
			// only another approved run of parked records takes it over.
			st = quarantine.StatusParked
		}
	}
	if st == quarantine.StatusParked && !r.req.IncludeParked {
		return false, "parked"
	}
	q := r.listQuery(st)
	q.Status = st
	probe := *rec
	probe.Status = st
	if !q.Matches(&probe) {
		return false, "no longer matches the filters"
	}
	if len(r.req.ClearedReasons) > 0 && !contains(r.req.ClearedReasons, rec.FailureSignature) {
		return false, "signature not in cleared_reasons"
	}
	return true, ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// note records an outcome for id.
func (r *run) note(o *Outcome, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.note(o, id)
}

// Concurrency is how many records of a batch are claimed or marked at once.
const Concurrency = 8

// each runs f for every index below n, Concurrency at a time, and returns
// the errors joined.
func each(n int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, Concurrency)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// claimed is one record holding a claim, with what it will send.
type claimed struct {
	rec   *quarantine.Record
	body  []byte
	attrs map[string]sqstypes.MessageAttributeValue
	size  int
}

// group is the FIFO message group a record's replay is sent in.
func group(rec *quarantine.Record) string {
	if rec.MessageGroupID != "" {
		return rec.MessageGroupID
	}
	return rec.IdempotencyKey
}

// fifo reports whether the run replays into a FIFO queue.
func (r *run) fifo() bool { return strings.HasSuffix(r.src.Name, ".fifo") }

// block stops every later replay of rec's message group in this run: an
// earlier message of the group was not (or not surely) sent, and no later
// one may go before it.
func (r *run) block(rec *quarantine.Record) {
	if !r.fifo() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocked == nil {
		r.blocked = map[string]bool{}
	}
	r.blocked[group(rec)] = true
}

func (r *run) isBlocked(rec *quarantine.Record) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fifo() && r.blocked[group(rec)]
}

// fail records a per-record error: the record's outcome is Failed, the run
// goes on with the others, and the error is returned when the run ends.
func (r *run) fail(ctx context.Context, id string, op string, err error) {
	r.note(&r.rep.Failed, id)
	r.failLater(ctx, id, op, err)
}

// failLater records an error of a step after the outcome was noted (a mark
// or release that could not be written: the record's lease takes it over).
func (r *run) failLater(ctx context.Context, id string, op string, err error) {
	r.s.log.WarnContext(ctx, "redrive step failed", "run_id", r.rep.RunID, "step", op, "record", quarantine.LogRef(id), "error_kind", quarantine.ErrorKind(err))
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", op, err))
	}
}

// batch runs the replay path for up to BatchSize records. One record's
// failure is that record's outcome, never the batch's: the records already
// claimed are still sent, marked or released.
func (r *run) batch(ctx context.Context, ids []string) error {
	// One batch read instead of a read per record, where the store can.
	prefetched, err := r.s.store.GetMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	slots := make([]*claimed, len(ids))
	_ = each(len(ids), func(i int) error {
		c, err := r.claim(ctx, ids[i], prefetched)
		if err != nil {
			r.fail(ctx, ids[i], "claim", err)
			if rec := prefetched[ids[i]]; rec != nil {
				r.block(rec) // its claim may hold: no later message of its group goes first
			}
			return nil
		}
		slots[i] = c
		return nil
	})
	var ready []*claimed
	for _, c := range slots {
		if c != nil {
			ready = append(ready, c)
		}
	}
	if len(ready) == 0 || r.rep.DryRun {
		return nil
	}
	if r.fifo() {
		inGroupOrder(ready)
	}
	r.send(ctx, ready)
	return nil
}

// claim reads one record (or takes it from prefetched) and takes it (or, in
// a dry run, says what would happen). It returns nil when the record is not
// to be sent; an error is this record's failure only.
func (r *run) claim(ctx context.Context, id string, prefetched map[string]*quarantine.Record) (*claimed, error) {
	s, actor := r.s, r.req.RequestedBy
	rec, err := prefetched[id], error(nil)
	switch {
	case prefetched == nil:
		rec, err = s.store.Get(ctx, id)
	case rec == nil:
		err = quarantine.ErrNotFound
	}
	if errors.Is(err, quarantine.ErrNotFound) {
		r.note(&r.rep.Skipped, id)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	if verr := quarantine.Verify(rec); quarantine.IsIntegrityFailure(verr) {
		// Checked before anything else about it: a record changed behind
		// its seal (or that no longer decodes) is set aside, whatever its
		// fields now claim.
		return nil, r.setAside(ctx, rec, verr)
	}
	if rec.Status == quarantine.StatusRedriving && rec.ParkedCap != 0 && !r.req.IncludeParked && !r.rep.DryRun {
		// An approved replay of a parked record whose run ended without
		// recording its send: back to PARKED (possibly sent), for an
		// approved run to take up, instead of holding its group back.
		back, err := rec.ReturnExpiredParkedClaim(r.req.RequestedBy, s.now())
		if err == nil {
			if err := s.store.Replace(ctx, rec, back); err != nil && !errors.Is(err, quarantine.ErrVersionConflict) {
				return nil, fmt.Errorf("return expired parked claim: %w", err)
			}
			r.note(&r.rep.Parked, id)
			return nil, nil
		}
	}
	if ok, _ := r.eligible(rec); !ok {
		if rec.Status == quarantine.StatusQuarantined || rec.Status == quarantine.StatusRedriving {
			r.block(rec) // still open, not replayed now: its group waits
		}
		r.note(&r.rep.Skipped, id)
		return nil, nil
	}
	if r.isBlocked(rec) {
		r.note(&r.rep.Deferred, id)
		return nil, nil
	}
	now := s.now()
	var next *quarantine.Record
	if rec.Status == quarantine.StatusParked {
		next, err = rec.ClaimParked(actor, now, s.cfg.Lease)
	} else {
		next, err = rec.Claim(actor, now, s.cfg.Lease)
	}
	switch {
	case errors.Is(err, quarantine.ErrCapReached):
		parked, perr := rec.ParkPoison(actor, now)
		if quarantine.IsIntegrityFailure(perr) {
			return nil, r.setAside(ctx, rec, perr)
		}
		if !r.rep.DryRun {
			if perr != nil {
				return nil, perr
			}
			if perr := s.store.Replace(ctx, rec, parked); perr != nil {
				if errors.Is(perr, quarantine.ErrVersionConflict) {
					r.note(&r.rep.Skipped, id)
					return nil, nil
				}
				if errors.Is(perr, quarantine.ErrHeld) {
					r.note(&r.rep.Integrity, id) // set aside meanwhile
					return nil, nil
				}
				return nil, fmt.Errorf("park record: %w", perr)
			}
		}
		r.note(&r.rep.Parked, id)
		return nil, nil
	case errors.Is(err, quarantine.ErrNotClaimable):
		if rec.Status == quarantine.StatusRedriving {
			r.block(rec) // in flight in another run: its group waits for it
		}
		r.note(&r.rep.Skipped, id)
		return nil, nil
	case quarantine.IsIntegrityFailure(err):
		return nil, r.setAside(ctx, rec, err)
	case err != nil:
		return nil, err
	}

	// A corrected record sends its latest correction, never the original.
	body, berr := quarantine.ReplayBody(ctx, s.payloads, rec)
	attrs, aerr := quarantine.LoadAttributes(ctx, s.payloads, rec)
	var verdict quarantine.Verdict
	if berr == nil {
		verdict = r.src.Check(body)
	}
	if quarantine.IsIntegrityFailure(berr) || quarantine.IsIntegrityFailure(aerr) {
		// A claim-checked object does not match its sealed hash: set the
		// record aside unclaimed, as found.
		return nil, r.setAside(ctx, rec, errors.Join(berr, aerr))
	}
	if r.rep.DryRun {
		switch {
		case berr != nil || aerr != nil:
			r.note(&r.rep.Failed, id)
		case !verdict.Valid:
			r.note(&r.rep.Held, id)
		default:
			r.note(&r.rep.Redriven, id)
		}
		return nil, nil
	}
	if err := s.store.Replace(ctx, rec, next); err != nil {
		if errors.Is(err, quarantine.ErrVersionConflict) {
			r.note(&r.rep.Skipped, id) // another run claimed it first
			r.block(rec)
			return nil, nil
		}
		if errors.Is(err, quarantine.ErrHeld) {
			r.note(&r.rep.Integrity, id) // set aside meanwhile
			r.block(rec)
			return nil, nil
		}
		return nil, fmt.Errorf("claim record: %w", err)
	}
	if berr != nil || aerr != nil {
		r.block(next)
		perr := errors.Join(berr, aerr)
		if unreadable(perr) {
			// It fails the same way on every run: park it for an operator
			// instead of letting it sit at the head of every run.
			return nil, r.park(ctx, next, "payload unreadable: "+quarantine.ErrorKind(perr))
		}
		return nil, r.release(ctx, next, "payload unreadable: "+quarantine.ErrorKind(perr), nil, &r.rep.Failed)
	}
	if !verdict.Valid {
		// The same gate as ingest: a payload that fails the current schema
		// is never sent.
		c := quarantine.Classify(r.src, nil, verdict)
		r.block(next) // it waits for a correction; its group waits with it
		return nil, r.release(ctx, next, "held: "+c.Reason, &c, &r.rep.Held)
	}
	msgAttrs := messageAttributes(attrs, next)
	return &claimed{rec: next, body: body, attrs: msgAttrs, size: messageSize(body, msgAttrs)}, nil
}

// inGroupOrder puts the records of each FIFO message group into their
// original order (the order the DLQ delivered them in), each group in the
// places its records hold.
func inGroupOrder(ready []*claimed) {
	places := map[string][]int{}
	for i, c := range ready {
		places[group(c.rec)] = append(places[group(c.rec)], i)
	}
	for _, idx := range places {
		members := make([]*claimed, len(idx))
		for k, i := range idx {
			members[k] = ready[i]
		}
		slices.SortStableFunc(members, func(a, b *claimed) int { return originalOrder(a.rec, b.rec) })
		for k, i := range idx {
			ready[i] = members[k]
		}
	}
}

// originalOrder compares two records of one message group by the order
// they reached the DLQ in, as the FIFO walk does: first_seen (which ingest
// stamps in the DLQ's order within a group), then the SQS sequence number.
func originalOrder(a, b *quarantine.Record) int {
	ea, eb := quarantine.EntryOf(a), quarantine.EntryOf(b)
	switch {
	case before(ea, eb):
		return -1
	case before(eb, ea):
		return 1
	}
	return 0
}

// unreadable reports whether a payload error is one no retry cures: the
// object is gone. (One that does not hash to the record's seal never gets
// here: it is an integrity failure, and the record is held.)
func unreadable(err error) bool {
	switch quarantine.ErrorKind(err) {
	case "aws:NoSuchKey", "aws:NoSuchVersion", "aws:NotFound", "aws:InvalidObjectState":
		// (Not AccessDenied: a KMS or IAM mistake would park every
		// claim-checked record in one run.)
		return true
	}
	return false
}

// setAside holds rec, which failed verification (cause), at the version
// read and exactly as found: it is never re-sealed, released or sent, and
// listings leave it out from now on, so it neither fills max_messages nor
// comes back every run. The hold is counted (IntegrityHolds, alarmed). A
// dry run only reports it.
func (r *run) setAside(ctx context.Context, rec *quarantine.Record, cause error) error {
	r.block(rec) // not sent: its FIFO group sends nothing after it this run
	reason := quarantine.HoldReason(cause)
	if !r.rep.DryRun {
		err := r.s.store.Hold(ctx, quarantine.IntegrityHold{ID: rec.DLQID, Version: rec.Version, Reason: reason, At: r.s.now().UTC()})
		switch {
		case errors.Is(err, quarantine.ErrVersionConflict), errors.Is(err, quarantine.ErrNotFound):
			r.note(&r.rep.Skipped, rec.DLQID) // it changed since the read: the next run reads it again
			return nil
		case err != nil:
			return fmt.Errorf("hold record: %w", err)
		}
	}
	r.s.log.WarnContext(ctx, "record fails verification: held, never sent or re-sealed", "run_id", r.rep.RunID,
		"source", r.src.Name, "record", quarantine.LogRef(rec.DLQID), "version", rec.Version, "reason", reason, "dry_run", r.rep.DryRun)
	r.note(&r.rep.Integrity, rec.DLQID)
	return nil
}

// release gives a claim back, retrying on concurrent changes.
func (r *run) release(ctx context.Context, rec *quarantine.Record, reason string, held *quarantine.Classification, out *Outcome) error {
	return r.rewrite(ctx, rec, out, "release claim", func(cur *quarantine.Record) (*quarantine.Record, error) {
		return cur.Release(r.req.RequestedBy, reason, r.s.now(), held)
	})
}

// park parks a claimed record no run can send as it is.
func (r *run) park(ctx context.Context, rec *quarantine.Record, reason string) error {
	return r.rewrite(ctx, rec, &r.rep.Parked, "park unsendable", func(cur *quarantine.Record) (*quarantine.Record, error) {
		return cur.ParkUnsendable(r.req.RequestedBy, reason, r.s.now())
	})
}

// rewrite applies step to rec and writes the result, re-reading and
// retrying on concurrent changes. A record that left REDRIVING meanwhile
// (its message came back, say) is noted under out unchanged.
func (r *run) rewrite(ctx context.Context, rec *quarantine.Record, out *Outcome, op string, step func(*quarantine.Record) (*quarantine.Record, error)) error {
	for attempt := 0; ; attempt++ {
		next, err := step(rec)
		if errors.Is(err, quarantine.ErrNotClaimable) {
			r.note(out, rec.DLQID) // it changed hands
			return nil
		}
		if quarantine.IsIntegrityFailure(err) {
			return r.setAside(ctx, rec, err)
		}
		if err != nil {
			return err
		}
		err = r.s.store.Replace(ctx, rec, next)
		if errors.Is(err, quarantine.ErrHeld) {
			r.note(&r.rep.Integrity, rec.DLQID) // another run set it aside meanwhile
			return nil
		}
		if err == nil {
			r.note(out, rec.DLQID)
			return nil
		}
		if !errors.Is(err, quarantine.ErrVersionConflict) || attempt >= 5 {
			return fmt.Errorf("%s: %w", op, err)
		}
		if rec, err = r.s.store.Get(ctx, rec.DLQID); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
}

// send replays the claimed records in SendMessageBatch calls of at most 10
// entries and 1 MiB, then marks each record REDRIVEN, parks it, gives its
// claim back or, when SQS may have enqueued it without saying so, records
// that it was possibly sent. Every record gets its outcome, whatever
// happens to the others. Into a FIFO queue a call carries at most one
// message of each group, and a group whose message was not surely sent
// sends nothing more this run: no later message of a group may go before
// an earlier one, also when that one's send fails and is retried.
func (r *run) send(ctx context.Context, ready []*claimed) {
	url, err := r.queue(ctx)
	if err != nil {
		for _, c := range ready {
			r.block(c.rec)
			if rerr := r.release(ctx, c.rec, "source queue unavailable: "+quarantine.ErrorKind(err), nil, &r.rep.Failed); rerr != nil {
				r.failLater(ctx, c.rec.DLQID, "release", rerr)
			}
		}
		return
	}
	fifo := r.fifo()
	for len(ready) > 0 {
		var call, rest []*claimed
		taken := map[string]bool{}
		bytes := 0
		for _, c := range ready {
			switch {
			case r.isBlocked(c.rec):
				if err := r.release(ctx, c.rec, "held back: an earlier message of its FIFO group was not sent", nil, &r.rep.Deferred); err != nil {
					r.failLater(ctx, c.rec.DLQID, "release", err)
				}
			case c.size > MaxCallBytes:
				// One message above the call limit can never be sent.
				r.block(c.rec)
				if err := r.park(ctx, c.rec, "the message exceeds the SQS size limit"); err != nil {
					r.failLater(ctx, c.rec.DLQID, "park", err)
				}
			case len(call) < MaxEntriesPerCall && bytes+c.size <= MaxCallBytes && !(fifo && taken[group(c.rec)]):
				call = append(call, c)
				bytes += c.size
				taken[group(c.rec)] = true
			default:
				rest = append(rest, c)
			}
		}
		if len(call) > 0 && !r.timeForACall(ctx) {
			// Not enough time left for a call and its retries: give the
			// claims back unsent rather than be stopped mid-send (which
			// leaves them claimed until their lease expires).
			for _, c := range append(call, rest...) {
				r.block(c.rec)
				if err := r.release(ctx, c.rec, "not sent: the invocation's deadline is near", nil, &r.rep.Deferred); err != nil {
					r.failLater(ctx, c.rec.DLQID, "release", err)
				}
			}
			r.rep.Stopped = StoppedDeadline
			return
		}
		if len(call) > 0 {
			r.settleCall(ctx, call, r.sendCall(ctx, url, call))
		}
		ready = rest
	}
}

// sent is what the tries of one SendMessageBatch entry came to.
type sent struct {
	messageID string // SQS accepted it
	maybe     bool   // a try ended without an answer: it may be enqueued
	refused   bool   // SQS refused it as malformed: no retry can help
	code      string // why the last try failed
}

// noSDKRetry turns the SDK's retries off for one call: a retried
// SendMessageBatch whose first try was enqueued but unanswered enqueues it
// again, and only redrive's own loop knows to record that.
func noSDKRetry(o *sqs.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }

// sendCall sends group in one SendMessageBatch call, retrying the entries
// that failed with jittered backoff, and says what became of each entry.
// It writes nothing.
func (r *run) sendCall(ctx context.Context, url string, group []*claimed) []sent {
	res := make([]sent, len(group))
	if r.limiter != nil {
		if err := r.limiter.WaitN(ctx, len(group)); err != nil {
			for i := range res {
				res[i].code = quarantine.ErrorKind(err)
			}
			return res
		}
	}
	pending := make([]int, len(group))
	for i := range pending {
		pending[i] = i
	}
	backoff := retry.NewExponentialJitterBackoff(r.s.cfg.MaxBackoff)
	for attempt := 1; len(pending) > 0 && attempt <= r.s.cfg.SendAttempts; attempt++ {
		if attempt > 1 {
			d, _ := backoff.BackoffDelay(attempt-1, nil)
			select {
			case <-ctx.Done():
				return res
			case <-time.After(d):
			}
		}
		if !r.timeForACall(ctx) {
			// No retry past the deadline margin: what is pending stays
			// unsent (or possibly sent, if a try had no answer).
			return res
		}
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
		for _, i := range pending {
			in.Entries = append(in.Entries, r.entry(strconv.Itoa(i), group[i]))
		}
		callCtx, cancel := context.WithTimeout(ctx, r.s.cfg.SendTimeout)
		out, err := r.s.sqs.SendMessageBatch(callCtx, in, noSDKRetry)
		cancel()
		if err != nil {
			maybe := mayHaveApplied(err)
			for _, i := range pending {
				res[i].code = quarantine.ErrorKind(err)
				res[i].maybe = res[i].maybe || maybe
			}
			if ctx.Err() != nil {
				return res
			}
			continue
		}
		answered := map[int]bool{}
		for _, ok := range out.Successful {
			if i, mine := entryIndex(aws.ToString(ok.Id), len(group)); mine {
				res[i].messageID = aws.ToString(ok.MessageId)
				answered[i] = true
			}
		}
		for _, f := range out.Failed {
			if i, mine := entryIndex(aws.ToString(f.Id), len(group)); mine && !answered[i] {
				res[i].code = aws.ToString(f.Code)
				// The request itself is wrong: retrying cannot help.
				res[i].refused = f.SenderFault
				answered[i] = true
			}
		}
		var again []int
		for _, i := range pending {
			switch {
			case !answered[i]:
				// SQS answers every entry; one it left out may be enqueued.
				res[i].maybe, res[i].code = true, "unanswered entry"
				again = append(again, i)
			case res[i].messageID == "" && !res[i].refused:
				again = append(again, i)
			}
		}
		pending = again
	}
	return res
}

// mayHaveApplied reports whether a failed call may still have been carried
// out: anything but a 4xx answer (SQS refused it) or a connection that
// never opened. A timeout, a reset connection, a 5xx: SQS may have
// enqueued the messages and the answer was lost.
func mayHaveApplied(err error) bool {
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() >= 400 && status.HTTPStatusCode() < 500 {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var params *smithy.InvalidParamsError
	var ser *smithy.SerializationError
	return !errors.As(err, &params) && !errors.As(err, &ser)
}

// settleCall writes the outcome of each entry of one call: marks first (a
// sent record must never stay claimed while others are released), then
// the records whose send is unknown, then the ones given back.
func (r *run) settleCall(ctx context.Context, call []*claimed, res []sent) {
	var marks []int
	for i := range call {
		if res[i].messageID != "" {
			marks = append(marks, i)
		}
	}
	_ = each(len(marks), func(k int) error {
		i := marks[k]
		if err := r.mark(ctx, call[i], res[i].messageID, res[i].maybe); err != nil {
			r.failLater(ctx, call[i].rec.DLQID, "mark", err)
		}
		return nil
	})
	for i, c := range call {
		var err error
		switch {
		case res[i].messageID != "":
			continue
		case res[i].maybe:
			// Possibly enqueued: never "not sent", never the count back.
			r.block(c.rec)
			err = r.unknown(ctx, c, res[i].code)
		case res[i].refused:
			r.block(c.rec)
			err = r.park(ctx, c.rec, "send refused: "+res[i].code)
		default:
			r.block(c.rec)
			err = r.release(ctx, c.rec, "send failed after retries: "+res[i].code, nil, &r.rep.Failed)
		}
		if err != nil {
			r.failLater(ctx, c.rec.DLQID, "record send outcome", err)
		}
	}
}

// entryIndex turns a batch entry id back into the index it was made from.
func entryIndex(id string, n int) (int, bool) {
	i, err := strconv.Atoi(id)
	return i, err == nil && i >= 0 && i < n
}

// mark records a completed send. If the record changed since the claim (its
// message already failed again and came back), the send is still written to
// its history.
func (r *run) mark(ctx context.Context, c *claimed, messageID string, maybeTwice bool) error {
	round, fifo := c.rec.RedriveCount, r.fifo()
	r.note(&r.rep.Redriven, c.rec.DLQID)
	return r.rewriteHistory(ctx, c.rec, "mark redriven", func(cur *quarantine.Record) (*quarantine.Record, error) {
		if cur.Status == quarantine.StatusRedriving && cur.RedriveCount == round {
			return cur.MarkSent(r.req.RequestedBy, messageID, maybeTwice, fifo, r.s.now())
		}
		return cur.NoteSentWhileChanged(r.req.RequestedBy, messageID, round, maybeTwice, fifo, r.s.now())
	})
}

// unknown records a send whose outcome no try could learn.
func (r *run) unknown(ctx context.Context, c *claimed, code string) error {
	round := c.rec.RedriveCount
	r.note(&r.rep.Unknown, c.rec.DLQID)
	return r.rewriteHistory(ctx, c.rec, "record unknown send", func(cur *quarantine.Record) (*quarantine.Record, error) {
		return cur.SendUnknown(r.req.RequestedBy, code, round, r.s.now())
	})
}

// rewriteHistory writes step's successor of rec, re-reading and retrying
// on concurrent changes: what it records (a send) happened whatever the
// record did meanwhile.
func (r *run) rewriteHistory(ctx context.Context, rec *quarantine.Record, op string, step func(*quarantine.Record) (*quarantine.Record, error)) error {
	for attempt := 0; ; attempt++ {
		next, err := step(rec)
		if quarantine.IsIntegrityFailure(err) {
			// The send is reported; the version read since no longer
			// verifies, so nothing is written under a new seal.
			return r.setAside(ctx, rec, err)
		}
		if err != nil {
			return err
		}
		err = r.s.store.Replace(ctx, rec, next)
		if errors.Is(err, quarantine.ErrHeld) {
			r.note(&r.rep.Integrity, rec.DLQID) // another run set it aside meanwhile
			return nil
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, quarantine.ErrVersionConflict) || attempt >= 10 {
			return fmt.Errorf("%s: %w", op, err)
		}
		if rec, err = r.s.store.Get(ctx, rec.DLQID); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
}

func (r *run) entry(id string, c *claimed) sqstypes.SendMessageBatchRequestEntry {
	e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(c.body)), MessageAttributes: c.attrs}
	if r.fifo() {
		e.MessageGroupId = aws.String(group(c.rec))
		e.MessageDeduplicationId = aws.String(DeduplicationID(c.rec.DLQID, c.rec.RedriveCount))
	}
	return e
}

// DeduplicationID is the FIFO deduplication id of one replay round: the
// same for every try of the round. SQS drops a copy with an id it saw
// within its 5-minute deduplication interval, so the tries of one run
// (seconds apart) never enqueue a round twice. A takeover after an expired
// lease (16 minutes by default) is past that interval: SQS accepts its
// copy, and the record's history says that a duplicate send is possible.
func DeduplicationID(dlqID string, round int) string {
	sum := sha256.Sum256([]byte(dlqID + "#" + strconv.Itoa(round)))
	return hex.EncodeToString(sum[:])
}

// messageAttributes returns the original attributes plus the record id and
// redrive count, within SQS's limit of 10: with 9 originals only the record
// id is added, with 10 nothing is (the original attributes always win).
func messageAttributes(orig map[string]quarantine.Attribute, rec *quarantine.Record) map[string]sqstypes.MessageAttributeValue {
	out := make(map[string]sqstypes.MessageAttributeValue, len(orig)+2)
	for k, a := range orig {
		if k == quarantine.AttrRecordID || k == quarantine.AttrRedriveCount || k == quarantine.AttrCorrected {
			continue
		}
		v := sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType)}
		if strings.HasPrefix(a.DataType, "Binary") {
			v.BinaryValue = a.BinaryValue
		} else {
			v.StringValue = aws.String(a.StringValue)
		}
		out[k] = v
	}
	if c := rec.Latest(); c != nil {
		// A corrected replay says so, and keeps the event identity the
		// correction promised (room for both was checked when correcting).
		out[quarantine.AttrCorrected] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(c.CorrectionNumber())}
		if c.KeyAttribute != "" {
			out[c.KeyAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(rec.IdempotencyKey)}
		}
	}
	if len(out) < MaxAttributes {
		out[quarantine.AttrRecordID] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(rec.DLQID)}
	}
	if len(out) < MaxAttributes {
		out[quarantine.AttrRedriveCount] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(rec.RedriveCount))}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// messageSize is what SQS counts against its size limit: body plus each
// attribute's name, type and value.
func messageSize(body []byte, attrs map[string]sqstypes.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

func (r *run) queue(ctx context.Context) (string, error) {
	if r.queueURL != "" {
		return r.queueURL, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(r.src.Name)}
	if parts := strings.Split(r.src.ARN, ":"); len(parts) == 6 {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	out, err := r.s.sqs.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("source queue url: %w", err)
	}
	r.queueURL = aws.ToString(out.QueueUrl)
	return r.queueURL, nil
}

// settle resolves this source's REDRIVEN records whose replay stayed away
// from the DLQ for the settle window, at most MaxSettlePerRun a run.
func (r *run) settle(ctx context.Context) error {
	var ids []string
	q := quarantine.ListQuery{Status: quarantine.StatusRedriven, Source: r.src.Name, Limit: 1000}
	for len(ids) < MaxSettlePerRun {
		page, err := r.s.lister.List(ctx, q)
		if err != nil {
			return fmt.Errorf("list redriven records: %w", err)
		}
		ids = append(ids, page.IDs...)
		if page.Cursor == "" {
			break
		}
		q.Cursor = page.Cursor
	}
	if len(ids) == 0 {
		return nil
	}
	// Never earlier than a failing replay can come back: if the source
	// queue's attributes cannot be read, settle nothing this run.
	window, err := r.settleWindow(ctx)
	if err != nil {
		r.rep.SettleSkipped = err.Error()
		r.s.log.WarnContext(ctx, "settle skipped: the settle window cannot be checked against the source queue",
			"run_id", r.rep.RunID, "source", r.src.Name, "error_kind", quarantine.ErrorKind(err))
		if r.req.Action == ActionSettle {
			return fmt.Errorf("settle window: %w", err)
		}
		return nil
	}
	r.rep.SettleWindowSeconds = int64(window / time.Second)
	for _, id := range ids[:min(len(ids), MaxSettlePerRun)] {
		if r.deadlineNear(ctx) {
			r.rep.Stopped = StoppedDeadline
			return nil
		}
		rec, err := r.s.store.Get(ctx, id)
		if errors.Is(err, quarantine.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read record: %w", err)
		}
		next, err := rec.Settle(r.s.now(), window)
		if quarantine.IsIntegrityFailure(err) {
			if err := r.setAside(ctx, rec, err); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			continue // not yet due, or changed
		}
		if r.rep.DryRun {
			r.note(&r.rep.Settled, id)
			continue
		}
		if err := r.s.store.Replace(ctx, rec, next); err != nil {
			if errors.Is(err, quarantine.ErrVersionConflict) {
				continue // it came back meanwhile
			}
			if errors.Is(err, quarantine.ErrHeld) {
				r.note(&r.rep.Integrity, id) // set aside meanwhile
				continue
			}
			return fmt.Errorf("settle record: %w", err)
		}
		r.note(&r.rep.Settled, id)
	}
	return nil
}
