package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

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
		if err := r.s.store.Replace(ctx, next, rec.Version); err != nil {
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
