package redrive

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Four eyes (DESIGN.md invariant 18). A high-risk request that arrives
// through the operator endpoint, whose caller AWS authenticated, does not
// run: it becomes a pending approval naming its exact plan (the request as
// it will run), its requester, its reason and an expiry. A second verified
// principal approves or rejects it (actions approve and reject); an
// approval is one conditional write from pending, so the plan runs once,
// however often the approval call is sent again, and then records its
// outcome. The plan runs as its requester, and every history entry it
// writes names the approval. A direct invoke never approves and never
// runs a high-risk action: a replay runs dry and says why, anything else
// is refused.

// Actions that decide a pending approval (operator endpoint only).
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
)

// ApprovalStore keeps approvals (dynamostore.ApprovalStore).
type ApprovalStore interface {
	Create(ctx context.Context, a *approval.Approval) error
	Replace(ctx context.Context, a *approval.Approval) error
	Get(ctx context.Context, source, id string) (*approval.Approval, error)
}

// WithApprovals makes s keep four-eyes approvals in store.
func (s *Service) WithApprovals(store ApprovalStore) *Service {
	s.approvals = store
	return s
}

// ForbiddenError is a request the caller's identity may not make: a
// self-approval, an action that needs the operator endpoint. Nothing was
// written. The operator endpoint answers it 403.
type ForbiddenError struct{ Problem string }

func (e *ForbiddenError) Error() string { return "refused: " + e.Problem }

// ErrorKind names the refusal (quarantine.Kinded).
func (e *ForbiddenError) ErrorKind() string { return "forbidden" }

// risks are the reasons req on src needs a second person (its source's
// four_eyes setting applied), and those the setting leaves out. A
// standing policy's own runs were approved with the policy.
func (s *Service) risks(req Request, src *quarantine.Source) (need, off []quarantine.Risk) {
	if req.asPolicy != "" || req.DryRun {
		return nil, nil
	}
	var all []quarantine.Risk
	switch req.Action {
	case ActionRedrive:
		if req.IncludeParked {
			all = append(all, quarantine.RiskParked)
		}
		if req.MaxMessages > s.cfg.ApprovalThreshold {
			all = append(all, quarantine.RiskLarge)
		}
		if req.Target != "" {
			all = append(all, quarantine.RiskRetarget)
		}
	case ActionCorrect:
		all = append(all, quarantine.RiskCorrection)
	case ActionUnpark:
		// A parked record unparked is replayable by any run: unparking is
		// the first step of replaying it.
		all = append(all, quarantine.RiskParked)
	case ActionPolicyAdd:
		all = append(all, quarantine.RiskPolicy)
	case ActionPolicyResume:
		all = append(all, quarantine.RiskResume)
	}
	for _, r := range all {
		if src.NeedsSecondPerson(r) {
			need = append(need, r)
		} else {
			off = append(off, r)
		}
	}
	return need, off
}

// gate decides what happens to a high-risk request before it runs: nil
// (run it: no risk, or approved), a report (a pending approval was
// created, or found created by this request before), or an error.
func (s *Service) gate(ctx context.Context, req *Request, src *quarantine.Source, rep *Report) (*Report, error) {
	need, off := s.risks(*req, src)
	if len(need) == 0 {
		if len(off) > 0 && req.approved == nil {
			req.RequestedBy = quarantine.WithApproval(req.RequestedBy, quarantine.FourEyesOff)
		}
		return nil, nil
	}
	if a := req.approved; a != nil {
		for _, r := range need {
			if !slices.Contains(a.Risks, r) {
				return nil, &ForbiddenError{Problem: fmt.Sprintf("approval %s does not cover the risk %q", a.ID, r)}
			}
		}
		return nil, nil
	}
	if req.verified == nil {
		why := fmt.Sprintf("%s needs a second person's approval (%s): ask through the operator endpoint (dlqctl), where AWS verifies who asks; a direct invoke never runs it",
			req.Action, joinRisks(need))
		if req.Action == ActionRedrive {
			rep.DryRun, rep.DryRunReason = true, why
			return nil, nil
		}
		return nil, &ForbiddenError{Problem: why}
	}
	if err := s.precheck(ctx, *req, src); err != nil {
		s.log.InfoContext(ctx, "high-risk request refused before approval", "run_id", rep.RunID, "action", req.Action, "source", src.Name,
			"error_kind", quarantine.ErrorKind(err))
		return nil, err
	}
	return s.requestApproval(ctx, *req, src, need, rep)
}

