package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// MaxSettlePerRun bounds the records one run settles.
const MaxSettlePerRun = 5000

// settle resolves this source's REDRIVEN records whose replay stayed away
// from the DLQ for the settle window, at most MaxSettlePerRun a run.
func (r *run) settle(ctx context.Context) error {
	ids, err := r.redriven(ctx)
	if err != nil {
		return err
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
	ids = ids[:min(len(ids), MaxSettlePerRun)]
	for start := 0; start < len(ids); start += settleBatch {
		if r.deadlineNear(ctx) {
			r.rep.Stopped = StoppedDeadline
			return nil
		}
		if err := r.settleBatch(ctx, ids[start:min(start+settleBatch, len(ids))], window); err != nil {
			return err
		}
	}
	return nil
}

// settleBatch is how many records one consistent batch read fetches for
// settling, and one writer-proof MAC announces.
const settleBatch = 100

// settleBatch reads ids in one consistent batch read, decides each
// record's settle at one clock reading, announces the versions that makes
// (one writer-proof MAC) and writes them one by one.
func (r *run) settleBatch(ctx context.Context, ids []string, window time.Duration) error {
	recs, err := r.s.store.GetMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	now := r.s.now()
	type decided struct {
		next *quarantine.Record
		err  error
	}
	plans := make(map[string]decided, len(ids))
	var planned []*quarantine.Record
	for _, id := range ids {
		if rec := recs[id]; rec != nil {
			w, ok := r.windowFor(ctx, rec, window)
			if !ok {
				delete(recs, id) // its target's window is unknown: not settled this run
				continue
			}
			next, err := rec.Settle(now, w)
			plans[id] = decided{next, err}
			if err == nil && !r.rep.DryRun {
				planned = append(planned, next)
			}
		}
	}
	if err := quarantine.Announce(ctx, r.s.store, planned); err != nil {
		r.s.log.WarnContext(ctx, "settles not announced: each is proved on its own", "run_id", r.rep.RunID, "error_kind", quarantine.ErrorKind(err))
	}
	for _, id := range ids {
		if r.deadlineNear(ctx) {
			r.rep.Stopped = StoppedDeadline
			return nil
		}
		rec := recs[id]
		if rec == nil {
			continue // gone since it was listed
		}
		if err := r.settleOne(ctx, rec, plans[id].next, plans[id].err); err != nil {
			return err
		}
	}
	return nil
}

// windowFor is the settle window of rec: window, or, for a record replayed
// into another registered queue, the longer of window and that queue's
// (its replay comes back through that queue's DLQ). ok is false when that
// window cannot be known (the target is no longer registered, or its
// attributes cannot be read): the record is not settled this run.
func (r *run) windowFor(ctx context.Context, rec *quarantine.Record, window time.Duration) (time.Duration, bool) {
	t := rec.LastTarget()
	if t == "" || t == r.src.Name {
		return window, true
	}
	ts := r.s.sources[t]
	if ts == nil {
		r.s.log.WarnContext(ctx, "not settled: replayed into a queue no longer registered", "run_id", r.rep.RunID, "record", quarantine.LogRef(rec.DLQID))
		return 0, false
	}
	tw, err := r.settleWindowOf(ctx, ts)
	if err != nil {
		r.s.log.WarnContext(ctx, "not settled: the target queue's settle window cannot be read", "run_id", r.rep.RunID,
			"record", quarantine.LogRef(rec.DLQID), "error_kind", quarantine.ErrorKind(err))
		return 0, false
	}
	return max(window, tw), true
}

// redriven lists the ids of this source's REDRIVEN records, a page past
// MaxSettlePerRun at most.
func (r *run) redriven(ctx context.Context) ([]string, error) {
	var ids []string
	q := quarantine.ListQuery{Status: quarantine.StatusRedriven, Source: r.src.Name, Limit: 1000}
	for page, err := range quarantine.Pages(ctx, r.s.lister, q) {
		if err != nil {
			return nil, fmt.Errorf("list redriven records: %w", err)
		}
		ids = append(ids, page.IDs...)
		if len(ids) >= MaxSettlePerRun {
			break
		}
	}
	return ids, nil
}

// settleOne writes next, rec's settled successor (err: why rec does not
// settle). A record not yet due, or changed since it was listed, is left
// as it is; an error ends the settle step. It writes once, on the version
// read, not through the store's Update: a record that changed meanwhile
// (it came back, say) is the next run's to look at, never settled on a
// retry.
func (r *run) settleOne(ctx context.Context, rec, next *quarantine.Record, err error) error {
	id := rec.DLQID
	if quarantine.IsIntegrityFailure(err) {
		return r.setAside(ctx, rec, err)
	}
	if err != nil {
		return nil // not yet due, or changed
	}
	if r.rep.DryRun {
		r.note(&r.rep.Settled, id)
		return nil
	}
	if err := r.s.store.Replace(ctx, rec, next); err != nil {
		if errors.Is(err, quarantine.ErrVersionConflict) {
			return nil // it came back meanwhile
		}
		if errors.Is(err, quarantine.ErrHeld) {
			r.note(&r.rep.Integrity, id) // set aside meanwhile
			return nil
		}
		return fmt.Errorf("settle record: %w", err)
	}
	r.note(&r.rep.Settled, id)
	return nil
}
