// Package policy holds standing redrive policies: narrow, pre-approved
// situations the redrive function replays on its schedule, each with a
// breaker that suspends it when its replays keep coming back.
//
// Policies live in the quarantine table beside the records they select:
// one item per policy, written only with conditional writes on its version,
// sealed like a record (SHA-256 over its canonical JSON, chained to the
// previous version), with every change in its history.
package policy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// States of a policy.
const (
	StateActive    = "active"
	StateSuspended = "suspended"
	StateRevoked   = "revoked"
)

// Defaults of the breaker.
const (
	DefaultThreshold = 0.20
	DefaultMinSample = 10
	// MaxPerRunLimit bounds max_per_run: a policy is a narrow approval.
	MaxPerRunLimit = 1000
)

// Change is one entry of a policy's audit history.
type Change struct {
	At     quarantine.Time `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Note   string          `json:"note,omitempty"`
	// Approval names the four-eyes approval the change ran under.
	Approval string `json:"approval,omitempty"`
}

// Policy is one standing approval to replay matching records.
type Policy struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	// Classes selects by failure class: exhausted only (the default);
	// validation records fail the gate until corrected, poison ones are
	// never replayed by a policy.
	Classes       []quarantine.Class `json:"classes"`
	Signatures    []string           `json:"signatures,omitempty"`
	FirstSeenFrom *quarantine.Time   `json:"first_seen_from,omitempty"`
	FirstSeenTo   *quarantine.Time   `json:"first_seen_to,omitempty"`
	// MinAge only replays records first seen at least this long ago.
	MinAgeSeconds int             `json:"min_age_seconds,omitempty"`
	MaxPerRun     int             `json:"max_per_run"`
	RatePerSecond float64         `json:"rate_per_second,omitempty"`
	ExpiresAt     quarantine.Time `json:"expires_at"`
	CreatedBy     string          `json:"created_by"`
	CreatedAt     quarantine.Time `json:"created_at"`
	// Threshold is the share of replays that may come back before the
	// breaker suspends the policy, once MinSample replays were sent.
	Threshold float64 `json:"threshold"`
	MinSample int     `json:"min_sample"`

	State string `json:"state"`
	// SuspendedReason says why the breaker (or an operator) stopped it.
	SuspendedReason string `json:"suspended_reason,omitempty"`
	// BaselineSent and BaselineCameBack are the policy's counters when it
	// was last resumed: the breaker judges what happened since.
	BaselineSent     int64 `json:"baseline_sent"`
	BaselineCameBack int64 `json:"baseline_came_back"`

	History  []Change `json:"history"`
	Version  int64    `json:"version"`
	Seal     string   `json:"seal,omitempty"`
	PrevSeal string   `json:"prev_seal,omitempty"`
}

// Actor is the actor the policy's replays are recorded under.
func (p *Policy) Actor() string { return quarantine.PolicyActorPrefix + p.ID }

// Expired reports whether the policy no longer applies at now.
func (p *Policy) Expired(now time.Time) bool { return !now.Before(p.ExpiresAt.Time) }

// Spec is what an operator gives to create a policy.
type Spec struct {
	Source        string
	Classes       []quarantine.Class
	Signatures    []string
	FirstSeenFrom *time.Time
	FirstSeenTo   *time.Time
	MinAge        time.Duration
	MaxPerRun     int
	RatePerSecond float64
	ExpiresAt     time.Time
	Threshold     float64
	MinSample     int
	Note          string
}

// New validates spec and returns a sealed, active policy.
func New(spec Spec, actor string, now time.Time) (*Policy, error) {
	var p []string
	if strings.TrimSpace(spec.Source) == "" {
		p = append(p, "source is required")
	}
	if strings.TrimSpace(actor) == "" {
		p = append(p, "who creates it is required")
	}
	if len(spec.Classes) == 0 {
		spec.Classes = []quarantine.Class{quarantine.ClassExhausted}
	}
	for _, c := range spec.Classes {
		if c != quarantine.ClassExhausted {
			p = append(p, fmt.Sprintf("class %q: a policy replays exhausted records only (validation records need a correction, poison records a person)", c))
		}
	}
	if len(spec.Signatures) == 0 && spec.FirstSeenFrom == nil && spec.MinAge == 0 {
		p = append(p, "a policy must be narrow: give signatures, a first-seen window or a minimum age")
	}
	if spec.FirstSeenFrom != nil && spec.FirstSeenTo != nil && spec.FirstSeenFrom.After(*spec.FirstSeenTo) {
		p = append(p, "the first-seen window ends before it starts")
	}
	if spec.MaxPerRun < 1 || spec.MaxPerRun > MaxPerRunLimit {
		p = append(p, fmt.Sprintf("max per run %d is outside 1..%d", spec.MaxPerRun, MaxPerRunLimit))
	}
	if spec.RatePerSecond < 0 {
		p = append(p, "rate must not be negative")
	}
	if !spec.ExpiresAt.After(now) {
		p = append(p, "the expiry must be in the future")
	} else if spec.ExpiresAt.Sub(now) > 90*24*time.Hour {
		p = append(p, "a policy expires within 90 days; renew it deliberately")
	}
	if spec.Threshold == 0 {
		spec.Threshold = DefaultThreshold
	}
	if spec.Threshold <= 0 || spec.Threshold >= 1 {
		p = append(p, "the breaker threshold must be between 0 and 1")
	}
	if spec.MinSample == 0 {
		spec.MinSample = DefaultMinSample
	}
	if spec.MinSample < 1 {
		p = append(p, "the breaker's minimum sample must be at least 1")
	}
	if len(p) > 0 {
		return nil, &Error{Problems: p}
	}
	pol := &Policy{
		ID: newID(), Source: spec.Source, Classes: spec.Classes, Signatures: spec.Signatures,
		MinAgeSeconds: int(spec.MinAge / time.Second), MaxPerRun: spec.MaxPerRun, RatePerSecond: spec.RatePerSecond,
		ExpiresAt: quarantine.At(spec.ExpiresAt), CreatedBy: quarantine.ActorName(actor), CreatedAt: quarantine.At(now),
		Threshold: spec.Threshold, MinSample: spec.MinSample, State: StateActive, Version: 1,
		History: []Change{{At: quarantine.At(now), Actor: quarantine.ActorName(actor), Action: "created", Note: quarantine.Clip(spec.Note, 512),
			Approval: quarantine.ActorApproval(actor)}},
	}
	if spec.FirstSeenFrom != nil {
		t := quarantine.At(*spec.FirstSeenFrom)
		pol.FirstSeenFrom = &t
	}
	if spec.FirstSeenTo != nil {
		t := quarantine.At(*spec.FirstSeenTo)
		pol.FirstSeenTo = &t
	}
	return pol, pol.seal()
}

// Error lists what is wrong with a policy or a change to it.
type Error struct{ Problems []string }

func (e *Error) Error() string { return "policy refused: " + strings.Join(e.Problems, "; ") }

// ErrorKind names the refusal for quarantine.ErrorKind: a policy's
// settings or state refused, never an outage.
func (e *Error) ErrorKind() string { return "policy_refused" }

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "pol-" + hex.EncodeToString(b)
}

// change returns the next version of p with the change recorded.
func (p *Policy) change(actor, action, note string, now time.Time, apply func(*Policy)) (*Policy, error) {
	if strings.TrimSpace(actor) == "" {
		return nil, &Error{Problems: []string{"who makes the change is required"}}
	}
	n := p.clone()
	apply(n)
	n.History = append(n.History, Change{At: quarantine.At(now), Actor: quarantine.ActorName(actor), Action: action, Note: quarantine.Clip(note, 512),
		Approval: quarantine.ActorApproval(actor)})
	n.Version++
	n.PrevSeal = p.Seal
	return n, n.seal()
}

// Revoke stops the policy for good.
func (p *Policy) Revoke(actor, reason string, now time.Time) (*Policy, error) {
	if p.State == StateRevoked {
		return nil, &Error{Problems: []string{"the policy is already revoked"}}
	}
	return p.change(actor, "revoked", reason, now, func(n *Policy) { n.State = StateRevoked })
}

// Suspend stops the policy until an operator resumes it.
func (p *Policy) Suspend(actor, reason string, now time.Time) (*Policy, error) {
	if p.State != StateActive {
		return nil, &Error{Problems: []string{"the policy is " + p.State}}
	}
	return p.change(actor, "suspended", reason, now, func(n *Policy) { n.State, n.SuspendedReason = StateSuspended, quarantine.Clip(reason, 512) })
}

// Resume restarts a suspended policy; the breaker then judges only what
// happens from now on (sent and cameBack are its counters now).
func (p *Policy) Resume(actor, reason string, sent, cameBack int64, now time.Time) (*Policy, error) {
	if p.State != StateSuspended {
		return nil, &Error{Problems: []string{"only a suspended policy can be resumed; it is " + p.State}}
	}
	if strings.TrimSpace(reason) == "" {
		return nil, &Error{Problems: []string{"a reason is required to resume"}}
	}
	return p.change(actor, "resumed", reason, now, func(n *Policy) {
		n.State, n.SuspendedReason = StateActive, ""
		n.BaselineSent, n.BaselineCameBack = sent, cameBack
	})
}

// Breaker is the breaker's reading of a policy's counters.
type Breaker struct {
	// Sent and CameBack count since the last resume.
	Sent, CameBack int64
	Share          float64
	Trip           bool
}

// Judge reads the policy's counters. The share is what came back over what
// was sent: replays not yet settled count as not come back, so the share
// only grows as comebacks arrive and a trip is never premature.
func (p *Policy) Judge(sent, cameBack int64) Breaker {
	b := Breaker{Sent: sent - p.BaselineSent, CameBack: cameBack - p.BaselineCameBack}
	if b.Sent > 0 {
		b.Share = float64(b.CameBack) / float64(b.Sent)
	}
	b.Trip = b.Sent >= int64(p.MinSample) && b.Share > p.Threshold
	return b
}

func (p *Policy) clone() *Policy {
	raw, _ := json.Marshal(p)
	var c Policy
	_ = json.Unmarshal(raw, &c)
	return &c
}

// ComputeSeal is the SHA-256 of p's canonical JSON without its seal,
// computed by the seal function records use (quarantine.CanonicalSHA256).
func (p *Policy) ComputeSeal() (string, error) {
	c := *p
	c.Seal = ""
	return quarantine.CanonicalSHA256(&c)
}

func (p *Policy) seal() error {
	s, err := p.ComputeSeal()
	p.Seal = s
	return err
}

// Verify checks p's seal.
func (p *Policy) Verify() error {
	s, err := p.ComputeSeal()
	if err != nil {
		return err
	}
	if s != p.Seal {
		return fmt.Errorf("policy %s: seal %s does not match its content (%s)", p.ID, p.Seal, s)
	}
	return nil
}

// ErrNotFound means no such policy.
var ErrNotFound = quarantine.NewKinded(quarantine.KindNotFound, "no such policy")

// ErrConflict means the policy changed since it was read.
var ErrConflict = quarantine.NewKinded(quarantine.KindConflict, "the policy changed since it was read; read it again")
