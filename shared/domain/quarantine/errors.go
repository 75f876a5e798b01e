package quarantine

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors for expected outcomes. Adapters map their own errors to these.
var (
	// ErrExists means a record with the same dlq_id is already stored.
	ErrExists = errors.New("record already exists")
	// ErrNotFound means no record has the requested dlq_id.
	ErrNotFound = errors.New("record not found")
	// ErrVersionConflict means the record changed since it was read.
	ErrVersionConflict = errors.New("record version conflict")
	// ErrItemTooLarge means the record would not fit in one store item.
	ErrItemTooLarge = errors.New("record too large for one item")
	// ErrPayloadMismatch means a claim-check object does not hash to its reference.
	ErrPayloadMismatch = errors.New("payload hash mismatch")
	// ErrNotClaimable means the record is not in a state a redrive may claim
	// (in flight under a live lease, already redriven, resolved, parked or
	// archived).
	ErrNotClaimable = errors.New("record not claimable")
	// ErrCapReached means the record was replayed redrive_cap times already.
	ErrCapReached = errors.New("redrive cap reached")
	// ErrContention means too many concurrent writers raced for one record;
	// the caller should let the message be delivered again.
	ErrContention = errors.New("too much contention on record")
	// ErrHeld means the record failed verification and was set aside by
	// an integrity hold (Store.Hold) instead of being changed.
	ErrHeld = errors.New("the record fails verification: set aside by an integrity hold, not changed")
)

// SealError reports a record whose seal, or whose link to the previous
// version, does not verify.
type SealError struct {
	ID       string
	Stored   string
	Computed string
	// Chain is true when the prev_seal link is what failed.
	Chain bool
	// Body is true when the inline body does not match body_sha256.
	Body bool
}

func (e *SealError) Error() string {
	what := "seal"
	switch {
	case e.Chain:
		what = "prev_seal chain"
	case e.Body:
		what = "body hash"
	}
	return fmt.Sprintf("record %s: %s mismatch: stored %q, computed %q", e.ID, what, e.Stored, e.Computed)
}

// ErrArchiveMismatch means an archive object or its lock is not what its
// stub says.
var ErrArchiveMismatch = errors.New("archive mismatch")

// Kinded is an error that names its own kind for ErrorKind: a refusal
// (wrong_state, schema_refused, archived, bad_request, …) says what it is,
// so that it never reads as an outage.
type Kinded interface {
	error
	ErrorKind() string
}

// Kinds of refusals: the request or the record's state, not the system,
// is why nothing was done.
const (
	KindWrongState    = "wrong_state"
	KindArchived      = "archived"
	KindSchemaRefused = "schema_refused"
	KindCapReached    = "cap_reached"
	KindNotFound      = "not_found"
	KindConflict      = "conflict"
)

// StateKind is the kind of a refusal because of a record's status s:
// archived for an archived stub, else wrong_state.
func StateKind(s Status) string {
	if s == StatusArchived {
		return KindArchived
	}
	return KindWrongState
}

// KindExists is the kind of a create refused because the record is
// already stored (ErrExists).
const KindExists = "exists"

// kindedError is a sentinel error that names its own kind (NewKinded).
type kindedError struct{ kind, text string }

func (e *kindedError) Error() string     { return e.text }
func (e *kindedError) ErrorKind() string { return e.kind }

// NewKinded returns a sentinel error with text that ErrorKind names kind
// (a refusal: conflict, not_found, …); compare it with errors.Is.
func NewKinded(kind, text string) error { return &kindedError{kind: kind, text: text} }

// Severities of kinds, for an error that holds several (errors.Join, a
// fmt.Errorf with several %w): the worst is reported, and any outage is
// worse than any refusal, so that one refusal among throttled calls never
// hides the outage.
const (
	sevRefusal     = iota // the request or the record's state refused it
	sevUnavailable        // unknown, contention, too large
	sevDeadline           // the context ended
	sevAWS                // an AWS error code
	sevIntegrity          // a seal, payload or archive that does not verify
)

// ErrorKind is the one classifier of errors for logs, metrics and reports:
// a short, low-cardinality name that never carries the error's text (which
// may name a record, and so an idempotency key). AWS errors are named by
// their code; an error that names its own kind (Kinded) by that; a
// refusal by what was refused; "unavailable" is left for what no case
// knows. An error that joins several is named by its worst part: an
// integrity failure, then an AWS code, then the deadline, then an unknown
// error, and a refusal only when every part is one.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	kind, _ := classify(err)
	return kind
}

// MoreSevere reports whether err is worse than than by the order ErrorKind
// names a joined error by (an outage before any refusal), so that a
// bounded list of errors can keep its worst one.
func MoreSevere(err, than error) bool {
	if err == nil {
		return false
	}
	if than == nil {
		return true
	}
	_, a := classify(err)
	_, b := classify(than)
	return a > b
}

// classify names err and its severity: err itself when a case knows it,
// else the worst of what it wraps.
func classify(err error) (string, int) {
	if kind, sev, ok := classifyNode(err); ok {
		return kind, sev
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		kind, sev := "", -1
		for _, e := range u.Unwrap() {
			if e == nil {
				continue
			}
			if k, s := classify(e); s > sev {
				kind, sev = k, s
			}
		}
		if sev >= 0 {
			return kind, sev
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return classify(e)
		}
	}
	return "unavailable", sevUnavailable
}

// is reports whether err itself (not what it wraps) is target.
func is(err, target error) bool {
	if err == target {
		return true
	}
	x, ok := err.(interface{ Is(error) bool })
	return ok && x.Is(target)
}

// classifyNode names err by itself, not by what it wraps.
func classifyNode(err error) (string, int, bool) {
	if k, ok := err.(Kinded); ok && k.ErrorKind() != "" {
		return k.ErrorKind(), sevRefusal, true
	}
	if se, ok := err.(*SealError); ok && se != nil {
		return "seal_mismatch", sevIntegrity, true
	}
	for _, c := range []struct {
		target error
		kind   string
		sev    int
	}{
		{context.Canceled, "deadline", sevDeadline},
		{context.DeadlineExceeded, "deadline", sevDeadline},
		{ErrContention, "contention", sevUnavailable},
		{ErrItemTooLarge, "too_large", sevUnavailable},
		{ErrPayloadMismatch, "payload_mismatch", sevIntegrity},
		{ErrArchiveMismatch, "archive_mismatch", sevIntegrity},
		{ErrHeld, "integrity_hold", sevIntegrity},
		{ErrNotClaimable, KindWrongState, sevRefusal},
		{ErrCapReached, KindCapReached, sevRefusal},
		{ErrNotFound, KindNotFound, sevRefusal},
		{ErrVersionConflict, KindConflict, sevRefusal},
		{ErrCorrectionConflict, KindConflict, sevRefusal},
		{ErrExists, KindExists, sevRefusal},
	} {
		if is(err, c.target) {
			return c.kind, c.sev, true
		}
	}
	if code, ok := err.(interface{ ErrorCode() string }); ok {
		return "aws:" + code.ErrorCode(), sevAWS, true
	}
	return "", 0, false
}
