// Package redrive replays quarantined records into their source queue: the
// request contract, the replay path (claim → validate → send → mark) in
// batches of at most 50, the cap counter that parks poison, and the report.
package redrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Limits of a request.
const (
	MaxBatchSize       = 50
	DefaultBatchSize   = 50
	DefaultMaxMessages = 100
	MaxMaxMessages     = 10000
)

// Actions a request may ask for.
const (
	ActionRedrive = "redrive"
	ActionSettle  = "settle"
	ActionCorrect = "correct"
	// ActionPark, ActionUnpark and ActionRead act on the one record in
	// ids for an operator (dlqctl park, unpark, show --payload), under the
	// function's role: the operator needs no write permission on the
	// table and no read permission on the payload bucket (operator.go).
	ActionPark   = "park"
	ActionUnpark = "unpark"
	ActionRead   = "read"
	// ActionPolicyAdd, ActionPolicyRevoke and ActionPolicyResume create,
	// revoke and resume a standing policy for an operator (dlqctl policy
	// add, rm, resume), under the function's role (policychange.go).
	ActionPolicyAdd    = "policy_add"
	ActionPolicyRevoke = "policy_revoke"
	ActionPolicyResume = "policy_resume"
	// ActionApprove and ActionReject (approvals.go) decide a pending
	// four-eyes approval.
)

// Request is what the console, `aws lambda invoke` and dlqctl send. Unknown
// fields are an error.
type Request struct {
	// Action is "redrive" (the default) or "settle" (resolve REDRIVEN
	// records whose replay did not come back within the settle window).
	Action string `json:"action,omitempty"`
	// Source is the source queue, by name or ARN.
	Source string `json:"source"`
	// Classes, Signatures, FirstSeenFrom/To and IDs select records.
	Classes       []quarantine.Class `json:"classes,omitempty"`
	Signatures    []string           `json:"signatures,omitempty"`
	FirstSeenFrom *time.Time         `json:"first_seen_from,omitempty"`
	FirstSeenTo   *time.Time         `json:"first_seen_to,omitempty"`
	IDs           []string           `json:"ids,omitempty"`
	// ClearedReasons is the allow-list of failure signatures whose root
	// cause is marked fixed; when set, only those are replayed.
	ClearedReasons []string `json:"cleared_reasons,omitempty"`
	// MaxMessages bounds the records this run examines (default 100).
	MaxMessages int `json:"max_messages,omitempty"`
	// BatchSize is records per batch, at most 50 (default 50).
	BatchSize int `json:"batch_size,omitempty"`
	// DryRun reports what would happen and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Approve is required for high-risk replays (parked records, or more
	// messages than the function's approval threshold).
	Approve bool `json:"approve,omitempty"`
	// IncludeParked also replays PARKED records (high risk).
	IncludeParked bool `json:"include_parked,omitempty"`
	// RequestedBy names who asked; it is recorded in each record's history.
	RequestedBy string `json:"requested_by"`
	// RatePerSecond caps sends per second, to protect the consumer (0: none).
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
	// Target, on a redrive, names a registered source (by name) whose
	// queue the selected records are replayed into instead of their own
	// source's: a queue of the same kind (FIFO to FIFO, standard to
	// standard), never an arbitrary ARN. It is high-risk
	// (quarantine.RiskRetarget), and every claim and send of the run
	// names it in the record's sealed history.
	Target string `json:"target,omitempty"`

	// Payload is the corrected body of the one record in ids (action
	// correct): a JSON string whose content is stored and sent byte for
	// byte (a nested object would be re-encoded on the way).
	Payload string `json:"payload,omitempty"`
	// Reason says why the payload was corrected (action correct).
	Reason string `json:"reason,omitempty"`
	// NewKey accepts a correction that changes the event's identity
	// (action correct); the new key is recorded.
	NewKey bool `json:"new_key,omitempty"`

	// PolicyID names the standing policy of a policy_revoke or
	// policy_resume; on a policy_add it is the new policy's id, chosen by
	// the caller (optional) so that a request sent again creates no second
	// policy.
	PolicyID string `json:"policy_id,omitempty"`
	// Policy is what a policy_add creates.
	Policy *PolicySpec `json:"policy,omitempty"`

	// ApprovalID is, on a high-risk request through the operator endpoint,
	// the id its pending approval is created under (chosen by the caller,
	// so that the request sent again finds it; empty: drawn), and on an
	// approve or reject the approval decided.
	ApprovalID string `json:"approval_id,omitempty"`

	// verified is the caller AWS authenticated (the operator endpoint's
	// IAM authorizer); nil on a direct invoke. approved is the approval a
	// plan runs under. Neither can be set through a request's JSON.
	verified *identity.Principal
	approved *approval.Approval

	// asPolicy is set on the runs a standing policy makes: only they may
	// act as "policy:<id>", whose replays the policy's breaker counts.
	asPolicy string
	// noSettle is set on the runs of a policies tick after the first that
	// settled: a tick settles once.
	noSettle bool
}

