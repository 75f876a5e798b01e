package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
)

// MaxSettlePerRun bounds the records one run settles.
const MaxSettlePerRun = 5000

// settle resolves this source's REDRIVEN records whose replay stayed away
// from the DLQ for the settle window, at most MaxSettlePerRun a run. It
// lists only the records in REDRIVEN for the window already (the index
// carries status_since), reads them in batches, and, in a run that also
// replays, stops after its share of the time (settleOverBudget): what is
// left is the next run's, or the scheduled settle's.
func (r *run) settle(ctx context.Context) error {
	// Never earlier than a failing replay can come back: if the source
	// queue's attributes cannot be read, settle nothing this run.
	if found, err := r.anyRedriven(ctx); err != nil || !found {
		return err // nothing to settle: the window is not needed
	}
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
	ids, err := r.redriven(ctx, r.s.now().Add(-window))
	if err != nil {
		return err
	}
	if r.deadlineNear(ctx) || r.settleOverBudget(ctx) {
		r.settleCut = true // the listing took the step's share of the time
		return nil
	}
	ids = ids[:min(len(ids), MaxSettlePerRun)]
	for start := 0; start < len(ids); start += settleBatch {
		if r.deadlineNear(ctx) {
			r.rep.Stopped = StoppedDeadline
			return nil
		}
		if r.settleOverBudget(ctx) {
			r.settleCut = true
			r.s.log.InfoContext(ctx, "settle paused: the rest of the invocation replays", "run_id", r.rep.RunID, "source", r.src.Name,
				"settle_left", len(ids)-start)
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
	// The writes, Concurrency at a time; the first error ends the step
	// (the others' writes stand).
	if r.deadlineNear(ctx) {
		r.rep.Stopped = StoppedDeadline
		return nil
	}
	var due []*quarantine.Record
	for _, id := range ids {
		if rec := recs[id]; rec != nil { // nil: gone since it was listed
			due = append(due, rec)
		}
	}
	errs := fanout.Run(ctx, len(due), Concurrency, func(_ context.Context, i int) error {
		return r.settleOne(ctx, due[i], plans[due[i].DLQID].next, plans[due[i].DLQID].err)
	})
	return errors.Join(errs...)
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

// redriven lists the ids of this source's records REDRIVEN since at most
// dueBy (the others cannot be due), a page past MaxSettlePerRun at most.
// DynamoDB filters after its page limit, so a page of records not yet due
// comes back empty: the listing reads at most maxSettlePages pages and
// stops at the step's share of the time; the records behind them are a
// later run's.
func (r *run) redriven(ctx context.Context, dueBy time.Time) ([]string, error) {
	var ids []string
	q := quarantine.ListQuery{Status: quarantine.StatusRedriven, Source: r.src.Name, StatusSinceBefore: dueBy, Limit: 1000}
	pages := 0
	for page, err := range quarantine.Pages(ctx, r.s.lister, q) {
		if err != nil {
			return nil, fmt.Errorf("list redriven records: %w", err)
		}
		ids = append(ids, page.IDs...)
		if pages++; len(ids) >= MaxSettlePerRun || pages >= maxSettlePages || r.deadlineNear(ctx) || r.settleOverBudget(ctx) {
			break
		}
	}
	return ids, nil
}

// maxSettlePages bounds the index pages (of up to 1,000 entries) one
// settle step reads.
const maxSettlePages = 50

// anyRedriven reports whether this source has a REDRIVEN record.
func (r *run) anyRedriven(ctx context.Context) (bool, error) {
	q := quarantine.ListQuery{Status: quarantine.StatusRedriven, Source: r.src.Name, Limit: 1}
	for page, err := range quarantine.Pages(ctx, r.s.lister, q) {
		if err != nil {
			return false, fmt.Errorf("list redriven records: %w", err)
		}
		if len(page.IDs) > 0 {
			return true, nil
		}
	}
	return false, nil
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
