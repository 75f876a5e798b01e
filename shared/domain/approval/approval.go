// Package approval holds four-eyes approvals (DESIGN.md invariant 18): a
// high-risk operator action does not run when asked; it becomes a pending
// approval naming its exact plan, its requester, the reason and an expiry.
// A second verified principal, never the requester (identity.Rules.Same),
// approves or rejects it; an approval runs its plan once, exactly as
// approved, and records the outcome.
//
// Approvals live in the quarantine table beside the records: one item per
// approval, written only by the redrive role with conditional writes on
// its version, sealed like a record (SHA-256 over its canonical JSON,
// chained to the version before it), and ledgered from the table's stream.
package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// States of an approval. Pending moves once: to approved (its plan then
// runs) or rejected; approved moves once more, to executed, when the run
// reports. Expiry is a time, not a state: a pending approval past
// ExpiresAt can no longer be approved.
const (
	StatePending  = "pending"
	StateApproved = "approved"
	StateRejected = "rejected"
	StateExecuted = "executed"
)

// MaxPlanBytes bounds a plan (a correction's plan holds its payload): the
// approval item stays well inside DynamoDB's 400 KB.
const MaxPlanBytes = 256 << 10

// MaxItemBytes bounds an approval's JSON (the item's one large
// attribute): DynamoDB's items hold 400 KB, names and the other
// attributes included.
const MaxItemBytes = 380 << 10

// MaxReasonBytes bounds the requester's reason and the decider's note.
const MaxReasonBytes = 512

// Outcome is what the approved run reported.
type Outcome struct {
	RunID string          `json:"run_id,omitempty"`
	At    quarantine.Time `json:"at"`
	// Summary counts what the run did (no ids, no payload values).
	Summary string `json:"summary"`
	// ErrorKind names the error the run ended with ("" when none).
	ErrorKind string `json:"error_kind,omitempty"`
}

// Approval is one request for a high-risk action and its decision.
type Approval struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	// Action is the request's action (redrive, correct, policy_add,
	// policy_resume); Risks say why it needs a second person.
	Action string            `json:"action"`
	Risks  []quarantine.Risk `json:"risks"`
	// Plan is the request exactly as it will run (canonical JSON, without
	// who asked); PlanSHA256 is its hash, which the decider approves.
	Plan       string `json:"plan"`
	PlanSHA256 string `json:"plan_sha256"`
	// Summary says what the plan does, for the decider (no payload
	// values).
	Summary     string             `json:"summary"`
	RequestedBy identity.Principal `json:"requested_by"`
	Reason      string             `json:"reason"`
	CreatedAt   quarantine.Time    `json:"created_at"`
	ExpiresAt   quarantine.Time    `json:"expires_at"`
	// Rules is how "the same principal" was judged for this approval (the
	// function's TRUSTED_SESSION_ROLES when it was asked for).
	Rules identity.Rules `json:"rules"`

	State        string              `json:"state"`
	DecidedBy    *identity.Principal `json:"decided_by,omitempty"`
	DecidedAt    *quarantine.Time    `json:"decided_at,omitempty"`
	DecisionNote string              `json:"decision_note,omitempty"`
	Outcome      *Outcome            `json:"outcome,omitempty"`

	Version  int64  `json:"version"`
	Seal     string `json:"seal,omitempty"`
	PrevSeal string `json:"prev_seal,omitempty"`
}

// Request is what New needs.
type Request struct {
	// ID is the caller's id for the approval (so that a request sent
	// again after a lost answer finds the one it created); "" draws one.
	ID        string
	Source    string
	Action    string
	Risks     []quarantine.Risk
	Plan      []byte
	Summary   string
	Requester identity.Principal
	Reason    string
	TTL       time.Duration
	Rules     identity.Rules
}

// ErrNotFound means no such approval.
var ErrNotFound = quarantine.NewKinded(quarantine.KindNotFound, "no such approval")

// ErrConflict means the approval changed since it was read.
var ErrConflict = quarantine.NewKinded(quarantine.KindConflict, "the approval changed since it was read; read it again")

// Error lists what is wrong with a request for approval.
type Error struct{ Problems []string }

func (e *Error) Error() string { return "approval: " + strings.Join(e.Problems, "; ") }

// ErrorKind names the error (quarantine.Kinded).
func (e *Error) ErrorKind() string { return "bad_request" }

// Refusal is a decision the rules refuse: the requester approving their
// own request, an expired or decided approval. Nothing was written.
type Refusal struct{ Problem string }

func (e *Refusal) Error() string { return "approval refused: " + e.Problem }

// ErrorKind names the refusal (quarantine.Kinded).
func (e *Refusal) ErrorKind() string { return "refused" }

// Unprintable reports whether s holds a control character (a terminal
// escape, a carriage return) or a Unicode format character (bidirectional
// overrides, zero-width ones), which could make a text the second person
// reads say something else than it holds.
func Unprintable(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}