// ParseRequest decodes a request strictly and fills defaults. It returns a
// *RequestError listing every problem; nothing runs on a bad request.
func ParseRequest(raw []byte) (Request, error) { return parseRequest(raw, "") }

// parseRequest is ParseRequest; a requester other than "" is the verified
// caller's actor (the operator endpoint), which a request must not name
// itself.
func parseRequest(raw []byte, requester string) (Request, error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, &RequestError{Problems: []string{"malformed request: " + err.Error()}}
	}
	if dec.More() {
		return Request{}, &RequestError{Problems: []string{"malformed request: trailing data after the JSON object"}}
	}
	if requester != "" {
		if r.RequestedBy != "" {
			return Request{}, &RequestError{Problems: []string{"requested_by is set from your verified identity: leave it out"}}
		}
		r.RequestedBy = requester
	}
	// Absent and zero are different: absent takes the default, an
	// explicit 0 is outside the range (normalize alone cannot tell them
	// apart).
	var explicit struct {
		BatchSize   *int `json:"batch_size"`
		MaxMessages *int `json:"max_messages"`
	}
	_ = json.Unmarshal(raw, &explicit)
	var zero []string
	if explicit.BatchSize != nil && *explicit.BatchSize == 0 {
		zero = append(zero, fmt.Sprintf("batch_size 0 is outside 1..%d (leave it out for the default %d)", MaxBatchSize, DefaultBatchSize))
	}
	if explicit.MaxMessages != nil && *explicit.MaxMessages == 0 {
		zero = append(zero, fmt.Sprintf("max_messages 0 is outside 1..%d (leave it out for the default %d)", MaxMaxMessages, DefaultMaxMessages))
	}
	err := r.normalize()
	if len(zero) > 0 {
		var re *RequestError
		if errors.As(err, &re) {
			zero = append(zero, re.Problems...)
		}
		return Request{}, &RequestError{Problems: zero}
	}
	return r, err
}

// RequestError lists what is wrong with a request. Kind names the
// refusal for quarantine.ErrorKind (wrong_state, archived, not_found;
// empty: bad_request).
type RequestError struct {
	Problems []string
	Kind     string
}

func (e *RequestError) Error() string {
	return "invalid redrive request: " + strings.Join(e.Problems, "; ")
}

// ErrorKind names the refusal (quarantine.Kinded).
func (e *RequestError) ErrorKind() string {
	if e.Kind == "" {
		return "bad_request"
	}
	return e.Kind
}

