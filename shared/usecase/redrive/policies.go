package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/cwmetrics"
)

// ActionPolicies applies every live standing policy of the source (the
// template's policy schedule sends it).
const ActionPolicies = "policies"

// ActorBreaker is the actor of a breaker's suspension.
const ActorBreaker = quarantine.ActorBreaker

// PoliciesCountersOff is why a policies run sends nothing while the
// breakers' counters are not live (Config.CountersOff).
const PoliciesCountersOff = "the breakers' counters are not live: the ledger reads no stream (LedgerMappingEnabled=false, the upgrade window), " +
	"so no breaker would see a replay come back; no standing policy runs until the stack is updated with LedgerMappingEnabled=true"

// Policy metric names (namespace DLQQuarantine; Source and Policy
// dimensions, PoliciesSuspended by Source only, for the alarm).
const (
	MetricPolicyReplayed  = "PolicyReplayed"
	MetricPolicyCameBack  = "PolicyCameBack"
	MetricPolicyShare     = "PolicyComebackShare"
	MetricPolicySuspended = "PolicySuspended"
	MetricPolicies        = "PoliciesSuspended"
)

// MetricsAPI is the part of the CloudWatch client policies publish with.
type MetricsAPI = cwmetrics.API

// PolicyStore is where standing policies live. Create fails with
// policy.ErrConflict when the id exists, Replace when the stored version
// is no longer version; Get fails with policy.ErrNotFound.
type PolicyStore interface {
	List(ctx context.Context, source string) ([]*policy.Policy, error)
	Get(ctx context.Context, source, id string) (*policy.Policy, error)
	Create(ctx context.Context, p *policy.Policy) error
	Replace(ctx context.Context, p *policy.Policy, version int64) error
}

// Policies configures standing policies.
type Policies struct {
	Store     PolicyStore
	Counters  policy.CounterReader
	Metrics   MetricsAPI
	Namespace string
}

// WithPolicies enables the policies action.
func (s *Service) WithPolicies(p Policies) *Service {
	if p.Namespace == "" {
		p.Namespace = "DLQQuarantine"
	}
	s.policies = &p
	return s
}