// precheck refuses, writing nothing, a high-risk request that could not
// run: nobody is asked to approve what would fail.
func (s *Service) precheck(ctx context.Context, req Request, src *quarantine.Source) error {
	switch req.Action {
	case ActionCorrect:
		return s.checkCorrection(ctx, req, src)
	case ActionUnpark:
		cur, err := s.store.Get(ctx, req.IDs[0])
		if err != nil {
			return operatorError(err)
		}
		if err := quarantine.Verify(cur); quarantine.IsIntegrityFailure(err) {
			return s.holdFound(ctx, cur, err) // never asked to approve what fails verification
		}
		if cur.Status != quarantine.StatusParked {
			return &RequestError{Problems: []string{fmt.Sprintf("ids[0] is %s: cannot unpark it", cur.Status)}, Kind: quarantine.StateKind(cur.Status)}
		}
	case ActionPolicyAdd, ActionPolicyResume:
		if s.policies == nil {
			return &RequestError{Problems: []string{"standing policies are not configured for this function"}}
		}
		if req.Action == ActionPolicyAdd {
			spec := req.Policy.Spec(src.Name)
			if req.Policy.ExpiresIn != "" {
				d, _ := time.ParseDuration(req.Policy.ExpiresIn) // checked by policyProblems
				spec.ExpiresAt = s.now().Add(d)
			}
			_, err := policy.New(spec, req.RequestedBy, s.now())
			return err
		}
		cur, err := s.policies.Store.Get(ctx, src.Name, req.PolicyID)
		if errors.Is(err, policy.ErrNotFound) {
			return &RequestError{Problems: []string{"policy_id names no policy of this source"}}
		}
		if err != nil {
			return err
		}
		if cur.State != policy.StateSuspended {
			return &policy.Error{Problems: []string{"only a suspended policy can be resumed; it is " + cur.State}}
		}
	}
	return nil
}

func joinRisks(rs []quarantine.Risk) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// plan is the canonical JSON of req as an approval keeps it: the request
// without who asked or the approval's own fields.
func plan(req Request) ([]byte, error) {
	req.RequestedBy, req.ApprovalID, req.Approve = "", "", false
	if req.Action == ActionRedrive {
		req.Reason = ""
	}
	return quarantine.Canonical(req)
}

// planOf is a's plan as a request, checked to be of a's source and
// action.
func planOf(a *approval.Approval) (Request, error) {
	r, err := decodePlan(a.Plan)
	if err == nil && (r.Source != a.Source || cmp.Or(r.Action, ActionRedrive) != a.Action) {
		err = fmt.Errorf("the plan is a %s of source %q, the approval a %s of %q", cmp.Or(r.Action, ActionRedrive), r.Source, a.Action, a.Source)
	}
	if err != nil {
		return Request{}, &ConfigError{Problem: fmt.Sprintf("approval %s: its plan does not run here (%v); nothing ran, the approval is not spent", a.ID, err)}
	}
	return r, nil
}

// decodePlan decodes an approval's plan strictly; Run normalizes it.
func decodePlan(raw string) (Request, error) {
	var r Request
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, err
	}
	return r, nil
}

