// Package archive is the write-once archive object the sweeper puts in the
// S3 Object Lock bucket (one object per record version, holding the full
// sealed record and its payload): its envelope, its key, and the checks of
// an ARCHIVED stub against what its object holds. The S3 side (writing with
// a lock, reading, listing versions and retention) is adapter/s3store's.
package archive

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// FormatVersion is the envelope's format.
const FormatVersion = 1

// Envelope is the archive object's content. It holds nothing that differs
// between two writes of the same record version, so a rerun writes the same
// bytes and can recognise an object a crashed run already wrote.
type Envelope struct {
	Format int `json:"format"`
	// Record is the sealed record version, as stored.
	Record *quarantine.Record `json:"record"`
	// Payload is the body when the record kept it in the claim-check store.
	Payload *Payload `json:"payload,omitempty"`
	// Attributes are the message attributes when the record kept them in
	// the claim-check store.
	Attributes map[string]quarantine.Attribute `json:"attributes,omitempty"`
	// Corrections are the bodies of corrections the record kept in the
	// claim-check store, by correction number (the record holds the rest).
	Corrections map[string]string `json:"corrections,omitempty"`
}

// Payload is a body copied from the claim-check store.
type Payload struct {
	Encoding quarantine.Encoding `json:"encoding"`
	Data     string              `json:"data"`
}

// Key is where a record version is archived: by source and first-seen date,
// for audit retrieval, then by record and version.
func Key(r *quarantine.Record) string {
	d := r.FirstSeen.UTC()
	return fmt.Sprintf("archive/%s/%04d/%02d/%02d/%s/v%06d.json", r.Source, d.Year(), d.Month(), d.Day(),
		quarantine.BodySHA256([]byte(r.DLQID))[:32], r.Version)
}

// Build makes the envelope for r, fetching claim-checked parts.
func Build(ctx context.Context, payloads quarantine.PayloadStore, r *quarantine.Record) (*Envelope, error) {
	env := &Envelope{Format: FormatVersion, Record: r}
	if r.BodyRef != nil {
		body, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil {
			return nil, err
		}
		if utf8.Valid(body) {
			env.Payload = &Payload{Encoding: quarantine.EncodingUTF8, Data: string(body)}
		} else {
			env.Payload = &Payload{Encoding: quarantine.EncodingBase64, Data: base64.StdEncoding.EncodeToString(body)}
		}
	}
	for i := range r.Corrections {
		c := &r.Corrections[i]
		if c.BodyRef == nil {
			continue
		}
		body, err := quarantine.CorrectionBody(ctx, payloads, r, c)
		if err != nil {
			return nil, err
		}
		if env.Corrections == nil {
			env.Corrections = map[string]string{}
		}
		env.Corrections[c.CorrectionNumber()] = string(body)
	}
	if r.AttributesRef != nil {
		attrs, err := quarantine.LoadAttributes(ctx, payloads, r)
		if err != nil {
			return nil, err
		}
		env.Attributes = attrs
	}
	return env, nil
}

// Encode returns the envelope's bytes and their hex SHA-256.
func (e *Envelope) Encode() ([]byte, string, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, "", fmt.Errorf("encode archive envelope: %w", err)
	}
	sum := sha256.Sum256(raw)
	return raw, hex.EncodeToString(sum[:]), nil
}

// Body returns the archived record's original body.
func (e *Envelope) Body() ([]byte, error) {
	r := e.Record
	if e.Payload != nil {
		if e.Payload.Encoding == quarantine.EncodingBase64 {
			return base64.StdEncoding.DecodeString(e.Payload.Data)
		}
		return []byte(e.Payload.Data), nil
	}
	if r.BodyEncoding == quarantine.EncodingBase64 {
		return base64.StdEncoding.DecodeString(r.Body)
	}
	return []byte(r.Body), nil
}

// CorrectionBody returns the archived body of correction n.
func (e *Envelope) CorrectionBody(n int) ([]byte, error) {
	for _, c := range e.Record.Corrections {
		if c.N != n {
			continue
		}
		body := c.Body
		if c.BodyRef != nil {
			b, ok := e.Corrections[c.CorrectionNumber()]
			if !ok {
				return nil, fmt.Errorf("correction %d is not in the archive", n)
			}
			body = b
		}
		if quarantine.BodySHA256([]byte(body)) != c.BodySHA256 {
			return nil, fmt.Errorf("archived correction %d does not match its hash: %w", n, ErrMismatch)
		}
		return []byte(body), nil
	}
	return nil, fmt.Errorf("no correction %d", n)
}

