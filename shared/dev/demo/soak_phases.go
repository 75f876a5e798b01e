package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

var soakCleared = []string{"consumer|retries exhausted|v#", "allocation|lot under recall|v#"}

// redriveUntilDone alternates redrive runs, the consumer, ingest of what
// comes back, and settle runs, until a whole run finds nothing to replay and
// no record is in flight. Claims left by crashed runs are retaken once their
// lease expires.
func (s *soak) redriveUntilDone(ctx context.Context, c *consumer) error {
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("redrive did not finish: %w", ctx.Err())
		}
		var rr *redrive.Report
		crashed, err := s.invoke(ctx, "redrive", func(ctx context.Context, cl *awsclients.Clients) error {
			svc, err := s.fns.NewRedrive(cl, s.redriveConfig)
			if err != nil {
				return err
			}
			rr, err = svc.Run(ctx, redrive.Request{Source: s.fns.Source, RequestedBy: "soak", ClearedReasons: soakCleared,
				MaxMessages: s.o.PerInvocation, Approve: true})
			return err
		})
		if err := c.run(ctx); err != nil {
			return err
		}
		if err := waitEmpty(ctx, s.st.Clients.SQS, s.st.QueueURLs["DeadLetterQueue"]); err != nil {
			return err
		}
		time.Sleep(s.fns.Settle + 100*time.Millisecond)
		settleCrashed, settleErr := s.invoke(ctx, "settle", func(ctx context.Context, cl *awsclients.Clients) error {
			svc, err := s.fns.NewRedrive(cl, s.redriveConfig)
			if err != nil {
				return err
			}
			_, err = svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: s.fns.Source, RequestedBy: "schedule:settle"})
			return err
		})
		if crashed || err != nil || settleCrashed || settleErr != nil ||
			rr.Redriven.Count+rr.Parked.Count+rr.Failed.Count+rr.Held.Count+rr.Remaining > 0 {
			continue
		}
		busy, err := s.inFlight(ctx)
		if err != nil {
			return err
		}
		if !busy {
			return nil
		}
		time.Sleep(s.fns.Lease) // crashed runs' claims hold until their lease expires
	}
}

// redriveConfig applies the soak's backoff cap to redrive's own retries of
// failed batch entries too.
func (s *soak) redriveConfig(c *redrive.Config) {
	if s.o.MaxBackoff > 0 {
		c.MaxBackoff = s.o.MaxBackoff
	}
}

func (s *soak) sweepPerRun() int { return max(s.o.PerInvocation/20, 1) }

// inFlight reports whether any record is REDRIVING or REDRIVEN.
func (s *soak) inFlight(ctx context.Context) (bool, error) {
	for _, st := range []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusRedriven} {
		if found, err := s.anyListed(ctx, st); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// sweepUntilDone runs sweeper processes until a whole run archives nothing,
// fails nothing and no record is left PARKED.
func (s *soak) sweepUntilDone(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("sweeper did not finish: %w", ctx.Err())
		}
		var sr *sweeper.Report
		crashed, err := s.invoke(ctx, "sweeper", func(ctx context.Context, cl *awsclients.Clients) error {
			sw, err := s.fns.NewSweeper(cl, func(c *sweeper.Config) { c.MaxPerRun = s.sweepPerRun() })
			if err != nil {
				return err
			}
			sr, err = sw.Run(ctx)
			return err
		})
		if crashed || err != nil || len(sr.Archived) > 0 || sr.Failed > 0 || sr.Remaining > 0 {
			continue
		}
		parked, err := s.parkedLeft(ctx)
		if err != nil || !parked {
			return err
		}
	}
}

// parkedLeft reports whether any record is PARKED.
func (s *soak) parkedLeft(ctx context.Context) (bool, error) {
	return s.anyListed(ctx, quarantine.StatusParked)
}

// anyListed reports whether the source has a record in status. It pages
// until an entry or the last page: the store filters (source, holds) after
// Limit, as DynamoDB applies a FilterExpression after Limit, so an empty
// page with a cursor says nothing of the pages behind it.
func (s *soak) anyListed(ctx context.Context, status quarantine.Status) (bool, error) {
	for page, err := range quarantine.Pages(ctx, s.lister, quarantine.ListQuery{Status: status, Source: s.fns.Source, Limit: 1}) {
		if err != nil {
			return false, err
		}
		if len(page.IDs) > 0 {
			return true, nil
		}
	}
	return false, nil
}