// requestApproval creates the pending approval of req (under
// req.ApprovalID when given: the same request sent again after a lost
// answer finds the approval it created instead of a second one).
func (s *Service) requestApproval(ctx context.Context, req Request, src *quarantine.Source, risks []quarantine.Risk, rep *Report) (*Report, error) {
	if s.approvals == nil {
		return nil, &ConfigError{Problem: "four-eyes approvals are not configured for this function"}
	}
	req.Source = src.Name // the approval's and its key's, however the request named it
	p, err := plan(req)
	if err != nil {
		return nil, fmt.Errorf("encode the plan: %w", err)
	}
	reason := req.Reason
	if reason == "" && req.Policy != nil {
		reason = req.Policy.Note // a policy's note says why (dlqctl policy add --note)
	}
	a, err := approval.New(approval.Request{ID: req.ApprovalID, Source: src.Name, Action: req.Action, Risks: risks, Plan: p,
		Summary: summarize(req), Requester: *req.verified, Reason: reason, TTL: s.cfg.ApprovalTTL,
		Rules: identity.Rules{TrustedSessionRoles: s.cfg.TrustedSessionRoles}}, s.now())
	if err != nil {
		var ae *approval.Error
		if errors.As(err, &ae) {
			return nil, &RequestError{Problems: ae.Problems}
		}
		return nil, err
	}
	if raw, err := json.Marshal(a); err != nil || len(raw) > approval.MaxItemBytes {
		return nil, &RequestError{Problems: []string{fmt.Sprintf("the plan makes an approval of %d bytes, more than the %d a table item holds: replay fewer ids, or a smaller correction", len(raw), approval.MaxItemBytes)}}
	}
	err = s.approvals.Create(ctx, a)
	if errors.Is(err, approval.ErrConflict) {
		// The id exists: this request's own earlier try, or another.
		got, gerr := s.approvals.Get(ctx, src.Name, a.ID)
		if gerr != nil {
			return nil, fmt.Errorf("read approval: %w", gerr)
		}
		if !got.SamePlan(p) || got.RequestedBy.ARN != req.verified.ARN || got.RequestedBy.UserID != req.verified.UserID {
			return nil, &RequestError{Problems: []string{fmt.Sprintf("approval_id %s names another request's approval", a.ID)}, Kind: quarantine.KindConflict}
		}
		if got.State != approval.StatePending || got.Expired(s.now()) {
			return nil, &RequestError{Problems: []string{fmt.Sprintf("approval %s of this request is %s already (dlqctl approvals show); ask again under a new approval_id", got.ID, got.StateAt(s.now()))},
				Kind: quarantine.KindConflict}
		}
		a, err = got, nil
	}
	if err != nil {
		return nil, err
	}
	rep.Approval, rep.Stopped = a, StoppedPendingApproval
	rep.FinishedAt = s.now().UTC()
	s.log.InfoContext(ctx, "approval requested", "run_id", rep.RunID, "action", req.Action, "source", src.Name,
		"approval", a.ID, "risks", joinRisks(risks), "requester", a.RequestedBy.ARN)
	return rep, nil
}

// summarize says what req does without a payload value.
func summarize(req Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s", req.Action, req.Source)
	switch req.Action {
	case ActionRedrive:
		fmt.Fprintf(&b, ": up to %d messages", req.MaxMessages)
		if req.IncludeParked {
			b.WriteString(", parked records included")
		}
		if len(req.IDs) > 0 {
			fmt.Fprintf(&b, ", %d ids", len(req.IDs))
		}
		if req.Target != "" {
			fmt.Fprintf(&b, ", into another queue: %s", req.Target)
		}
		if len(req.Classes) > 0 || len(req.Signatures) > 0 || req.FirstSeenFrom != nil || req.FirstSeenTo != nil || len(req.ClearedReasons) > 0 {
			b.WriteString(", filtered")
		}
	case ActionCorrect:
		fmt.Fprintf(&b, ": one record's payload replaced (%d bytes)", len(req.Payload))
	case ActionPolicyAdd:
		if p := req.Policy; p != nil && p.ExpiresIn != "" {
			fmt.Fprintf(&b, ": replay up to %d per run for %s from its approval", p.MaxPerRun, p.ExpiresIn)
		} else if p != nil {
			fmt.Fprintf(&b, ": replay up to %d per run until %s", p.MaxPerRun, p.ExpiresAt.Format("2006-01-02T15:04Z07:00"))
		}
	case ActionPolicyResume:
		fmt.Fprintf(&b, ": policy %s", req.PolicyID)
	case ActionUnpark:
		b.WriteString(": one parked record back to quarantine, replayable by any run")
	}
	return b.String()
}

