package quarantine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Store persists quarantine records. Every write is conditional: Create only
// when the dlq_id is new, Replace only when the stored version still equals
// the version it replaces. A writer recognizes its own applied write: when
// the condition fails because the store already holds exactly the version
// written (the same version and seal: a retried write whose first try was
// applied and whose answer was lost), the write succeeds. A write is one
// conditional write of the record's item and nothing else: the counters it
// changes (ChangeDeltas of the item before and after) are applied later,
// from the table's change stream, by the ledger (dynamostore.Counts);
// memstore applies them at once, the model of a ledger that has caught up.
// Implementations: dynamostore (DynamoDB) and memstore.
type Store interface {
	// Create stores a new record, or returns ErrExists.
	Create(ctx context.Context, r *Record) error
	// Get reads a record with a strongly consistent read, or returns ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)
	// GetMany reads many records in few calls, with strongly consistent
	// reads. Records that do not exist are absent from the result.
	GetMany(ctx context.Context, ids []string) (map[string]*Record, error)
	// Replace stores next in place of prev, the version the caller read,
	// when the stored version still equals prev.Version, or returns
	// ErrVersionConflict (ErrNotFound if the record is gone, ErrHeld if it
	// is under an integrity hold: never overwritten). Its counters change
	// by CounterDeltas(prev, next), once the ledger has counted it.
	Replace(ctx context.Context, prev, next *Record) error
	// Update is Get, fn, Replace, retried on ErrVersionConflict with the
	// record read again (see the function Update, which implements it).
	Update(ctx context.Context, id string, fn func(cur *Record) (*Record, error)) (*Record, error)
	// Hold sets aside the stored version h.Version of record h.ID, which
	// failed verification: it marks that exact version with an unsealed
	// integrity_hold attribute (the sealed fields stay exactly as found,
	// the evidence), counted once in its source's hold counter (HoldDeltas,
	// once the ledger has counted the change), and from
	// then on the record is left out of List and refused by Replace. A
	// second hold of a held record is a no-op. It returns
	// ErrVersionConflict when the stored version is another, ErrNotFound
	// when there is no such record.
	Hold(ctx context.Context, h IntegrityHold) error
	// PayloadIntents: the sweeper's record of the claim-check objects an
	// archived record frees.
	PayloadIntents
}

// IntegrityHold sets aside one record version that failed verification.
type IntegrityHold struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
	// Reason is a low-cardinality kind (HoldReason), never error text.
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// HoldReason names what failed: seal_mismatch, chain_mismatch,
// body_mismatch (the inline body against body_sha256) or payload_mismatch
// (a claim-checked object against its hash).
func HoldReason(err error) string {
	var se *SealError
	switch {
	case errors.As(err, &se) && se.Chain:
		return "chain_mismatch"
	case errors.As(err, &se) && se.Body:
		return "body_mismatch"
	case errors.As(err, &se):
		return "seal_mismatch"
	case errors.Is(err, ErrPayloadMismatch):
		return "payload_mismatch"
	}
	return "integrity"
}

// IsIntegrityFailure reports whether err says a record (or one of its
// claim-checked objects) does not verify: a record to hold, never to
// re-seal, release or send.
func IsIntegrityFailure(err error) bool {
	var se *SealError
	return errors.As(err, &se) || errors.Is(err, ErrPayloadMismatch)
}

// PayloadStore keeps bodies and attribute sets too large for a store item
// (the claim check). Implementations: s3store and memstore.
type PayloadStore interface {
	// PutPayload stores data under key and returns a reference with its hash.
	PutPayload(ctx context.Context, key string, data []byte) (ObjectRef, error)
	// GetPayload reads the object back and returns ErrPayloadMismatch when
	// its bytes do not hash to ref.SHA256.
	GetPayload(ctx context.Context, ref ObjectRef) ([]byte, error)
	// DeletePayload removes a claim-check object once its record is
	// archived.
	DeletePayload(ctx context.Context, ref ObjectRef) error
}