// ValidID reports whether id can name an approval: 8 to 64 of [a-z0-9-].
func ValidID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// NewID draws a fresh approval id.
func NewID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New returns a sealed pending approval of req at now.
func New(req Request, now time.Time) (*Approval, error) {
	var p []string
	if req.ID == "" {
		req.ID = NewID()
	}
	if !ValidID(req.ID) {
		p = append(p, "approval_id must be 8 to 64 of a-z, 0-9 and -")
	}
	if strings.TrimSpace(req.Source) == "" {
		p = append(p, "an approval needs its source")
	}
	if len(req.Risks) == 0 {
		p = append(p, "an approval needs the risks that call for it")
	}
	if len(req.Plan) == 0 || len(req.Plan) > MaxPlanBytes {
		p = append(p, fmt.Sprintf("the plan is %d bytes; an approval holds 1 to %d", len(req.Plan), MaxPlanBytes))
	}
	if strings.TrimSpace(req.Reason) == "" {
		p = append(p, "a high-risk request needs a reason: the second person reads it")
	}
	if _, ok := req.Rules.Person(req.Requester); !ok {
		p = append(p, fmt.Sprintf("a %s cannot take part in four eyes: it names itself", req.Requester.Kind))
	}
	if req.TTL <= 0 {
		p = append(p, "an approval needs an expiry")
	}
	if len(p) > 0 {
		return nil, &Error{Problems: p}
	}
	sum := sha256.Sum256(req.Plan)
	a := &Approval{
		ID: req.ID, Source: req.Source, Action: req.Action, Risks: slices.Clone(req.Risks),
		Plan: string(req.Plan), PlanSHA256: hex.EncodeToString(sum[:]), Summary: quarantine.Clip(req.Summary, 1024),
		RequestedBy: req.Requester, Reason: quarantine.Clip(req.Reason, MaxReasonBytes),
		CreatedAt: quarantine.At(now), ExpiresAt: quarantine.At(now.Add(req.TTL)), Rules: req.Rules,
		State: StatePending, Version: 1,
	}
	return a, a.seal()
}

// Changed is when a's newest version was made.
func (a *Approval) Changed() quarantine.Time {
	switch {
	case a.Outcome != nil:
		return a.Outcome.At
	case a.DecidedAt != nil:
		return *a.DecidedAt
	}
	return a.CreatedAt
}

// StateAt is a's state at now, "expired" for a pending one past its
// expiry.
func (a *Approval) StateAt(now time.Time) string {
	if a.Expired(now) {
		return "expired"
	}
	return a.State
}

// Expired reports whether a pending approval can no longer be decided.
func (a *Approval) Expired(now time.Time) bool {
	return a.State == StatePending && !now.Before(a.ExpiresAt.Time)
}

// SamePlan reports whether plan is a's plan, byte for byte.
func (a *Approval) SamePlan(plan []byte) bool { return a.Plan == string(plan) }

// DecidedByPrincipal reports whether a was decided by p (its user id and ARN).
func (a *Approval) DecidedByPrincipal(p identity.Principal) bool {
	return a.DecidedBy != nil && a.DecidedBy.ARN == p.ARN && a.DecidedBy.UserID == p.UserID
}

// Approve is by approving a at now: the version that lets the plan run.
// The requester (identity.Rules.Same, under a's own rules), an expired or
// already decided approval, and a principal without a person are refused.
func (a *Approval) Approve(by identity.Principal, note string, now time.Time) (*Approval, error) {
	if err := a.decidable(by, now); err != nil {
		return nil, err
	}
	if a.Rules.Same(a.RequestedBy, by) {
		return nil, &Refusal{Problem: fmt.Sprintf("%s asked for it: a high-risk action needs a second, different principal (%s)", by.ARN, SameRule)}
	}
	return a.decide(StateApproved, by, note, now)
}

// Reject is by rejecting a at now. The requester may withdraw their own.
func (a *Approval) Reject(by identity.Principal, note string, now time.Time) (*Approval, error) {
	if err := a.decidable(by, now); err != nil {
		return nil, err
	}
	return a.decide(StateRejected, by, note, now)
}

// SameRule is the rule, in a sentence, that Refusal quotes.
const SameRule = "the same IAM user, the same session name of a trusted session role, or any session of the same other role"

func (a *Approval) decidable(by identity.Principal, now time.Time) error {
	if _, ok := a.Rules.Person(by); !ok {
		return &Refusal{Problem: fmt.Sprintf("a %s cannot take part in four eyes: it names itself", by.Kind)}
	}
	switch {
	case a.State != StatePending:
		return &Refusal{Problem: fmt.Sprintf("approval %s is %s already", a.ID, a.State)}
	case a.Expired(now):
		return &Refusal{Problem: fmt.Sprintf("approval %s expired at %s: nothing runs; ask again", a.ID, a.ExpiresAt)}
	}
	return nil
}