func (r *Request) normalize() error {
	var p []string
	if r.Action == "" {
		r.Action = ActionRedrive
	}
	if !slices.Contains([]string{ActionRedrive, ActionSettle, ActionCorrect, ActionPolicies, ActionPark, ActionUnpark, ActionRead,
		ActionPolicyAdd, ActionPolicyRevoke, ActionPolicyResume, ActionApprove, ActionReject}, r.Action) {
		p = append(p, fmt.Sprintf("action %q is not redrive, settle, correct, policies, park, unpark, read, policy_add, policy_revoke, policy_resume, approve or reject", r.Action))
	}
	p = append(p, r.approvalProblems()...)
	// Texts a second person reads (dlqctl approvals show prints them):
	// no terminal escapes, no bidirectional or invisible format characters.
	if approval.Unprintable(r.Reason) {
		p = append(p, "reason holds a control or format character")
	}
	if r.Policy != nil && approval.Unprintable(r.Policy.Note) {
		p = append(p, "policy.note holds a control or format character")
	}
	p = append(p, r.actorProblems()...)
	p = append(p, r.operatorProblems()...)
	p = append(p, r.policyProblems()...)
	if r.Action == ActionCorrect {
		if len(r.IDs) != 1 {
			p = append(p, "correct needs exactly one id in ids")
		}
		if len(r.Payload) == 0 {
			p = append(p, "correct needs the corrected payload")
		}
		if strings.TrimSpace(r.Reason) == "" {
			p = append(p, "correct needs a reason: it is recorded in the sealed history")
		}
		if r.DryRun {
			p = append(p, "correct has no dry run: a refused correction changes nothing")
		}
	} else if len(r.Payload) > 0 || r.NewKey || (r.Reason != "" && !slices.Contains([]string{ActionRedrive, ActionPark, ActionUnpark, ActionPolicyAdd, ActionPolicyRevoke, ActionPolicyResume, ActionApprove, ActionReject}, r.Action)) {
		p = append(p, "payload and new_key belong to action correct (reason to correct, redrive, park, unpark, the policy actions, approve and reject)")
	}
	if strings.TrimSpace(r.Source) == "" {
		p = append(p, "source is required")
	}
	if r.Target != "" && r.Action != ActionRedrive {
		p = append(p, "target belongs to action redrive")
	}
	if strings.TrimSpace(r.RequestedBy) == "" {
		p = append(p, "requested_by is required: it is recorded in each record's history")
	}
	if r.BatchSize == 0 {
		r.BatchSize = DefaultBatchSize
	}
	if r.BatchSize < 0 || r.BatchSize > MaxBatchSize {
		p = append(p, fmt.Sprintf("batch_size %d is outside 1..%d", r.BatchSize, MaxBatchSize))
	}
	if r.MaxMessages == 0 {
		r.MaxMessages = DefaultMaxMessages
	}
	if r.MaxMessages < 0 || r.MaxMessages > MaxMaxMessages {
		p = append(p, fmt.Sprintf("max_messages %d is outside 1..%d", r.MaxMessages, MaxMaxMessages))
	}
	if r.RatePerSecond < 0 {
		p = append(p, "rate_per_second must not be negative")
	}
	for _, c := range r.Classes {
		if !slices.Contains([]quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison}, c) {
			p = append(p, fmt.Sprintf("class %q is not validation, exhausted or poison", c))
		}
	}
	if r.FirstSeenFrom != nil && r.FirstSeenTo != nil && r.FirstSeenFrom.After(*r.FirstSeenTo) {
		p = append(p, "first_seen_from is after first_seen_to")
	}
	// Problems name ids by position: an id embeds an idempotency key, which
	// may be a payload value, and function errors are logged.
	for i, id := range r.IDs {
		if !strings.Contains(id, "#") {
			p = append(p, fmt.Sprintf("ids[%d] is not a record id (<source>#<key>)", i))
		}
	}
	if len(p) > 0 {
		return &RequestError{Problems: p}
	}
	// An id named twice is one record: a run takes it up once (a second
	// claim in a later batch could send a possibly sent record again).
	seen := make(map[string]bool, len(r.IDs))
	r.IDs = slices.DeleteFunc(slices.Clone(r.IDs), func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
	return nil
}

// actorProblems refuses a requester name the system uses for itself
// (quarantine.ReservedActor): a history entry must say truthfully who wrote
// it, and a replay must never pass for an arrival or a settlement. Only a
// standing policy's own runs act as "policy:<id>"; the schedules'
// "schedule:…" names are accepted on the actions they send (settle and
// policies), which record no requester in any record's history.
func (r *Request) actorProblems() []string {
	name := r.RequestedBy
	if len(name) > quarantine.MaxActorBytes {
		return []string{fmt.Sprintf("requested_by is longer than %d bytes", quarantine.MaxActorBytes)}
	}
	if approval.Unprintable(name) {
		return []string{"requested_by holds a control or format character"}
	}
	if !quarantine.ReservedActor(name) {
		return nil
	}
	if r.asPolicy != "" && name == quarantine.PolicyActorPrefix+r.asPolicy {
		return nil
	}
	if quarantine.ScheduleActor(name) && (r.Action == ActionSettle || r.Action == ActionPolicies) {
		return nil
	}
	if _, ok := quarantine.PolicyOfActor(strings.ToLower(strings.TrimSpace(name))); ok {
		return []string{"requested_by must not name a standing policy (policy:…); only the policy's own runs act as it"}
	}
	return []string{fmt.Sprintf("requested_by %q is a name the system uses for itself (ingest, settler, sweeper, breaker, policy:…, schedule:…); name the person or tool", name)}
}

// approvalProblems checks approval_id: required by approve and reject, a
// valid id wherever it is given.
func (r *Request) approvalProblems() []string {
	var p []string
	if (r.Action == ActionApprove || r.Action == ActionReject) && r.ApprovalID == "" {
		p = append(p, r.Action+" needs the approval_id")
	}
	if r.ApprovalID != "" && !approval.ValidID(r.ApprovalID) {
		p = append(p, "approval_id must be 8 to 64 of a-z, 0-9 and -")
	}
	if r.Action == ActionApprove || r.Action == ActionReject {
		if len(r.IDs) > 0 || r.DryRun || r.Policy != nil || r.PolicyID != "" {
			p = append(p, r.Action+" takes the source, approval_id and a reason only: the approval holds the plan")
		}
	}
	return p
}

// ErrUnknownSource is returned when the request names no configured source
// (dlqctl says the same of a --source the function's SOURCES do not name).
var ErrUnknownSource = errors.New("source is not configured")