// ErrMismatch means an archive object or its lock is not what the stub says.
var ErrMismatch = quarantine.ErrArchiveMismatch

// Decode reads an archive object's bytes as an envelope.
func Decode(raw []byte, key string) (*Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Record == nil {
		return nil, fmt.Errorf("archive object %s is not an archive envelope", key)
	}
	return &env, nil
}

// Problem is one thing a check of a stub found wrong. Kind is set for
// the problems of the key's versions (KindDeleteMarker,
// KindSecondVersion), empty for the rest.
type Problem struct {
	ID   string
	What string
	Kind string
}

// The kinds of an archive key's version problems: the ledger's names for
// the same thing (ledger.KindObjectDeleteMarker,
// ledger.KindObjectSecondVersion).
const (
	KindDeleteMarker  = "object-delete-marker"
	KindSecondVersion = "object-second-version"
)

// Object is what the archive bucket holds for a stub's reference: the
// bytes of the key's first version, the version ids under its key
// (oldest first) and its delete markers, and its lock, each with the
// error code (VersionsErr, LockErr) when it could not be read.
type Object struct {
	// Key is the object's key (empty: the stub's).
	Key string
	Raw []byte
	// Versions are the key's version ids, oldest first: the first is
	// the sweeper's (If-None-Match), the one Raw holds.
	Versions []string
	// Described are the versions as a problem names them ("ID of TIME"),
	// by version id (optional).
	Described map[string]string
	// DeleteMarkers are the key's delete markers, described.
	DeleteMarkers []string
	VersionsErr   string
	Lock          *Lock
	LockErr       string
}

func (o Object) describe(id string) string {
	if d, ok := o.Described[id]; ok {
		return d
	}
	return id
}

// Lock is an object's Object Lock retention.
type Lock struct {
	Compliance  bool // mode COMPLIANCE
	RetainUntil *time.Time
}

// CheckStub checks the stub on its own: its seal, and that it is an
// ARCHIVED stub with an archive reference. ok is false when there is no
// object to check it against.
func CheckStub(stub *quarantine.Record) (problems []Problem, ok bool) {
	bad := problemsOf(stub, &problems)
	if err := quarantine.Verify(stub); err != nil {
		bad("stub: %v", err)
	}
	if stub.Status != quarantine.StatusArchived || stub.Archive == nil {
		bad("not an archived stub")
		return problems, false
	}
	return problems, true
}

// CheckObject checks an ARCHIVED stub against its archive object: the
// object's bytes against the stub's checksum; the archived record's seal,
// its body against body_sha256, and the chain (the stub's prev_seal is the
// archived seal); one version under the key, the one the stub names; the
// lock (COMPLIANCE, retained until the stub says).
func CheckObject(stub *quarantine.Record, obj Object) []Problem {
	out, ok := CheckContent(stub, obj)
	if !ok {
		return out
	}
	out = append(out, CheckVersions(stub, obj)...)
	return append(out, CheckRetention(stub, obj)...)
}

