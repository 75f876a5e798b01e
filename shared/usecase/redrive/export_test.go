package redrive

import (
	"context"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/identity"
)

// RunVerified runs req as the operator endpoint does for a caller AWS
// verified as p (OperatorHandler without the HTTP event), so that tests
// keep the run's typed errors.
func RunVerified(ctx context.Context, s *Service, req Request, p identity.Principal) (*Report, error) {
	req.RequestedBy, req.verified = p.Actor(), &p
	return s.Run(ctx, req)
}

// SetTimeLeft makes s read the time left before a deadline from f (a
// virtual clock) instead of the wall clock.
func SetTimeLeft(s *Service, f func(deadline time.Time) time.Duration) *Service {
	s.timeLeft = f
	return s
}
