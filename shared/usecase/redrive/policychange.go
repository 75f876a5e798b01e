package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The policy actions (policy_add, policy_revoke, policy_resume) create and
// change a standing policy for an operator, under the function's role, so
// that an operator needs no write permission on the table (dlqctl policy
// add, rm, resume invoke them). The function validates exactly as the
// domain does (policy.New, Revoke, Resume), records the requester in the
// policy's sealed history and makes the one conditional write. A write
// whose answer was lost is recognized on the re-read, never applied twice
// nor reported as failed: a policy_add carries its id (policy_id), so the
// same request sent again meets the policy it created, and a revoke or
// resume whose newest history entry is already this requester's change
// with this reason is done.

// ErrPolicyChanged is a policy action that lost the race for its policy to
// other writers every time it tried: nothing was changed, look again.
var ErrPolicyChanged = quarantine.NewKinded(quarantine.KindConflict, "the policy changed meanwhile each time the change was tried; look again (dlqctl policy ls) and retry")

// policyTries bounds the re-reads of a revoke or resume that meets another
// writer's change.
const policyTries = 5

// policyIDPattern is the form policy ids take (policy.New's).
var policyIDPattern = regexp.MustCompile(`^pol-[0-9a-f]{12}$`)

// PolicySpec is what a policy_add creates: a policy.Spec in the request's
// JSON. Times are RFC 3339; the minimum age is in seconds.
type PolicySpec struct {
	Classes       []quarantine.Class `json:"classes,omitempty"`
	Signatures    []string           `json:"signatures,omitempty"`
	FirstSeenFrom *time.Time         `json:"first_seen_from,omitempty"`
	FirstSeenTo   *time.Time         `json:"first_seen_to,omitempty"`
	MinAgeSeconds int                `json:"min_age_seconds,omitempty"`
	MaxPerRun     int                `json:"max_per_run"`
	RatePerSecond float64            `json:"rate_per_second,omitempty"`
	ExpiresAt     time.Time          `json:"expires_at,omitzero"`
	// ExpiresIn is the expiry as a Go duration from the function's now
	// ("72h"), in place of ExpiresAt (a console request, a sample).
	ExpiresIn string `json:"expires_in,omitempty"`
	// Threshold and MinSample are the breaker's (0: the defaults).
	Threshold float64 `json:"threshold,omitempty"`
	MinSample int     `json:"min_sample,omitempty"`
	// Note says why (an incident, a change ticket); it is recorded.
	Note string `json:"note,omitempty"`
}

// NewPolicySpec is spec as a request carries it (its minimum age in whole
// seconds, as a policy keeps it).
func NewPolicySpec(spec policy.Spec) *PolicySpec {
	return &PolicySpec{
		Classes: spec.Classes, Signatures: spec.Signatures, FirstSeenFrom: spec.FirstSeenFrom, FirstSeenTo: spec.FirstSeenTo,
		MinAgeSeconds: int(spec.MinAge / time.Second), MaxPerRun: spec.MaxPerRun, RatePerSecond: spec.RatePerSecond,
		ExpiresAt: spec.ExpiresAt, Threshold: spec.Threshold, MinSample: spec.MinSample, Note: spec.Note,
	}
}

// Spec is the policy.Spec of ps for source.
func (ps *PolicySpec) Spec(source string) policy.Spec {
	return policy.Spec{
		Source: source, Classes: ps.Classes, Signatures: ps.Signatures, FirstSeenFrom: ps.FirstSeenFrom, FirstSeenTo: ps.FirstSeenTo,
		MinAge: time.Duration(ps.MinAgeSeconds) * time.Second, MaxPerRun: ps.MaxPerRun, RatePerSecond: ps.RatePerSecond,
		ExpiresAt: ps.ExpiresAt, Threshold: ps.Threshold, MinSample: ps.MinSample, Note: ps.Note,
	}
}

