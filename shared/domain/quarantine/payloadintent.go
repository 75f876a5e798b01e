package quarantine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// PayloadIntent names the claim-check objects that one ARCHIVED stub frees.
// The sweeper writes it after the record's archive object is written and
// confirmed and before the stub, and drops it once the objects are deleted;
// a later run finishes one that is left (a delete refused, a crash or a
// lost answer after the stub write) or drops it when the stub was never
// written. Every object an intent of the sweeper's names is in its
// confirmed archive object, so deleting them loses nothing; a run acts on
// an intent only while its record is the ARCHIVED stub of that object
// (sealed), and deletes only that record's objects (OwnsPayload), so that
// one written by anyone else deletes nothing a live record needs.
type PayloadIntent struct {
	// Key is the store's key of the intent (set by the store on read).
	Key string `json:"-"`
	// Rev is the stored revision (set by the store on record and read):
	// a replace or a drop applies only while it is still stored, so that
	// no run drops or narrows another run's intent of the same version.
	// "" on a Malformed one.
	Rev     string `json:"-"`
	ID      string `json:"id"`
	Source  string `json:"source"`
	Version int64  `json:"version"` // the stub's version
	At      Time   `json:"at"`
	// Archive is the confirmed archive object the stub points at.
	Archive ArchiveObject `json:"archive"`
	Refs    []ObjectRef   `json:"refs"`
	// Malformed says why a stored intent does not read (a kind, never
	// stored values); only Key is set then.
	Malformed string `json:"-"`
}

// PayloadIntentKey is the store key of the intent of record id's stub
// version: "#swp#<id>#<version>" (no record key starts with '#').
func PayloadIntentKey(id string, version int64) string {
	return "#swp#" + id + "#" + strconv.FormatInt(version, 10)
}

// ArchiveObject names one archive object version.
type ArchiveObject struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"version_id,omitempty"`
}

// ErrIntentMoved says a payload intent is no longer the revision read:
// another run replaced or dropped it (and settles it itself).
var ErrIntentMoved = errors.New("payload intent replaced or dropped since it was read")

// PayloadIntents keeps the sweeper's payload intents.
// Implementations: dynamostore and memstore.
type PayloadIntents interface {
	// RecordPayloadIntent stores in, replacing any stored intent of the
	// same record version, and returns its revision.
	RecordPayloadIntent(ctx context.Context, in PayloadIntent) (rev string, err error)
	// ReplacePayloadIntent stores in in place of revision in.Rev, or
	// returns ErrIntentMoved, and returns the new revision.
	ReplacePayloadIntent(ctx context.Context, in PayloadIntent) (rev string, err error)
	// DuePayloadIntents returns up to limit intents recorded before
	// before, oldest first (At); one that does not read comes with
	// Malformed (and its Key alone).
	DuePayloadIntents(ctx context.Context, before time.Time, limit int) ([]PayloadIntent, error)
	// DropPayloadIntent removes revision in.Rev of the intent in.Key, or
	// returns ErrIntentMoved; with Rev "" (a Malformed one) whatever is
	// stored under in.Key.
	DropPayloadIntent(ctx context.Context, in PayloadIntent) error
}

// PayloadRefs are the claim-check objects r references: its body, its
// attributes and every correction's body.
func PayloadRefs(r *Record) []ObjectRef {
	var refs []ObjectRef
	add := func(ref *ObjectRef) {
		if ref != nil {
			refs = append(refs, *ref)
		}
	}
	add(r.BodyRef)
	add(r.AttributesRef)
	for _, c := range r.Corrections {
		add(c.BodyRef)
	}
	return refs
}

// ErrForeignPayload says an intent names an object that is not one of its
// record's claim-check objects (PayloadKey).
var ErrForeignPayload = errors.New("object is not one of the record's claim-check objects")

// OwnsPayload reports whether key names one of r's claim-check objects:
// PayloadKey of a kind, r's source and r's id.
func OwnsPayload(r *Record, key string) bool {
	for _, kind := range []string{"bodies", "attributes", "corrections"} {
		prefix := PayloadKey(kind, r, "")
		if rest, ok := strings.CutPrefix(key, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}
