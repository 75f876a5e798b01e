package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// claimed is one record holding a claim, with what it will send.
type claimed struct {
	rec   *quarantine.Record
	body  []byte
	attrs map[string]sqstypes.MessageAttributeValue
	size  int
}

// batch runs the replay path for up to BatchSize records. One record's
// failure is that record's outcome, never the batch's: the records already
// claimed are still sent, marked or released.
// It returns how many of ids it took up (at least one): the others, past
// MaxBatchBytes of payload, are the next batch's.
func (r *run) batch(ctx context.Context, ids []string) (int, error) {
	ready, n, err := r.claimBatch(ctx, ids)
	if err != nil || len(ready) == 0 {
		return n, err
	}
	r.send(ctx, ready)
	return n, nil
}

// MaxBatchBytes is the most payload one batch takes up: a batch of large
// bodies (50 of up to 1 MiB each) is cut short, and the rest of its ids
// go to the next batch, so that a run holds at most this much of bodies
// claimed and not yet sent (TestPeakMemoryFitsTheTemplate). A record
// larger than this is a batch of its own.
const MaxBatchBytes = 16 << 20

// replaySize is the size of what a replay of rec sends, as the record
// says: the body (its latest correction's, else its own) and the message
// attributes (claim-checked or inline), which SQS counts in a message's
// size too and a claim holds as long as the body.
func replaySize(rec *quarantine.Record) int64 {
	return bodySize(rec) + attributesSize(rec)
}

func bodySize(rec *quarantine.Record) int64 {
	if c := rec.Latest(); c != nil {
		if c.BodyRef != nil {
			return refSize(c.BodyRef)
		}
		return int64(len(c.Body))
	}
	if rec.BodyRef != nil {
		return refSize(rec.BodyRef)
	}
	return int64(len(rec.Body))
}

func attributesSize(rec *quarantine.Record) int64 {
	if rec.AttributesRef != nil {
		return refSize(rec.AttributesRef)
	}
	var n int64
	for name, a := range rec.Attributes {
		n += int64(len(name) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue))
	}
	return n
}

// refSize is the size a claim-check reference says, or, when it says
// none (a record written by hand), the largest body SQS takes: the batch
// bound never rests on a size the record does not give.
func refSize(ref *quarantine.ObjectRef) int64 {
	if ref.Size <= 0 {
		return MaxCallBytes
	}
	return ref.Size
}

// withinBytes is how many of ids, read in prefetched, fit in MaxBatchBytes
// of payload, in order (at least one).
func withinBytes(ids []string, prefetched map[string]*quarantine.Record) int {
	var total int64
	for i, id := range ids {
		if rec := prefetched[id]; rec != nil {
			total += replaySize(rec)
		}
		if total > MaxBatchBytes && i > 0 {
			return i
		}
	}
	return len(ids)
}