// isPolicyAction reports whether action is one of the policy actions.
func isPolicyAction(action string) bool {
	return action == ActionPolicyAdd || action == ActionPolicyRevoke || action == ActionPolicyResume
}

// policyProblems checks the request of a policy action, and that only
// they carry policy fields. The policy's own settings are checked by
// policy.New when the action runs.
func (r *Request) policyProblems() []string {
	var p []string
	if !isPolicyAction(r.Action) {
		if r.PolicyID != "" || r.Policy != nil {
			p = append(p, "policy_id and policy belong to the actions policy_add, policy_revoke and policy_resume")
		}
		return p
	}
	switch {
	case r.Action == ActionPolicyAdd && r.Policy == nil:
		p = append(p, "policy_add needs the policy")
	case r.Action != ActionPolicyAdd && r.Policy != nil:
		p = append(p, "policy belongs to action policy_add")
	}
	switch {
	case r.PolicyID == "" && r.Action != ActionPolicyAdd:
		p = append(p, r.Action+" needs the policy_id")
	case r.PolicyID != "" && !policyIDPattern.MatchString(r.PolicyID):
		p = append(p, "policy_id is not a policy id (pol- and 12 hex digits)")
	}
	if r.Action != ActionPolicyAdd && strings.TrimSpace(r.Reason) == "" {
		p = append(p, r.Action+" needs a reason: it is recorded in the policy's sealed history")
	}
	if len(r.IDs) > 0 || len(r.Classes) > 0 || len(r.Signatures) > 0 || r.FirstSeenFrom != nil || r.FirstSeenTo != nil || len(r.ClearedReasons) > 0 {
		p = append(p, r.Action+" selects no records: a policy's selection is in policy")
	}
	if r.DryRun {
		p = append(p, r.Action+" has no dry run")
	}
	if ps := r.Policy; ps != nil && ps.ExpiresIn != "" {
		if d, err := time.ParseDuration(ps.ExpiresIn); err != nil || d <= 0 {
			p = append(p, fmt.Sprintf("policy.expires_in %q is not a positive duration (72h)", ps.ExpiresIn))
		}
		if !ps.ExpiresAt.IsZero() {
			p = append(p, "policy has expires_at and expires_in: give one")
		}
	}
	return p
}

// changePolicy runs a policy action on src's policies. The report's
// Policy is the version written, or the one found already written by
// this request.
func (s *Service) changePolicy(ctx context.Context, req Request, src *quarantine.Source, rep *Report) (*Report, error) {
	if s.policies == nil {
		return nil, &RequestError{Problems: []string{"standing policies are not configured for this function"}}
	}
	var p *policy.Policy
	var err error
	if req.Action == ActionPolicyAdd {
		p, err = s.addPolicy(ctx, req, src)
	} else {
		p, err = s.updatePolicy(ctx, req, src)
	}
	rep.FinishedAt = s.now().UTC()
	id := req.PolicyID
	if p != nil {
		id = p.ID
	}
	s.log.InfoContext(ctx, "policy action finished", "run_id", rep.RunID, "action", rep.Action, "source", rep.Source,
		"policy", id, "error_kind", quarantine.ErrorKind(err))
	if err != nil {
		return nil, err
	}
	rep.Policy = p
	return rep, nil
}