func (a *Approval) decide(state string, by identity.Principal, note string, now time.Time) (*Approval, error) {
	n := a.clone()
	at := quarantine.At(now)
	n.State, n.DecidedBy, n.DecidedAt, n.DecisionNote = state, &by, &at, quarantine.Clip(note, MaxReasonBytes)
	return n, n.reseal(a)
}

// Executed is a with the outcome of its approved run.
func (a *Approval) Executed(o Outcome) (*Approval, error) {
	if a.State != StateApproved {
		return nil, &Refusal{Problem: fmt.Sprintf("approval %s is %s, not approved: no outcome to record", a.ID, a.State)}
	}
	n := a.clone()
	o.Summary = quarantine.Clip(o.Summary, 1024)
	n.State, n.Outcome = StateExecuted, &o
	return n, n.reseal(a)
}

func (a *Approval) clone() *Approval {
	n := *a
	n.Risks = slices.Clone(a.Risks)
	n.Rules.TrustedSessionRoles = slices.Clone(a.Rules.TrustedSessionRoles)
	return &n
}

func (a *Approval) reseal(prev *Approval) error {
	a.Version, a.PrevSeal = prev.Version+1, prev.Seal
	return a.seal()
}

// ComputeSeal is SHA-256 over a's canonical JSON without its seal.
func (a *Approval) ComputeSeal() (string, error) {
	c := *a
	c.Seal = ""
	return quarantine.CanonicalSHA256(&c)
}

func (a *Approval) seal() error {
	s, err := a.ComputeSeal()
	a.Seal = s
	return err
}

// Verify checks a's seal and its plan's hash.
func (a *Approval) Verify() error {
	s, err := a.ComputeSeal()
	if err != nil {
		return err
	}
	if s != a.Seal {
		return fmt.Errorf("approval %s: seal %s does not match its content (%s)", a.ID, a.Seal, s)
	}
	sum := sha256.Sum256([]byte(a.Plan))
	if hex.EncodeToString(sum[:]) != a.PlanSHA256 {
		return fmt.Errorf("approval %s: plan_sha256 is not its plan's hash", a.ID)
	}
	return nil
}

// CheckTransition checks that next is a version this package makes of prev
// (nil: next is the first version seen, which must be pending): the
// version after it, chained to its seal, with everything the requester
// set unchanged, a decision only from pending, by someone other than the
// requester when approved, before the expiry, and an outcome only on an
// approved approval.
func CheckTransition(prev, next *Approval) error {
	if err := next.Verify(); err != nil {
		return err
	}
	if prev == nil {
		if next.Version != 1 || next.State != StatePending || next.DecidedBy != nil || next.Outcome != nil {
			return fmt.Errorf("a first version is version 1 and pending, not version %d %s", next.Version, next.State)
		}
		return nil
	}
	if err := prev.Verify(); err != nil {
		return err
	}
	if next.Version != prev.Version+1 || next.PrevSeal != prev.Seal {
		return fmt.Errorf("version %d does not follow version %d", next.Version, prev.Version)
	}
	a, b := prev.clone(), next.clone()
	for _, x := range []*Approval{a, b} {
		x.State, x.DecidedBy, x.DecidedAt, x.DecisionNote, x.Outcome, x.Version, x.Seal, x.PrevSeal = "", nil, nil, "", nil, 0, "", ""
	}
	sa, err := quarantine.CanonicalSHA256(a)
	if err != nil {
		return err
	}
	sb, err := quarantine.CanonicalSHA256(b)
	if err != nil {
		return err
	}
	if sa != sb {
		return errors.New("what the requester asked for changed (plan, requester, reason, expiry or rules)")
	}
	switch {
	case prev.State == StatePending && (next.State == StateApproved || next.State == StateRejected):
		if next.DecidedBy == nil || next.DecidedAt == nil || next.Outcome != nil {
			return fmt.Errorf("a decision to %s names no decider or time", next.State)
		}
		if !next.DecidedAt.Before(next.ExpiresAt.Time) {
			return fmt.Errorf("decided at %s, after its expiry %s", next.DecidedAt, next.ExpiresAt)
		}
		if next.State == StateApproved && next.Rules.Same(next.RequestedBy, *next.DecidedBy) {
			return fmt.Errorf("approved by %s, the same principal as its requester %s", next.DecidedBy.ARN, next.RequestedBy.ARN)
		}
	case prev.State == StateApproved && next.State == StateExecuted:
		if next.Outcome == nil || !sameDecision(prev, next) {
			return errors.New("an execution changed the decision or recorded no outcome")
		}
	default:
		return fmt.Errorf("%s → %s is not a change an approval makes", prev.State, next.State)
	}
	return nil
}

func sameDecision(a, b *Approval) bool {
	return a.DecidedBy != nil && b.DecidedBy != nil && *a.DecidedBy == *b.DecidedBy &&
		a.DecidedAt != nil && b.DecidedAt != nil && a.DecidedAt.Equal(b.DecidedAt.Time) && a.DecisionNote == b.DecisionNote
}
