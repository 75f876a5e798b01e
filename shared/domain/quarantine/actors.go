package quarantine

import "strings"

// Actors the system records for itself. No outside request may act as
// one of them (ReservedActor): a history entry's actor must say truthfully
// who wrote it.
const (
	// ActorSweeper archives records.
	ActorSweeper = "sweeper"
	// ActorBreaker suspends a standing policy whose replays come back.
	ActorBreaker = "breaker"
	// ScheduleActorPrefix starts the requester of the scheduled runs
	// (schedule:settle, schedule:policies).
	ScheduleActorPrefix = "schedule:"
)

// reservedActors and reservedActorPrefixes are the one list of the names
// the system uses for itself; PolicyActorPrefix is in counters.go.
var (
	reservedActors        = []string{ActorIngest, ActorSettle, ActorSweeper, ActorBreaker}
	reservedActorPrefixes = []string{PolicyActorPrefix, ScheduleActorPrefix}
)

// ReservedActor reports whether name, trimmed and in any case, is a name
// the system uses for itself (ingest, settler, sweeper, breaker, policy:…,
// schedule:…). Outside requests and operators must not use one. (The
// actor a history records for a request is set from how it arrived: the
// verified principal's ARN, or "unverified:" and the name a direct invoke
// gave; identity.)
func ReservedActor(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, a := range reservedActors {
		if n == a {
			return true
		}
	}
	for _, p := range reservedActorPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// approvalSep and targetSep join an actor and the approval it acts under,
// and the queue it sends to, in the actor string the redrive use case
// passes to a transition (WithApproval, WithTarget). A request's
// requester name never holds a control character, so no request can name
// an approval or a target this way.
const (
	actorSep    = "\x1f"
	approvalSep = actorSep + "approval="
	targetSep   = actorSep + "target="
)

// FourEyesOff is the Approval of a high-risk action whose source's
// four_eyes setting leaves its risk out: it ran on one verified request.
const FourEyesOff = "four-eyes-off"

// WithApproval is the actor string of actor acting under approval id: each
// transition records actor as the entry's actor and id as its Approval.
func WithApproval(actor, id string) string {
	if id == "" {
		return actor
	}
	return actor + approvalSep + id
}

// WithTarget is the actor string of actor replaying into the registered
// source target instead of each record's own: each transition records
// target as its entry's Target (a redrive to another queue).
func WithTarget(actor, target string) string {
	if target == "" {
		return actor
	}
	return actor + targetSep + target
}

// ActorName is the actor of an actor string (WithApproval, WithTarget).
func ActorName(actor string) string {
	name, _, _ := strings.Cut(actor, actorSep)
	return name
}

// ActorApproval is the approval of an actor string ("" when none).
func ActorApproval(actor string) string { return actorPart(actor, approvalSep) }

// ActorTarget is the target of an actor string ("" when none).
func ActorTarget(actor string) string { return actorPart(actor, targetSep) }

func actorPart(actor, sep string) string {
	_, v, ok := strings.Cut(actor, sep)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, actorSep)
	return v
}

// ScheduleActor reports whether name is a schedule's requester name
// (schedule:…), which only the scheduled settle and policies runs use.
func ScheduleActor(name string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), ScheduleActorPrefix)
}

// Bounds of the texts a record stores. Every text that comes from a
// message, a request or an operator is clipped to one of these before it is
// stored, so that a record's size has a hard bound once its body and
// attributes are in the payload store.
const (
	MaxActorBytes     = 256
	MaxReasonBytes    = 512
	MaxStageBytes     = maxSignaturePart
	MaxNoteBytes      = 512
	MaxMessageIDBytes = 128
	MaxDetailBytes    = 2048
	// maxAttemptBytes bounds one bounded attempt in the item, by
	// DynamoDB's size rules (UTF-8 bytes of names and values): its texts,
	// the body hash, the time, a target queue's name (80) and the attribute
	// names with their overhead.
	maxAttemptBytes = MaxActorBytes + MaxReasonBytes + MaxStageBytes + MaxNoteBytes + MaxMessageIDBytes + 64 + 64 + 80 + 256
	// maxReadBytes bounds one payload read entry likewise.
	maxReadBytes = MaxActorBytes + 128
)

// AttemptArrival is the kind of an attempt that records an arrival from
// the DLQ. Only newRecord and Arrive write it.
const AttemptArrival = "arrival"

// bound clips every text of a to its bound.
func (a Attempt) bound() Attempt {
	a.Stage = Clip(a.Stage, MaxStageBytes)
	a.Reason = Clip(a.Reason, MaxReasonBytes)
	a.MessageID = Clip(a.MessageID, MaxMessageIDBytes)
	a.Actor = Clip(a.Actor, MaxActorBytes)
	a.BodySHA256 = Clip(a.BodySHA256, 64)
	a.Note = Clip(a.Note, MaxNoteBytes)
	a.Kind = Clip(a.Kind, 16)
	a.Approval = Clip(a.Approval, 64)
	a.Target = Clip(a.Target, 80)
	return a
}

// IsArrival reports whether a records an arrival from the DLQ. It goes by
// what the entry is, not by its actor's name: entries written since kinds
// exist say so in Kind; an older entry is an arrival when ingest wrote it
// at a stage no other transition uses.
func (a *Attempt) IsArrival() bool {
	if a.Kind != "" {
		return a.Kind == AttemptArrival
	}
	if a.Actor != ActorIngest {
		return false
	}
	switch a.Stage {
	case StageRedrive, StageSettle, StageArchive, StageOperator, StageAudit:
		return false
	}
	return true
}

// bound clips the texts of c to their bounds.
func (c Classification) bound() Classification {
	c.Stage = Clip(c.Stage, MaxStageBytes)
	c.Reason = Clip(c.Reason, MaxReasonBytes)
	c.Detail = Clip(c.Detail, MaxDetailBytes)
	c.Signature = Clip(c.Signature, 3*maxSignaturePart+2)
	return c
}