// addPolicy creates the policy of req (under req.PolicyID when given).
// When the id exists, the policy there is this request's, created by an
// earlier try whose answer was lost, if it was created by the same
// requester with the same settings and note: it is returned as it is now.
func (s *Service) addPolicy(ctx context.Context, req Request, src *quarantine.Source) (*policy.Policy, error) {
	now := s.now()
	spec := req.Policy.Spec(src.Name)
	if req.Policy.ExpiresIn != "" {
		d, _ := time.ParseDuration(req.Policy.ExpiresIn) // checked by policyProblems
		spec.ExpiresAt = now.Add(d)
	}
	p, err := policy.New(spec, req.RequestedBy, now)
	if err != nil {
		return nil, err
	}
	if req.PolicyID != "" {
		p.ID = req.PolicyID
		if p.Seal, err = p.ComputeSeal(); err != nil {
			return nil, err
		}
	}
	err = s.policies.Store.Create(ctx, p)
	if !errors.Is(err, policy.ErrConflict) {
		if err != nil {
			return nil, fmt.Errorf("create policy: %w", err)
		}
		return p, nil
	}
	cur, gerr := s.policies.Store.Get(ctx, src.Name, p.ID)
	switch {
	case gerr != nil:
		return nil, fmt.Errorf("create policy: %w", errors.Join(err, gerr))
	case cur.Seal == p.Seal || creation(cur, req.Policy.ExpiresIn != "") == creation(p, req.Policy.ExpiresIn != ""):
		return cur, nil
	}
	return nil, &RequestError{Problems: []string{"policy_id names an existing policy that this request did not create"}}
}

// creation is what one request's policy_add makes the same on every try:
// id, source, settings, creator and note, not the creation time nor what
// happened since; nor the expiry when the request gave it relative to the
// function's now (relative).
func creation(p *policy.Policy, relative bool) string {
	c := *p
	if relative {
		c.ExpiresAt = quarantine.Time{}
	}
	c.CreatedAt, c.State, c.SuspendedReason, c.BaselineSent, c.BaselineCameBack = quarantine.Time{}, "", "", 0, 0
	c.History, c.Version, c.Seal, c.PrevSeal = nil, 0, "", ""
	if len(p.History) > 0 {
		c.History = []policy.Change{{Actor: p.History[0].Actor, Action: p.History[0].Action, Note: p.History[0].Note}}
	}
	raw, _ := json.Marshal(c)
	return string(raw)
}

// updatePolicy revokes or resumes the policy req names: read, change,
// one conditional write on the version read; re-read and re-applied when
// another writer got there first.
func (s *Service) updatePolicy(ctx context.Context, req Request, src *quarantine.Source) (*policy.Policy, error) {
	action := "revoked"
	if req.Action == ActionPolicyResume {
		action = "resumed"
	}
	var written *policy.Policy
	for range policyTries {
		cur, err := s.policies.Store.Get(ctx, src.Name, req.PolicyID)
		if errors.Is(err, policy.ErrNotFound) {
			return nil, &RequestError{Problems: []string{"policy_id names no policy of this source"}}
		}
		if err != nil {
			return nil, err
		}
		if (written != nil && cur.Seal == written.Seal) || doneBy(cur, req.RequestedBy, action, req.Reason) {
			return cur, nil // this request's change, its answer lost
		}
		var next *policy.Policy
		if req.Action == ActionPolicyResume {
			sent, back, cerr := policy.Counts(ctx, s.policies.Counters, src.Name, cur.ID)
			if cerr != nil {
				return nil, cerr
			}
			next, err = cur.Resume(req.RequestedBy, req.Reason, sent, back, s.now())
		} else {
			next, err = cur.Revoke(req.RequestedBy, req.Reason, s.now())
		}
		if err != nil {
			return nil, err
		}
		err = s.policies.Store.Replace(ctx, next, cur.Version)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, policy.ErrConflict) {
			return nil, fmt.Errorf("%s policy: %w", strings.TrimSuffix(action, "d"), err)
		}
		written = next
	}
	return nil, ErrPolicyChanged
}

// doneBy reports whether p's newest change is actor's action with reason:
// the change a request sent again asks for is already made.
func doneBy(p *policy.Policy, actor, action, reason string) bool {
	if len(p.History) == 0 {
		return false
	}
	last := p.History[len(p.History)-1]
	return last.Actor == quarantine.ActorName(actor) && last.Approval == quarantine.ActorApproval(actor) && last.Action == action && last.Note == quarantine.Clip(reason, 512)
}
