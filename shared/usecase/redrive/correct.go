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
	rec, err := k.Correct(ctx, req.IDs[0], correctionRequest(req))
	rep.FinishedAt = s.now().UTC()
	if err == nil {
		rep.Corrected.add(rec.DLQID)
		c := *rec.Latest()
		c.Body = ""
		rep.Correction = &c
	}
	s.log.InfoContext(ctx, "correction finished", "run_id", rep.RunID, "action", rep.Action, "source", rep.Source,
		"record", quarantine.LogRef(req.IDs[0]), "corrected", rep.Corrected.Count, "error_kind", quarantine.ErrorKind(err))
	if err == nil {
		return rep, nil
	}
	return nil, s.correctionError(ctx, req, err)
}

func correctionRequest(req Request) quarantine.CorrectionRequest {
	return quarantine.CorrectionRequest{Actor: req.RequestedBy, Reason: req.Reason, Body: []byte(req.Payload), NewKey: req.NewKey}
}

// checkCorrection refuses, writing nothing, a correction that cannot run:
// a high-risk request is checked before it waits for a second person.
func (s *Service) checkCorrection(ctx context.Context, req Request, src *quarantine.Source) error {
	k := quarantine.Corrector{Store: s.store, Payloads: s.payloads, Now: s.now, Sources: map[string]*quarantine.Source{src.Name: src}, KeyAttribute: s.cfg.KeyAttribute}
	if err := k.Check(ctx, req.IDs[0], correctionRequest(req)); err != nil {
		return s.correctionError(ctx, req, err)
	}
	return nil
}

// correctionError is what the caller sees of a refused correction. The
// runtime logs a function error's text: leave the record id (an
// idempotency key, maybe a payload value) out of it.
func (s *Service) correctionError(ctx context.Context, req Request, err error) error {
	var ce *quarantine.CorrectionError
	switch {
	case quarantine.IsIntegrityFailure(err):
		return s.holdTampered(ctx, req.IDs[0], err)
	case errors.As(err, &ce):
		return &quarantine.CorrectionError{Problems: ce.Problems, Kind: ce.Kind}
	case errors.Is(err, quarantine.ErrCorrectionConflict):
		return quarantine.ErrCorrectionConflict
	case errors.Is(err, quarantine.ErrNotFound):
		return &RequestError{Problems: []string{"ids[0] names no record"}, Kind: quarantine.KindNotFound}
	}
	return err
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
