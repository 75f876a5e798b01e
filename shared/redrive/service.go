package redrive

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/time/rate"

	"github.com/dlqquarantine/dlqq/shared/quarantine"
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
	rep.FinishedAt = s.now().UTC()
	s.log.InfoContext(ctx, "redrive run finished",
		"run_id", rep.RunID, "action", rep.Action, "source", rep.Source, "dry_run", rep.DryRun,
		"redriven", rep.Redriven.Count, "skipped", rep.Skipped.Count, "held", rep.Held.Count,
		"parked", rep.Parked.Count, "failed", rep.Failed.Count, "settled", rep.Settled.Count,
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
	case errors.As(err, &ce):
		return nil, &quarantine.CorrectionError{Problems: ce.Problems}
	case errors.Is(err, quarantine.ErrCorrectionConflict):
		return nil, quarantine.ErrCorrectionConflict
	case errors.Is(err, quarantine.ErrNotFound):
		return nil, &RequestError{Problems: []string{"ids[0] names no record"}}
	}
	return nil, err
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
	if r.rep.Remaining > 0 {
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

func (r *run) deadlineNear(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < r.s.cfg.DeadlineMargin
}

// candidates calls yield with the id of every record the request selects:
// the explicit ids, or the status index for QUARANTINED (and PARKED when
// asked), plus REDRIVING records whose lease expired.
func (r *run) candidates(ctx context.Context, yield func(id string) (bool, error)) error {
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
	o.add(id)
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

// batch runs the replay path for up to BatchSize records.
func (r *run) batch(ctx context.Context, ids []string) error {
	// One batch read instead of a read per record, where the store can.
	var prefetched map[string]*quarantine.Record
	if bg, ok := r.s.store.(quarantine.BatchGetter); ok {
		var err error
		if prefetched, err = bg.GetMany(ctx, ids); err != nil {
			return fmt.Errorf("read records: %w", err)
		}
	}
	slots := make([]*claimed, len(ids))
	if err := each(len(ids), func(i int) (err error) {
		slots[i], err = r.claim(ctx, ids[i], prefetched)
		return err
	}); err != nil {
		return err
	}
	var ready []*claimed
	for _, c := range slots {
		if c != nil {
			ready = append(ready, c)
		}
	}
	if len(ready) == 0 || r.rep.DryRun {
		return nil
	}
	return r.send(ctx, ready)
}

// claim reads one record (or takes it from prefetched) and takes it (or, in
// a dry run, says what would happen). It returns nil when the record is not
// to be sent.
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
	if ok, _ := r.eligible(rec); !ok {
		r.note(&r.rep.Skipped, id)
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
		if !r.rep.DryRun {
			parked, perr := rec.ParkPoison(actor, now)
			if perr != nil {
				return nil, perr
			}
			if perr := s.store.Replace(ctx, parked, rec.Version); perr != nil {
				if errors.Is(perr, quarantine.ErrVersionConflict) {
					r.note(&r.rep.Skipped, id)
					return nil, nil
				}
				return nil, fmt.Errorf("park record: %w", perr)
			}
		}
		r.note(&r.rep.Parked, id)
		return nil, nil
	case errors.Is(err, quarantine.ErrNotClaimable):
		r.note(&r.rep.Skipped, id)
		return nil, nil
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
	if err := s.store.Replace(ctx, next, rec.Version); err != nil {
		if errors.Is(err, quarantine.ErrVersionConflict) {
			r.note(&r.rep.Skipped, id) // another run claimed it first
			return nil, nil
		}
		return nil, fmt.Errorf("claim record: %w", err)
	}
	if berr != nil || aerr != nil {
		return nil, r.release(ctx, next, "payload unreadable: "+quarantine.ErrorKind(errors.Join(berr, aerr)), nil, &r.rep.Failed)
	}
	if !verdict.Valid {
		// The same gate as ingest: a payload that fails the current schema
		// is never sent.
		c := quarantine.Classify(r.src, nil, verdict)
		return nil, r.release(ctx, next, "held: "+c.Reason, &c, &r.rep.Held)
	}
	msgAttrs := messageAttributes(attrs, next)
	return &claimed{rec: next, body: body, attrs: msgAttrs, size: messageSize(body, msgAttrs)}, nil
}

// release gives a claim back, retrying on concurrent changes.
func (r *run) release(ctx context.Context, rec *quarantine.Record, reason string, held *quarantine.Classification, out *Outcome) error {
	for attempt := 0; ; attempt++ {
		next, err := rec.Release(r.req.RequestedBy, reason, r.s.now(), held)
		if errors.Is(err, quarantine.ErrNotClaimable) {
			r.note(out, rec.DLQID) // it changed hands (its message came back, say)
			return nil
		}
		if err != nil {
			return err
		}
		err = r.s.store.Replace(ctx, next, rec.Version)
		if err == nil {
			r.note(out, rec.DLQID)
			return nil
		}
		if !errors.Is(err, quarantine.ErrVersionConflict) || attempt >= 5 {
			return fmt.Errorf("release claim: %w", err)
		}
		if rec, err = r.s.store.Get(ctx, rec.DLQID); err != nil {
			return fmt.Errorf("release claim: %w", err)
		}
	}
}

// send replays the claimed records in SendMessageBatch calls of at most 10
// entries and 1 MiB, retrying failed entries with jittered backoff, then
// marks each record REDRIVEN or releases its claim.
func (r *run) send(ctx context.Context, ready []*claimed) error {
	url, err := r.queue(ctx)
	if err != nil {
		for _, c := range ready {
			if rerr := r.release(ctx, c.rec, "source queue unavailable", nil, &r.rep.Failed); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return nil
	}
	for len(ready) > 0 {
		n, bytes := 0, 0
		for n < len(ready) && n < MaxEntriesPerCall && bytes+ready[n].size <= MaxCallBytes {
			bytes += ready[n].size
			n++
		}
		if n == 0 { // one message above the call limit can never be sent
			if err := r.release(ctx, ready[0].rec, "message exceeds the SQS size limit", nil, &r.rep.Failed); err != nil {
				return err
			}
			ready = ready[1:]
			continue
		}
		if err := r.sendCall(ctx, url, ready[:n]); err != nil {
			return err
		}
		ready = ready[n:]
	}
	return nil
}

func (r *run) sendCall(ctx context.Context, url string, group []*claimed) error {
	if r.limiter != nil {
		if err := r.limiter.WaitN(ctx, len(group)); err != nil {
			return err
		}
	}
	pending := map[string]*claimed{}
	for i, c := range group {
		pending[strconv.Itoa(i)] = c
	}
	sent := map[string]string{} // entry id → message id
	lastCode := map[string]string{}
	backoff := retry.NewExponentialJitterBackoff(r.s.cfg.MaxBackoff)
	for attempt := 1; len(pending) > 0 && attempt <= r.s.cfg.SendAttempts; attempt++ {
		if attempt > 1 {
			d, _ := backoff.BackoffDelay(attempt-1, nil)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
		for id, c := range pending {
			in.Entries = append(in.Entries, r.entry(id, c))
		}
		out, err := r.s.sqs.SendMessageBatch(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for id := range pending {
				lastCode[id] = quarantine.ErrorKind(err)
			}
			continue
		}
		for _, ok := range out.Successful {
			id := aws.ToString(ok.Id)
			if _, mine := pending[id]; mine {
				sent[id] = aws.ToString(ok.MessageId)
				delete(pending, id)
			}
		}
		for _, f := range out.Failed {
			id := aws.ToString(f.Id)
			lastCode[id] = aws.ToString(f.Code)
			if f.SenderFault {
				// The request itself is wrong: retrying cannot help.
				if c, mine := pending[id]; mine {
					delete(pending, id)
					if err := r.release(ctx, c.rec, "send refused: "+aws.ToString(f.Code), nil, &r.rep.Failed); err != nil {
						return err
					}
				}
			}
		}
	}
	for id, c := range pending {
		if err := r.release(ctx, c.rec, "send failed after retries: "+lastCode[id], nil, &r.rep.Failed); err != nil {
			return err
		}
	}
	var marks []string
	for id := range sent {
		marks = append(marks, id)
	}
	return each(len(marks), func(i int) error {
		return r.mark(ctx, group[entryIndex(marks[i])], sent[marks[i]])
	})
}

// entryIndex turns a batch entry id back into the index it was made from.
func entryIndex(id string) int {
	i, _ := strconv.Atoi(id)
	return i
}

// mark records a completed send. If the record changed since the claim (its
// message already failed again and came back), the send is still written to
// its history.
func (r *run) mark(ctx context.Context, c *claimed, messageID string) error {
	rec := c.rec
	round := rec.RedriveCount
	for attempt := 0; ; attempt++ {
		var next *quarantine.Record
		var err error
		if rec.Status == quarantine.StatusRedriving && rec.RedriveCount == round {
			next, err = rec.MarkRedriven(r.req.RequestedBy, messageID, r.s.now())
		} else {
			next, err = rec.NoteSent(r.req.RequestedBy, messageID, round, r.s.now())
		}
		if err != nil {
			return err
		}
		err = r.s.store.Replace(ctx, next, rec.Version)
		if err == nil {
			r.note(&r.rep.Redriven, rec.DLQID)
			return nil
		}
		if !errors.Is(err, quarantine.ErrVersionConflict) || attempt >= 10 {
			return fmt.Errorf("mark redriven: %w", err)
		}
		if rec, err = r.s.store.Get(ctx, rec.DLQID); err != nil {
			return fmt.Errorf("mark redriven: %w", err)
		}
	}
}

func (r *run) entry(id string, c *claimed) sqstypes.SendMessageBatchRequestEntry {
	e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(c.body)), MessageAttributes: c.attrs}
	if strings.HasSuffix(r.src.Name, ".fifo") {
		group := c.rec.MessageGroupID
		if group == "" {
			group = c.rec.IdempotencyKey
		}
		e.MessageGroupId = aws.String(group)
		e.MessageDeduplicationId = aws.String(DeduplicationID(c.rec.DLQID, c.rec.RedriveCount))
	}
	return e
}

// DeduplicationID is the FIFO deduplication id of one replay round: stable
// across retries and lease takeovers of that round, new for the next.
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
		if err != nil {
			continue // not yet due, or changed
		}
		if r.rep.DryRun {
			r.note(&r.rep.Settled, id)
			continue
		}
		if err := r.s.store.Replace(ctx, next, rec.Version); err != nil {
			if errors.Is(err, quarantine.ErrVersionConflict) {
				continue // it came back meanwhile
			}
			return fmt.Errorf("settle record: %w", err)
		}
		r.note(&r.rep.Settled, id)
	}
	return nil
}
