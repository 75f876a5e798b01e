package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Handle is the Lambda entry point: a JSON request in, a report out. A bad
// request is an error (a function error the caller sees), never a partial run.
//
// Handle is a direct invoke: AWS did not verify who asked, so the
// requester recorded is "unverified:" and the name given (the schedules'
// own names on their settle and policies runs stay as they are: those
// runs record no requester in any record).
func (s *Service) Handle(ctx context.Context, raw []byte) (*Report, error) {
	req, err := ParseRequest(raw)
	if err != nil {
		return nil, err
	}
	if !(quarantine.ScheduleActor(req.RequestedBy) && (req.Action == ActionSettle || req.Action == ActionPolicies)) {
		// Kept whole in the history: never clipped after the prefix.
		if n := quarantine.MaxActorBytes - len(identity.UnverifiedPrefix); len(req.RequestedBy) > n {
			return nil, &RequestError{Problems: []string{fmt.Sprintf("requested_by is longer than %d bytes (the history records it as %s and the name)", n, identity.UnverifiedPrefix)}}
		}
		req.RequestedBy = identity.Unverified(req.RequestedBy)
	}
	return s.Run(ctx, req)
}

// LambdaHandler adapts Handle to lambda.Start's signature. The runtime logs
// a function error's text, so an operational error is returned by its kind
// only (its text may name a record, and so an idempotency key); a request
// error, which names request fields, is returned whole.
func (s *Service) LambdaHandler(ctx context.Context, raw json.RawMessage) (*Report, error) {
	if err := s.checkLease(ctx); err != nil {
		return nil, err
	}
	rep, err := s.Handle(ctx, raw)
	var re *RequestError
	var ce *quarantine.CorrectionError
	var cfe *ConfigError
	var he *HeldError
	var te *TooLargeError
	var pe *policy.Error
	var fe *ForbiddenError
	// Only an error that is one of these kinds as a whole passes: a joined
	// error of a run may carry other records' ids. A policy's refusal names
	// its settings and state only.
	whole := func(target any) bool { return errors.As(err, target) && !isJoined(err) }
	if err != nil && !whole(&re) && !whole(&ce) && !whole(&cfe) && !whole(&he) && !whole(&te) && !whole(&pe) && !whole(&fe) &&
		!errors.Is(err, quarantine.ErrCorrectionConflict) && !errors.Is(err, ErrRecordChanged) && !errors.Is(err, ErrPolicyChanged) {
		return rep, fmt.Errorf("redrive failed: %s (the run's log line has its counts)", quarantine.ErrorKind(err))
	}
	return rep, err
}

// checkLease refuses an invocation that could outlive its claims: the
// invocation's deadline is the function's timeout, and a claim that expired
// while its run still holds it would let another run send the record again.
func (s *Service) checkLease(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) >= s.cfg.Lease {
		return &ConfigError{Problem: fmt.Sprintf("LEASE_SECONDS (%s) must exceed the function timeout (this invocation has %s left)",
			s.cfg.Lease, time.Until(dl).Round(time.Second))}
	}
	return nil
}

// ConfigError is a configuration that makes every run unsafe; it names
// settings only, so a function error returns it whole.
type ConfigError struct{ Problem string }

func (e *ConfigError) Error() string { return "redrive misconfigured: " + e.Problem }

// HeldError is a correction or an operator action (park, unpark, read)
// refused because its record fails verification; the record was set aside
// by an integrity hold, as found. It names the reason only.
type HeldError struct{ Reason string }

func (e *HeldError) Error() string {
	return "ids[0] (" + e.Reason + "): " + quarantine.ErrHeld.Error()
}

// Unwrap makes errors.Is(err, quarantine.ErrHeld) hold.
func (e *HeldError) Unwrap() error { return quarantine.ErrHeld }

// isJoined reports whether err joins several errors.
func isJoined(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}