// PolicyOutcome is what one policy did in a policies run.
type PolicyOutcome struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Outcome is ran, tripped (suspended by its breaker now), suspended,
	// expired, revoked, changed (edited meanwhile; next run) or failed.
	Outcome string `json:"outcome"`
	// Sent and CameBack count the policy's replays since it was last
	// resumed; Share is their ratio.
	Sent     int64   `json:"sent"`
	CameBack int64   `json:"came_back"`
	Share    float64 `json:"share"`
	Redriven int     `json:"redriven"`
	RunID    string  `json:"run_id,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// applyPolicies reads the breaker of every live policy of src, suspends
// those that tripped, and runs the others through Run: the same claim →
// validate → send → mark path as a manual redrive, as the policy's actor,
// never including PARKED records, within the per-record cap. The tick
// settles once: the first policy run settles, as every run does, and the
// later runs of the tick skip that step.
func (s *Service) applyPolicies(ctx context.Context, src *quarantine.Source, rep *Report) (*Report, error) {
	if s.policies == nil {
		return nil, &RequestError{Problems: []string{"standing policies are not configured for this function"}}
	}
	if s.cfg.CountersOff {
		// Not an error: a scheduled run's error pages as a failed
		// invocation, and the upgrade's own reminder alarm already pages.
		rep.PoliciesSkipped, rep.FinishedAt = PoliciesCountersOff, s.now().UTC()
		s.log.WarnContext(ctx, "standing policies not applied: breaker counters are not live", "run_id", rep.RunID, "source", src.Name)
		return rep, nil
	}
	pols, err := s.policies.Store.List(ctx, src.Name)
	if err != nil {
		return nil, err
	}
	t := &policyTick{s: s, src: src, rep: rep}
	for _, p := range pols {
		if err := t.apply(ctx, p); err != nil {
			return nil, err
		}
	}
	if err := t.publish(ctx); err != nil {
		return nil, err
	}
	rep.FinishedAt = s.now().UTC()
	s.log.InfoContext(ctx, "standing policies applied", "run_id", rep.RunID, "source", src.Name, "policies", len(pols),
		"suspended", t.suspended, "redriven", rep.Redriven.Count)
	return rep, nil
}

// policyTick is one policies action on a source.
type policyTick struct {
	s   *Service
	src *quarantine.Source
	rep *Report
	// data are the policies' metrics, published when every policy is done.
	data      []cwtypes.MetricDatum
	suspended int
	// settled: a run of this tick has settled; the later runs do not.
	settled bool
}

// apply judges p, suspends it if its breaker tripped, or runs it, and
// records its outcome and metrics. A revoked policy has an outcome only.
func (t *policyTick) apply(ctx context.Context, p *policy.Policy) error {
	s := t.s
	now := s.now().UTC()
	o := PolicyOutcome{ID: p.ID, State: p.State}
	if p.State == policy.StateRevoked {
		o.Outcome = "revoked"
		t.rep.Policies = append(t.rep.Policies, o)
		return nil
	}
	sent, back, err := policy.Counts(ctx, s.policies.Counters, t.src.Name, p.ID)
	if err != nil {
		return err
	}
	b := p.Judge(sent, back)
	o.Sent, o.CameBack, o.Share = b.Sent, b.CameBack, b.Share
	switch {
	case p.State == policy.StateSuspended:
		o.Outcome = "suspended"
	case p.Expired(now):
		o.Outcome = "expired"
	case b.Trip:
		if err := t.trip(ctx, p, b, now, &o); err != nil {
			return err
		}
	default:
		t.runPolicy(ctx, p, now, &o)
	}
	if o.State == policy.StateSuspended {
		t.suspended++
	}
	t.rep.Policies = append(t.rep.Policies, o)
	t.data = append(t.data, policyMetrics(t.src.Name, p.ID, o)...)
	return nil
}

// trip suspends p, whose breaker b tripped, as the breaker. A policy
// edited meanwhile is left for the next tick.
func (t *policyTick) trip(ctx context.Context, p *policy.Policy, b policy.Breaker, now time.Time, o *PolicyOutcome) error {
	s := t.s
	next, err := p.Suspend(ActorBreaker, fmt.Sprintf("%d of %d replays came back to the DLQ (%.0f%%, above %.0f%%)",
		b.CameBack, b.Sent, 100*b.Share, 100*p.Threshold), now)
	if err == nil {
		err = s.policies.Store.Replace(ctx, next, p.Version)
	}
	if errors.Is(err, policy.ErrConflict) {
		o.Outcome = "changed"
		return nil
	}
	if err != nil {
		return fmt.Errorf("suspend policy: %w", err)
	}
	o.Outcome, o.State = "tripped", policy.StateSuspended
	s.log.WarnContext(ctx, "standing policy suspended by its breaker", "policy", p.ID, "source", t.src.Name,
		"sent", b.Sent, "came_back", b.CameBack, "threshold", p.Threshold)
	return nil
}

// runPolicy makes p's redrive. Its failure is p's outcome, not the tick's;
// what a failed run did (its report) still counts in the tick's.
func (t *policyTick) runPolicy(ctx context.Context, p *policy.Policy, now time.Time, o *PolicyOutcome) {
	req := policyRequest(p, now)
	if req.FirstSeenFrom != nil && req.FirstSeenTo != nil && req.FirstSeenTo.Before(*req.FirstSeenFrom) {
		o.Outcome = "ran" // its window holds nothing old enough yet
		return
	}
	req.noSettle = t.settled
	rr, err := t.s.Run(ctx, req)
	if rr != nil {
		t.settled = t.settled || rr.settleRan
		o.Redriven, o.RunID = rr.Redriven.Count, rr.RunID
		t.rep.AddOutcomes(rr)
	}
	o.Outcome = "ran"
	if err != nil {
		o.Outcome, o.Error = "failed", quarantine.ErrorKind(err)
	}
}

// policyMetrics are the metrics of one policy's outcome o.
func policyMetrics(source, id string, o PolicyOutcome) []cwtypes.MetricDatum {
	dims := []cwtypes.Dimension{cwmetrics.Dim("Source", source), cwmetrics.Dim("Policy", id)}
	flag := 0.0
	if o.State == policy.StateSuspended {
		flag = 1
	}
	var data []cwtypes.MetricDatum
	for _, m := range []struct {
		name string
		v    float64
		unit cwtypes.StandardUnit
	}{
		{MetricPolicyReplayed, float64(o.Redriven), cwtypes.StandardUnitCount},
		{MetricPolicyCameBack, float64(o.CameBack), cwtypes.StandardUnitCount},
		{MetricPolicyShare, o.Share, cwtypes.StandardUnitNone},
		{MetricPolicySuspended, flag, cwtypes.StandardUnitNone},
	} {
		data = append(data, cwmetrics.Datum(m.name, m.v, m.unit, dims...))
	}
	return data
}

// publish sends the tick's metrics, with the count of suspended policies
// the alarm watches.
func (t *policyTick) publish(ctx context.Context) error {
	s, src, data, suspended := t.s, t.src, t.data, t.suspended
	data = append(data, cwmetrics.Datum(MetricPolicies, float64(suspended), cwtypes.StandardUnitCount, cwmetrics.Dim("Source", src.Name)))
	if err := cwmetrics.Put(ctx, s.policies.Metrics, s.policies.Namespace, data); err != nil {
		return fmt.Errorf("publish policy metrics: %w", err)
	}
	return nil
}

// policyRequest is the redrive p makes at now.
func policyRequest(p *policy.Policy, now time.Time) Request {
	r := Request{
		Source: p.Source, Classes: p.Classes, Signatures: p.Signatures, MaxMessages: p.MaxPerRun, BatchSize: MaxBatchSize,
		RatePerSecond: p.RatePerSecond, RequestedBy: p.Actor(), Approve: true, asPolicy: p.ID,
	}
	if p.FirstSeenFrom != nil {
		t := p.FirstSeenFrom.Time
		r.FirstSeenFrom = &t
	}
	if p.FirstSeenTo != nil {
		t := p.FirstSeenTo.Time
		r.FirstSeenTo = &t
	}
	if p.MinAgeSeconds > 0 {
		t := now.Add(-time.Duration(p.MinAgeSeconds) * time.Second)
		if r.FirstSeenTo == nil || t.Before(*r.FirstSeenTo) {
			r.FirstSeenTo = &t
		}
	}
	return r
}