// claimBatch reads and claims the records of ids, up to MaxBatchBytes of
// payload, and returns the claimed ones that are to be sent (none in a
// dry run), FIFO groups in order, and how many of ids it took up.
func (r *run) claimBatch(ctx context.Context, ids []string) ([]*claimed, int, error) {
	// One batch read instead of a read per record.
	prefetched, err := r.s.store.GetMany(ctx, ids)
	if err != nil {
		return nil, len(ids), fmt.Errorf("read records: %w", err)
	}
	if !r.rep.DryRun {
		ids = ids[:withinBytes(ids, prefetched)]
	}
	// The batch's claim decisions are made first (one clock reading) and
	// the versions they write announced: one writer-proof MAC for the
	// batch. A decision whose input changes meanwhile (a FIFO group
	// blocked by an earlier failure) is made again, and its write proved
	// on its own.
	now := r.s.now()
	decided := r.announceClaims(ctx, ids, prefetched, now)
	slots := make([]*claimed, len(ids))
	_ = each(len(ids), func(i int) error {
		c, err := r.claim(ctx, ids[i], prefetched, decided[i], now)
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
		return nil, len(ids), nil
	}
	if r.fifo() {
		inGroupOrder(ready)
	}
	return ready, len(ids), nil
}

// claim takes the record read for id in prefetched (or, in a dry run, says
// what would happen). It returns nil when the record is not to be sent; an
// error is this record's failure only.
// d is the decision announceClaims made for it, used unless rec's FIFO
// group was blocked since.
func (r *run) claim(ctx context.Context, id string, prefetched map[string]*quarantine.Record, d *decided, now time.Time) (*claimed, error) {
	rec := prefetched[id]
	if rec == nil {
		r.note(&r.rep.Skipped, id)
		return nil, nil
	}
	if d == nil || d.blocked != r.isBlocked(rec) {
		d = r.decide(rec, now)
	}
	return r.applyClaim(ctx, id, rec, d.claimDecision)
}

// decided is a claim decision and the FIFO block it was made under.
type decided struct {
	claimDecision
	blocked bool
}

// decide is rec's claim decision at now.
func (r *run) decide(rec *quarantine.Record, now time.Time) *decided {
	blocked := r.isBlocked(rec)
	return &decided{decideClaim(rec, claimInput{req: r.req, source: r.src.Name, sourceARN: r.src.ARN, dryRun: r.rep.DryRun, blocked: blocked, now: now, lease: r.s.cfg.Lease}), blocked}
}

// announceClaims makes the claim decision of each of ids at now and
// announces the versions they write (claims, parks, expired claims given
// back): one writer-proof MAC for the batch. A failure costs only that:
// each write proves itself.
func (r *run) announceClaims(ctx context.Context, ids []string, prefetched map[string]*quarantine.Record, now time.Time) []*decided {
	out := make([]*decided, len(ids))
	var planned []*quarantine.Record
	for i, id := range ids {
		if rec := prefetched[id]; rec != nil {
			out[i] = r.decide(rec, now)
			if n := out[i].next; n != nil && !r.rep.DryRun {
				planned = append(planned, n)
			}
		}
	}
	if err := quarantine.Announce(ctx, r.s.store, planned); err != nil {
		r.s.log.WarnContext(ctx, "claims not announced: each is proved on its own", "run_id", r.rep.RunID, "error_kind", quarantine.ErrorKind(err))
	}
	return out
}

// applyClaim carries out d, the decision for rec (read as id): it writes
// what d says to write (nothing in a dry run) and notes the outcome.
func (r *run) applyClaim(ctx context.Context, id string, rec *quarantine.Record, d claimDecision) (*claimed, error) {
	switch d.action {
	case claimHold:
		return nil, r.setAside(ctx, rec, d.cause)
	case claimReturn:
		return nil, r.writeParked(ctx, id, rec, d.next, "return expired parked claim")
	case claimSkip:
		if d.block {
			r.block(rec)
		}
		r.note(&r.rep.Skipped, id)
		return nil, nil
	case claimDefer:
		r.note(&r.rep.Deferred, id)
		return nil, nil
	case claimPark:
		return nil, r.writeParked(ctx, id, rec, d.next, "park record")
	case claimFail:
		return nil, d.cause
	}
	return r.take(ctx, id, rec, d.next)
}

// writeParked writes parked, rec's PARKED successor (parked at its cap,
// or an expired approved claim given back), and notes the record Parked;
// a dry run writes nothing. Like the claim, it writes once, on the version
// read: a record changed since is Skipped (the next run reads it again),
// one set aside meanwhile is counted under Integrity. Either way its FIFO
// group sends nothing more this run, as after a claim that met the same:
// the record may be in flight in another run, or held.
func (r *run) writeParked(ctx context.Context, id string, rec, parked *quarantine.Record, op string) error {
	if !r.rep.DryRun {
		if err := r.s.store.Replace(ctx, rec, parked); err != nil {
			if errors.Is(err, quarantine.ErrVersionConflict) {
				r.note(&r.rep.Skipped, id)
				r.block(rec)
				return nil
			}
			if errors.Is(err, quarantine.ErrHeld) {
				r.note(&r.rep.Integrity, id) // set aside meanwhile
				r.block(rec)
				return nil
			}
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	r.note(&r.rep.Parked, id)
	return nil
}

// take reads rec's payload and claims it (next is its claimed successor),
// then gives the claim back if the payload cannot be sent. A dry run only
// says what would happen.
func (r *run) take(ctx context.Context, id string, rec, next *quarantine.Record) (*claimed, error) {
	s := r.s
	// A corrected record sends its latest correction, never the original.
	body, berr := quarantine.ReplayBody(ctx, s.payloads, rec)
	attrs, aerr := quarantine.LoadAttributes(ctx, s.payloads, rec)
	p := r.decidePayload(body, berr, aerr)
	if p.action == payloadHold {
		// A claim-checked object does not match its sealed hash: set the
		// record aside unclaimed, as found.
		return nil, r.setAside(ctx, rec, p.cause)
	}
	if p.action == payloadSend && r.target != nil && aerr == nil {
		if _, ok := messageAttributes(attrs, next)[quarantine.AttrRecordID]; !ok {
			// Its original attributes fill SQS's 10: the replay would go
			// without dlq-record-id, and its failure in the target could
			// not come back to this record (it would be filed as a new
			// record of the target, this one settled RESOLVED). Never
			// claimed, so it counts toward nothing; its group waits.
			r.block(rec)
			r.noteNoRoom(id)
			return nil, nil
		}
	}
	if r.rep.DryRun {
		r.note(p.dryOutcome(r.rep), id)
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
	switch p.action {
	case payloadPark:
		r.block(next)
		return nil, r.park(ctx, next, p.reason)
	case payloadRelease:
		r.block(next)
		return nil, r.release(ctx, next, p.reason, nil, &r.rep.Failed)
	case payloadInvalid:
		r.block(next) // it waits for a correction; its group waits with it
		return nil, r.release(ctx, next, p.reason, p.class, &r.rep.Held)
	}
	msgAttrs := messageAttributes(attrs, next)
	return &claimed{rec: next, body: body, attrs: msgAttrs, size: messageSize(body, msgAttrs)}, nil
}

// decidePayload checks a record's payload against its source's gate (and
// the target's, replayed into another queue), within the service's decode
// budget: the claims of a batch run Concurrency at once, and a body's
// decoded tree takes about ten times its size in memory.
func (r *run) decidePayload(body []byte, berr, aerr error) payloadDecision {
	defer r.s.decoding.Acquire(int64(len(body)))()
	p := decidePayload(r.src, body, berr, aerr)
	if p.action == payloadSend && r.target != nil {
		// Replayed into another queue, the payload must also pass that
		// source's gate: its consumer expects its schema.
		p = decidePayload(r.target, body, nil, nil)
		if p.action == payloadInvalid {
			p.reason = "held for target " + r.target.Name + ": " + p.reason
		}
	}
	return p
}

// setAside holds rec, which failed verification (cause), at the version
// read and exactly as found: it is never re-sealed, released or sent, and
// listings leave it out from now on, so it neither fills max_messages nor
// comes back every run. The hold is counted (IntegrityHolds; the new ones,
// NewIntegrityHolds, are alarmed). A dry run only reports it.
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

// rewrite applies step to the current version of rec and writes the
// result (the store's Update: re-read and retried on concurrent changes),
// noting the record under out. A record that left REDRIVING meanwhile (its
// message came back, say) is noted under out unchanged.
func (r *run) rewrite(ctx context.Context, rec *quarantine.Record, out *Outcome, op string, step func(*quarantine.Record) (*quarantine.Record, error)) error {
	wrote, err := r.update(ctx, rec, op, step)
	if wrote || errors.Is(err, quarantine.ErrNotClaimable) {
		r.note(out, rec.DLQID) // written, or it changed hands
		return nil
	}
	return err
}

// update writes step's successor of rec, the version this run holds (read
// or written by it), through quarantine.UpdateFrom, which re-reads and
// retries on concurrent changes, and reports whether it was written. A version that fails
// verification is set aside as found, never re-sealed; one another run set
// aside meanwhile (ErrHeld) is counted under Integrity. step's own errors
// come back as they are, the store's wrapped in op.
func (r *run) update(ctx context.Context, rec *quarantine.Record, op string, step func(*quarantine.Record) (*quarantine.Record, error)) (bool, error) {
	id := rec.DLQID
	var read *quarantine.Record
	var stepErr error
	_, err := quarantine.UpdateFrom(ctx, r.s.store, rec, func(cur *quarantine.Record) (*quarantine.Record, error) {
		next, err := step(cur)
		read, stepErr = cur, err
		return next, err
	})
	switch {
	case err == nil:
		return true, nil
	case stepErr != nil && quarantine.IsIntegrityFailure(stepErr):
		return false, r.setAside(ctx, read, stepErr)
	case stepErr != nil:
		return false, stepErr
	case errors.Is(err, quarantine.ErrHeld):
		r.note(&r.rep.Integrity, id) // another run set it aside meanwhile
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", op, err)
}