// ListQuery selects records through the index, oldest first_seen first
// within a source; a listing across sources (Source "") may go source by
// source (OldestLister), each source oldest first. Records with the same
// first_seen come in the store's order.
type ListQuery struct {
	Status Status
	// Source restricts to one source queue ("" for all).
	Source string
	// FirstSeenFrom and FirstSeenTo bound first_seen, inclusive (zero: open).
	FirstSeenFrom, FirstSeenTo time.Time
	// StatusSinceBefore keeps records in their status since at most this
	// instant (zero: any).
	StatusSinceBefore time.Time
	// Classes and Signatures restrict to these values (empty: any).
	Classes    []Class
	Signatures []string
	// Limit bounds the records examined per page (0: the store's default).
	Limit int
	// Cursor continues a previous page ("" for the first).
	Cursor string
	// Held lists only the records under an integrity hold (Store.Hold)
	// instead; without it held records are left out, so that they never
	// fill a run's max_messages or block the records behind them.
	Held bool
}

// ListPage is one page of record ids; Cursor is "" on the last page.
type ListPage struct {
	IDs []string
	// Entries are what the listing knows of each id in IDs (same order)
	// without reading the record: enough to keep a FIFO group in order.
	Entries []ListEntry
	Cursor  string
}

// ListEntry is a record as the status index holds it.
type ListEntry struct {
	ID        string
	Status    Status
	FirstSeen time.Time
	Class     Class
	Signature string
	// Group is the FIFO message group a replay is sent in (the message
	// group id, else the idempotency key); Sequence the SQS sequence
	// number of the first arrival.
	Group, Sequence string
	// LeaseUntil is set while a claim holds a REDRIVING record.
	LeaseUntil time.Time
	// StatusSince is when the record entered its status (its index entry
	// last moved).
	StatusSince time.Time
}

// EntryOf is the listing entry of r.
func EntryOf(r *Record) ListEntry {
	e := ListEntry{ID: r.DLQID, Status: r.Status, FirstSeen: r.FirstSeen.Time, Class: r.FailureClass, Signature: r.FailureSignature,
		Group: r.MessageGroupID, Sequence: r.SequenceNumber}
	if e.Group == "" {
		e.Group = r.IdempotencyKey
	}
	if r.LeaseUntil != nil {
		e.LeaseUntil = r.LeaseUntil.Time
	}
	e.StatusSince = r.StatusSince.Time
	return e
}

// Lister finds records by status without scanning the table.
type Lister interface {
	List(ctx context.Context, q ListQuery) (ListPage, error)
}

// Matches reports whether r satisfies q's filters (not its cursor or limit).
func (q ListQuery) Matches(r *Record) bool {
	if r.Status != q.Status || (q.Source != "" && r.Source != q.Source) {
		return false
	}
	if !q.FirstSeenFrom.IsZero() && r.FirstSeen.Before(q.FirstSeenFrom) {
		return false
	}
	if !q.FirstSeenTo.IsZero() && r.FirstSeen.After(q.FirstSeenTo) {
		return false
	}
	if !q.StatusSinceBefore.IsZero() && r.StatusSince.After(q.StatusSinceBefore) {
		return false
	}
	if len(q.Classes) > 0 && !slices.Contains(q.Classes, r.FailureClass) {
		return false
	}
	if len(q.Signatures) > 0 && !slices.Contains(q.Signatures, r.FailureSignature) {
		return false
	}
	return true
}

// SameVersion reports whether stored is exactly the version r would write:
// the same id, version, write token and seal. The write token is random
// per write (and under the seal), so no other writer produces it; a record
// without one never matches.
func SameVersion(stored, r *Record) bool {
	return stored != nil && r != nil && r.WriteID != "" && r.Seal != "" &&
		stored.DLQID == r.DLQID && stored.Version == r.Version && stored.WriteID == r.WriteID && stored.Seal == r.Seal
}

// CheckReplace is what a Store checks before Replace writes anything: next
// is the version that follows prev (every transition makes it so: one
// version on, chained to prev's seal). The write's condition is on
// prev.Version, so a prev of another record would condition the write on
// another item's version, and prev and next swapped would read back the
// stored prev as "my write was applied" and report a write that never
// happened.
func CheckReplace(prev, next *Record) error {
	switch {
	case prev == nil || next == nil:
		return errors.New("replace: prev and next are both required")
	case prev.DLQID != next.DLQID:
		return fmt.Errorf("replace %s: prev is a version of %s", next.DLQID, prev.DLQID)
	case next.Version != prev.Version+1 || next.PrevSeal != prev.Seal:
		return fmt.Errorf("replace %s: v%d does not follow v%d (its prev_seal is not v%d's seal)", next.DLQID, next.Version, prev.Version, prev.Version)
	}
	return nil
}
