package redrive

import (
	"context"
	"errors"
	"fmt"

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
			if err := s.store.Replace(ctx, back, rec.Version); err != nil && !errors.Is(err, quarantine.ErrVersionConflict) {
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
			if perr := s.store.Replace(ctx, parked, rec.Version); perr != nil {
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
	if err := s.store.Replace(ctx, next, rec.Version); err != nil {
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
		err = r.s.store.Replace(ctx, next, rec.Version)
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