// CheckContent is CheckObject's check of the object's bytes (obj.Raw)
// against the stub: a pure function of the two. ok is false when the
// bytes are no archive envelope of it (CheckObject then checks nothing
// more).
func CheckContent(stub *quarantine.Record, obj Object) (out []Problem, ok bool) {
	bad := problemsOf(stub, &out)
	a := stub.Archive
	if a == nil {
		bad("not an archived stub")
		return out, false
	}
	if sum := sha256.Sum256(obj.Raw); hex.EncodeToString(sum[:]) != a.SHA256 {
		bad("object checksum %x differs from the stub's %s", sum, a.SHA256)
	}
	env, err := Decode(obj.Raw, a.Key)
	if err != nil {
		bad("object is not an archive envelope")
		return out, false
	}
	rec := env.Record
	if err := quarantine.Verify(rec); err != nil {
		bad("archived record: %v", err)
	}
	// The stub was made from the archived version (its prev_seal is that
	// seal); later arrivals may have added stub versions since.
	if rec.Seal != a.Seal {
		bad("seal chain broken: archived seal %s, the stub's reference %s", rec.Seal, a.Seal)
	}
	if rec.DLQID != stub.DLQID || rec.Version >= stub.Version || (stub.Version == rec.Version+1 && stub.PrevSeal != rec.Seal) {
		bad("archived record %s v%d does not precede stub v%d (prev_seal %s)", rec.DLQID, rec.Version, stub.Version, stub.PrevSeal)
	}
	if rec.BodySHA256 != stub.BodySHA256 {
		bad("archived body hash differs from the stub's")
	}
	if body, err := env.Body(); err != nil || quarantine.BodySHA256(body) != rec.BodySHA256 {
		bad("archived body does not match body_sha256")
	}
	if len(rec.Corrections) != len(stub.Corrections) {
		bad("archived record has %d corrections, the stub %d", len(rec.Corrections), len(stub.Corrections))
	}
	for _, c := range rec.Corrections {
		if _, err := env.CorrectionBody(c.N); err != nil {
			bad("%v", err)
		}
	}
	return out, true
}

// CheckVersions is CheckObject's check of the versions and delete markers
// under the stub's key (obj.Versions, DeleteMarkers, VersionsErr).
func CheckVersions(stub *quarantine.Record, obj Object) []Problem {
	var out []Problem
	bad := problemsOf(stub, &out)
	a := stub.Archive
	if a == nil {
		return nil // CheckContent names it
	}
	// The sweeper writes exactly one version per key, and COMPLIANCE keeps
	// it: a second version or a delete marker means someone wrote beside
	// it (the first is the one checked), and a stub that points at another
	// version than the first was swapped.
	key := cmp.Or(obj.Key, a.Key)
	switch {
	case obj.VersionsErr != "":
		bad("object versions unreadable: %s", obj.VersionsErr)
	case len(obj.Versions) == 0:
		bad("archive key %s holds no version; the stub names %s", key, a.VersionID)
	default:
		if a.VersionID != "" && obj.Versions[0] != a.VersionID {
			bad("archive key holds versions %v; the stub names %s, not the first", obj.Versions, a.VersionID)
		}
		if len(obj.Versions) > 1 {
			later := make([]string, 0, len(obj.Versions)-1)
			for _, v := range obj.Versions[1:] {
				later = append(later, obj.describe(v))
			}
			out = append(out, Problem{ID: stub.DLQID, Kind: KindSecondVersion, What: fmt.Sprintf("archive object %s: %d versions: %s written after the first, %s, which is the one checked",
				key, len(obj.Versions), strings.Join(later, ", "), obj.describe(obj.Versions[0]))})
		}
	}
	for _, m := range obj.DeleteMarkers {
		out = append(out, Problem{ID: stub.DLQID, Kind: KindDeleteMarker, What: fmt.Sprintf("archive object %s: delete marker %s (the first version is the one checked)", key, m)})
	}
	return out
}

// CheckRetention is CheckObject's check of the object's lock (obj.Lock,
// LockErr): COMPLIANCE, retained at least until the stub says. S3 never
// shortens a COMPLIANCE retention nor changes its mode, so a version that
// passed once passes until the stub's retain-until date.
func CheckRetention(stub *quarantine.Record, obj Object) []Problem {
	var out []Problem
	bad := problemsOf(stub, &out)
	a := stub.Archive
	if a == nil {
		return nil // CheckContent names it
	}
	switch {
	case obj.LockErr != "":
		bad("object has no readable retention: %v", obj.LockErr)
	case obj.Lock == nil || !obj.Lock.Compliance:
		bad("object lock mode is not COMPLIANCE")
	case obj.Lock.RetainUntil == nil || obj.Lock.RetainUntil.Before(a.RetainUntil.Add(-time.Second)):
		bad("object retained until %v, the stub says %s", obj.Lock.RetainUntil, a.RetainUntil)
	}
	return out
}

func problemsOf(stub *quarantine.Record, out *[]Problem) func(format string, a ...any) {
	return func(format string, a ...any) {
		*out = append(*out, Problem{ID: stub.DLQID, What: fmt.Sprintf(format, a...)})
	}
}
