package redrive

import (
	"context"
	"time"
)

// An invocation's time is planned once, when it starts, from the time its
// context gives it (a Lambda invocation's deadline is its function's
// timeout, 30 to 900 s): a 30 s function runs like a 900 s one, only
// shorter. Every run of the invocation (a policies tick makes several)
// keeps the same reserves:
//
//   - margin: the time kept after the last SendMessageBatch try to write
//     the outcomes (Config.DeadlineMargin, at most a sixth of the
//     invocation, at least minReserve);
//   - sendTimeout: one try of a SendMessageBatch call (Config.SendTimeout,
//     bounded the same way).
//
// A run claims a batch only while the batch's sends still fit after it:
// margin + sendTimeout + twice the longest batch so far (before the first
// batch, sendTimeout). What a run claimed it sends, unless SQS itself is
// slower than every batch before; a run with too little time for one
// batch claims nothing and says so (stopped: deadline, remaining).
//
// A run that also replays settles for at most a third of the time it
// starts with: settling never starves the replay (the scheduled settle
// takes the rest).

// minReserve is the least margin and send timeout a plan gives: an SQS
// SendMessageBatch takes tens of milliseconds, a record write a few.
const minReserve = time.Second

// budget is an invocation's time plan.
type budget struct {
	margin, sendTimeout time.Duration
}

type budgetKey struct{}

// withBudget returns ctx carrying the invocation's time plan: the one ctx
// already carries (a later run of the same invocation), else one sized
// from the time ctx has left now.
func (s *Service) withBudget(ctx context.Context) context.Context {
	if _, ok := ctx.Value(budgetKey{}).(budget); ok {
		return ctx
	}
	b := s.budgetOf(ctx)
	if left, ok := s.left(ctx); ok {
		share := max(left/6, minReserve)
		b.margin, b.sendTimeout = min(b.margin, share), min(b.sendTimeout, share)
	}
	return context.WithValue(ctx, budgetKey{}, b)
}

// budgetOf is ctx's plan (the configured reserves when it has none).
func (s *Service) budgetOf(ctx context.Context) budget {
	if b, ok := ctx.Value(budgetKey{}).(budget); ok {
		return b
	}
	return budget{margin: s.cfg.DeadlineMargin, sendTimeout: s.cfg.SendTimeout}
}

// left is the time until ctx's deadline (ok false: none). Tests replace
// timeLeft to run on a virtual clock.
func (s *Service) left(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	if s.timeLeft != nil {
		return s.timeLeft(dl), true
	}
	return time.Until(dl), true
}

// timeForACall reports whether one SendMessageBatch try fits before the
// margin the run keeps to write outcomes: no call is in flight when the
// invocation ends.
func (r *run) timeForACall(ctx context.Context) bool {
	left, ok := r.s.left(ctx)
	return !ok || left > r.budget.sendTimeout+r.budget.margin
}

// deadlineNear reports whether only the margin is left.
func (r *run) deadlineNear(ctx context.Context) bool {
	left, ok := r.s.left(ctx)
	return ok && left < r.budget.margin
}

// timeToClaim reports whether a batch claimed now can still be sent: the
// margin, one call's timeout and twice the longest batch so far (one
// call's timeout before the first) are left.
func (r *run) timeToClaim(ctx context.Context) bool {
	left, ok := r.s.left(ctx)
	if !ok {
		return true
	}
	batch := r.budget.sendTimeout
	if r.longestBatch > 0 {
		batch = 2 * r.longestBatch
	} else if r.limiter != nil && r.limiter.Limit() > 0 {
		// A rate limit spreads a batch's sends: what it makes them wait.
		batch += time.Duration(float64(r.req.BatchSize) / float64(r.limiter.Limit()) * float64(time.Second))
	}
	return left >= r.budget.margin+r.budget.sendTimeout+batch
}

// settleOverBudget reports whether a run that also replays has settled for
// its share of the time (a third of what it started with).
func (r *run) settleOverBudget(ctx context.Context) bool {
	left, ok := r.s.left(ctx)
	return ok && r.req.Action != ActionSettle && left < r.settleUntilLeft
}