// decide runs an approve or reject of req.ApprovalID by the verified
// caller. An approval runs its plan, as its requester under the approval,
// then records the outcome. The same decision sent again (its answer
// lost) returns the approval as decided and runs nothing.
func (s *Service) decide(ctx context.Context, req Request, src *quarantine.Source, rep *Report) (*Report, error) {
	if req.verified == nil {
		return nil, &ForbiddenError{Problem: req.Action + " needs the operator endpoint, where AWS verifies who decides; a direct invoke never approves"}
	}
	if s.approvals == nil {
		return nil, &ConfigError{Problem: "four-eyes approvals are not configured for this function"}
	}
	by := *req.verified
	var next *approval.Approval
	for try := 0; ; try++ {
		a, err := s.approvals.Get(ctx, src.Name, req.ApprovalID)
		if errors.Is(err, approval.ErrNotFound) {
			return nil, &RequestError{Problems: []string{"approval_id names no approval of this source"}, Kind: quarantine.KindNotFound}
		}
		if err != nil {
			return nil, err
		}
		if a.DecidedByPrincipal(by) && (a.State == approval.StateApproved && req.Action == ActionApprove ||
			a.State == approval.StateExecuted && req.Action == ActionApprove || a.State == approval.StateRejected && req.Action == ActionReject) {
			rep.Approval, rep.AlreadyDecided = a, true
			rep.FinishedAt = s.now().UTC()
			return rep, nil
		}
		if req.Action == ActionApprove {
			next, err = a.Approve(by, req.Reason, s.now())
		} else {
			next, err = a.Reject(by, req.Reason, s.now())
		}
		var refusal *approval.Refusal
		if errors.As(err, &refusal) {
			return nil, &ForbiddenError{Problem: refusal.Problem}
		}
		if err != nil {
			return nil, err
		}
		if req.Action == ActionApprove {
			// The plan must run as approved: one that no longer decodes
			// (a release that changed the request) is refused before the
			// approval is spent.
			if _, err := planOf(a); err != nil {
				return nil, err
			}
		}
		err = s.approvals.Replace(ctx, next)
		if errors.Is(err, approval.ErrConflict) {
			// This call's own write, its answer lost (the SDK's retry then
			// fails the condition), or another decision: read again. Only
			// this call made a version with this seal (its decision time is
			// in it), so the plan still runs once.
			if got, gerr := s.approvals.Get(ctx, src.Name, req.ApprovalID); gerr == nil && got.Seal == next.Seal {
				err = nil
			} else if try < 2 {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		break
	}
	s.log.InfoContext(ctx, "approval decided", "run_id", rep.RunID, "approval", next.ID, "state", next.State, "decided_by", by.ARN)
	rep.Approval = next
	if next.State != approval.StateApproved {
		rep.FinishedAt = s.now().UTC()
		return rep, nil
	}
	return s.execute(ctx, next, rep)
}

// execute runs the plan of approved a as its requester, then records the
// outcome on a. The plan's report is what the caller sees, with the
// approval.
func (s *Service) execute(ctx context.Context, a *approval.Approval, decided *Report) (*Report, error) {
	planReq, err := planOf(a)
	if err != nil {
		return nil, err
	}
	requester := a.RequestedBy
	planReq.RequestedBy, planReq.verified, planReq.approved = requester.Actor(), &requester, a
	rep, runErr := s.Run(ctx, planReq)
	if rep == nil {
		rep = &Report{RunID: decided.RunID, Action: a.Action, Source: a.Source, RequestedBy: requester.ARN, Stopped: StoppedDone, StartedAt: decided.StartedAt}
	}
	o := approval.Outcome{RunID: rep.RunID, At: quarantine.At(s.now()), Summary: rep.Summary(), ErrorKind: quarantine.ErrorKind(runErr)}
	if runErr == nil {
		o.ErrorKind = ""
	}
	done, err := a.Executed(o)
	if err == nil {
		err = s.approvals.Replace(ctx, done)
		if errors.Is(err, approval.ErrConflict) {
			if got, gerr := s.approvals.Get(ctx, a.Source, a.ID); gerr == nil && got.Seal == done.Seal {
				err = nil // written; its answer lost
			}
		}
	}
	if err != nil {
		// The run happened; only its outcome on the approval is missing
		// (dlqctl approvals show says so). The records' histories name the
		// approval whatever this write did.
		s.log.WarnContext(ctx, "approval outcome not recorded", "approval", a.ID, "error_kind", quarantine.ErrorKind(err))
		done = a
	}
	rep.Approval = done
	return rep, runErr
}
