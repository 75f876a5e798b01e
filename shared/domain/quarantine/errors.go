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

// ErrorKind is the one classifier of errors for logs, metrics and reports:
// a short, low-cardinality name that never carries the error's text (which
// may name a record, and so an idempotency key). AWS errors are named by
// their code; an error that names its own kind (Kinded) by that; a
// refusal by what was refused; "unavailable" is left for what no case
// knows.
func ErrorKind(err error) string {
	var se *SealError
	var code interface{ ErrorCode() string }
	var kinded Kinded
	switch {
	case err == nil:
		return ""
	case errors.As(err, &kinded) && kinded.ErrorKind() != "":
		return kinded.ErrorKind()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, ErrContention):
		return "contention"
	case errors.Is(err, ErrItemTooLarge):
		return "too_large"
	case errors.Is(err, ErrPayloadMismatch):
		return "payload_mismatch"
	case errors.Is(err, ErrArchiveMismatch):
		return "archive_mismatch"
	case errors.Is(err, ErrHeld):
		return "integrity_hold"
	case errors.As(err, &se):
		return "seal_mismatch"
	case errors.Is(err, ErrNotClaimable):
		return KindWrongState
	case errors.Is(err, ErrCapReached):
		return KindCapReached
	case errors.Is(err, ErrNotFound):
		return KindNotFound
	case errors.Is(err, ErrVersionConflict), errors.Is(err, ErrCorrectionConflict):
		return KindConflict
	case errors.As(err, &code):
		return "aws:" + code.ErrorCode()
	}
	return "unavailable"
}
