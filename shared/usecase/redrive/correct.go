package redrive

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// correct stores a correction of the one record in req.IDs. A refusal
// (*quarantine.CorrectionError) or a lost race (quarantine.ErrCorrectionConflict)
// changes nothing.
func (s *Service) correct(ctx context.Context, req Request, src *quarantine.Source, rep *Report) (*Report, error) {
	k := quarantine.Corrector{Store: s.store, Payloads: s.payloads, Now: s.now, Sources: map[string]*quarantine.Source{src.Name: src}, KeyAttribute: s.cfg.KeyAttribute}
	rec, err := k.Correct(ctx, req.IDs[0], quarantine.CorrectionRequest{Actor: req.RequestedBy, Reason: req.Reason, Body: []byte(req.Payload), NewKey: req.NewKey})
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
		return nil, &quarantine.CorrectionError{Problems: ce.Problems, Kind: ce.Kind}
	case errors.Is(err, quarantine.ErrCorrectionConflict):
		return nil, quarantine.ErrCorrectionConflict
	case errors.Is(err, quarantine.ErrNotFound):
		return nil, &RequestError{Problems: []string{"ids[0] names no record"}, Kind: quarantine.KindNotFound}
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
