package quarantine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/wI2L/jsondiff"
)

// AttrCorrected is the message attribute a corrected replay carries: the
// number of the correction it sends.
const AttrCorrected = "dlq-corrected"

// Stage and reason recorded on a corrected record.
const (
	StageCorrection  = "operator"
	ReasonCorrection = "payload corrected"
)

// Correction is one operator fix of a record's payload. The original body
// stays in the record verbatim; each correction is kept beside it, sealed
// with the record (its body through BodySHA256, as the original's).
type Correction struct {
	N      int    `json:"n"`
	At     Time   `json:"at"`
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	// Approval names the four-eyes approval the correction ran under.
	Approval string `json:"approval,omitempty"`
	// Body is the corrected body (UTF-8 JSON); empty when BodyRef holds it
	// or, on an archived stub, when the archive does.
	Body       string     `json:"body,omitempty"`
	BodySHA256 string     `json:"body_sha256"`
	BodySize   int64      `json:"body_size"`
	BodyRef    *ObjectRef `json:"body_ref,omitempty"`
	// FromSHA256 is the body this one corrects (the original or the
	// previous correction); DiffSHA256 the SHA-256 of the canonical JSON
	// Patch (RFC 6902) from it.
	FromSHA256    string `json:"from_sha256"`
	DiffSHA256    string `json:"diff_sha256"`
	SchemaVersion string `json:"schema_version,omitempty"`
	// KeyAttribute, when set, is the attribute replays carry with the
	// record's idempotency key, so the consumer and a comeback see the same
	// event identity although the body changed.
	KeyAttribute string `json:"key_attribute,omitempty"`
	// NewKey is the idempotency key the operator asked the corrected event
	// to carry instead of the record's.
	NewKey string `json:"new_idempotency_key,omitempty"`
}

// CorrectionRequest asks for a correction.
type CorrectionRequest struct {
	Actor  string
	Reason string
	Body   []byte
	// NewKey accepts a corrected body whose event identity differs from the
	// record's; the new key is recorded.
	NewKey bool
}

// CorrectionError is a refused correction: nothing was changed. Problems
// name rules and fields, never values; Detail, the schema validator's own
// words, may quote the payload and is for the operator's terminal only
// (never logged, never in a function error).
type CorrectionError struct {
	ID       string
	Problems []string
	Detail   string
	// Kind is the refusal's kind for ErrorKind (schema_refused,
	// wrong_state, archived, cap_reached; empty: correction_refused).
	Kind string
}

// ErrorKind names the refusal (Kinded).
func (e *CorrectionError) ErrorKind() string {
	if e.Kind == "" {
		return "correction_refused"
	}
	return e.Kind
}

func (e *CorrectionError) Error() string {
	if e.ID == "" {
		return "correction refused: " + strings.Join(e.Problems, "; ")
	}
	return fmt.Sprintf("correction of %s refused: %s", e.ID, strings.Join(e.Problems, "; "))
}

// ErrCorrectionConflict means the record changed between reading it and
// storing the correction (another correction, a redrive or an arrival won).
var ErrCorrectionConflict = errors.New("the record changed while it was being corrected; read it again and retry")

// Latest returns the correction a replay sends, or nil.
func (r *Record) Latest() *Correction {
	if len(r.Corrections) == 0 {
		return nil
	}
	return &r.Corrections[len(r.Corrections)-1]
}

// HasCorrection reports whether a correction of r has the body hash sum.
func (r *Record) HasCorrection(sum string) bool {
	for _, c := range r.Corrections {
		if c.BodySHA256 == sum {
			return true
		}
	}
	return false
}

// Correct returns r with the correction added, or a *CorrectionError when
// it is refused: the record is not QUARANTINED, its cap is reached, the new
// body fails src's current schema or does not change anything, or the
// correction would change the event identity without req.NewKey.
// keyAttribute is the attribute ingest reads producer keys from; attrs are
// the record's original attributes.
func (r *Record) Correct(src *Source, keyAttribute string, attrs map[string]Attribute, prevBody []byte, req CorrectionRequest, now time.Time) (*Record, error) {
	problems, kind := r.uncorrectable()
	refuse := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if strings.TrimSpace(req.Actor) == "" || strings.TrimSpace(req.Reason) == "" {
		refuse("a correction needs who made it and why")
	}
	if !utf8.Valid(req.Body) {
		refuse("the corrected body is not UTF-8")
	}
	if len(problems) > 0 {
		return nil, &CorrectionError{ID: r.DLQID, Problems: problems, Kind: kind}
	}
	sum := BodySHA256(req.Body)
	if sum == BodySHA256(prevBody) {
		return nil, &CorrectionError{ID: r.DLQID, Problems: []string{"the corrected body is the body it corrects"}}
	}
	v := src.Check(req.Body)
	if !v.Valid {
		why := v.Reason
		if len(v.Failing) > 0 {
			why = strings.Join(v.Failing, "; ")
		}
		return nil, &CorrectionError{ID: r.DLQID, Problems: []string{"the corrected body fails the current schema: " + Clip(why, MaxReasonBytes)}, Detail: v.Detail, Kind: KindSchemaRefused}
	}
	c := Correction{
		N: len(r.Corrections) + 1, At: At(now), Actor: Clip(ActorName(req.Actor), MaxActorBytes), Approval: ActorApproval(req.Actor), Reason: Clip(req.Reason, 512),
		Body: string(req.Body), BodySHA256: sum, BodySize: int64(len(req.Body)), FromSHA256: BodySHA256(prevBody),
		SchemaVersion: src.SchemaVersion,
	}
	diff, err := Diff(prevBody, req.Body)
	if err != nil {
		return nil, &CorrectionError{ID: r.DLQID, Problems: []string{err.Error()}}
	}
	if c.DiffSHA256, err = diffSHA256(diff); err != nil {
		return nil, err
	}
	// The event identity.
	newKey, _ := DeriveKey(src, keyAttribute, attrs, v.Doc, src.ARN, req.Body)
	switch r.KeyOrigin {
	case KeyFromAttribute:
		if req.NewKey {
			return nil, &CorrectionError{ID: r.DLQID, Problems: []string{"the key is the producer's " + keyAttribute + " attribute, which replays keep; a correction cannot change it"}}
		}
	case KeyFromPointer:
		switch {
		case newKey != r.IdempotencyKey && !req.NewKey:
			return nil, &CorrectionError{ID: r.DLQID, Problems: []string{"the correction changes the event identity at " + src.IdempotencyPointer + "; ask for a new key to accept that"}}
		case newKey == r.IdempotencyKey && req.NewKey:
			return nil, &CorrectionError{ID: r.DLQID, Problems: []string{"a new key was asked for, but the corrected body keeps the identity at " + src.IdempotencyPointer}}
		case req.NewKey:
			c.NewKey = newKey
		}
	default:
		if req.NewKey {
			c.NewKey = newKey
		} else {
			c.KeyAttribute = keyAttribute
		}
	}
	room := len(attrs) + 1
	if c.KeyAttribute != "" {
		room++
	}
	if c.NewKey != "" {
		room++ // dlq-record-id: how its comeback finds this record again
	}
	if room > 10 {
		return nil, &CorrectionError{ID: r.DLQID, Problems: []string{fmt.Sprintf("the message has %d attributes; a corrected replay needs room for %d more within SQS's 10", len(attrs), room-len(attrs))}}
	}
	n := r.next(now, Attempt{Stage: StageCorrection, Reason: fmt.Sprintf("correction %d: %s", c.N, Clip(req.Reason, 200)),
		Actor: req.Actor, BodySHA256: sum, Note: "diff " + c.DiffSHA256})
	n.Corrections = append(n.Corrections, c)
	n.FailureClass, n.FailureStage, n.FailureReason, n.FailureDetail = ClassExhausted, StageCorrection, ReasonCorrection, ""
	n.FailureSignature = Signature(StageCorrection, ReasonCorrection, src.SchemaVersion)
	n.SchemaVersion = src.SchemaVersion
	return n, n.reseal(r)
}

// uncorrectable says why r cannot take a correction now, if it cannot.
func (r *Record) uncorrectable() ([]string, string) {
	switch {
	case r.Status != StatusQuarantined:
		return []string{fmt.Sprintf("the record is %s; only QUARANTINED records can be corrected", r.Status)}, StateKind(r.Status)
	case r.RedriveCount >= r.RedriveCap:
		return []string{fmt.Sprintf("the redrive cap %d is reached", r.RedriveCap)}, KindCapReached
	case len(r.Corrections) >= r.RedriveCap:
		return []string{fmt.Sprintf("%d corrections already; corrections are bounded by the redrive cap %d", len(r.Corrections), r.RedriveCap)}, KindCapReached
	}
	return nil, ""
}

// DiffOp is one operation of a structural JSON diff.
type DiffOp = jsondiff.Operation

// Diff returns the RFC 6902 JSON Patch from a to b. A body that is not JSON
// is diffed as one replaced document.
func Diff(a, b []byte) ([]DiffOp, error) {
	if !json.Valid(a) || !json.Valid(b) {
		var doc any
		if json.Unmarshal(b, &doc) != nil {
			return nil, errors.New("the corrected body is not JSON")
		}
		return []DiffOp{{Type: "replace", Path: "", Value: doc}}, nil
	}
	p, err := jsondiff.CompareJSON(a, b)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return p, nil
}

func diffSHA256(ops []DiffOp) (string, error) {
	raw, err := json.Marshal(ops)
	if err != nil {
		return "", err
	}
	if raw, err = jcs.Transform(raw); err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// Corrector stores corrections: a pure transition (Record.Correct) plus
// the reads and the one conditional write around it.
type Corrector struct {
	Store Store
	// Payloads holds claim-checked bodies and attributes, and corrections
	// too large for the item; nil when no bucket is configured.
	Payloads PayloadStore
	// Now stamps the correction (nil: time.Now).
	Now func() time.Time
	// Sources are the configured sources by name; a record of any other
	// source is refused.
	Sources map[string]*Source
	// KeyAttribute is the attribute ingest reads producer keys from
	// (default DefaultKeyAttribute).
	KeyAttribute string
	// MaxAttempts is ingest's attempt history bound, whose growth the item
	// budget reserves room for (default DefaultMaxAttempts).
	MaxAttempts int
}

// Correct stores a correction of record id: the body it corrects is the
// latest correction's, or the original. It writes once, conditional on the
// version read, so of two concurrent corrections one wins and the other
// gets ErrCorrectionConflict. A correction body that would make the item
// too large goes to the payload store. (Not Store.Update: a correction is
// never retried onto a version its requester did not see, and the payload
// write between the read and the write must not be repeated.)
func (k Corrector) Correct(ctx context.Context, id string, req CorrectionRequest) (*Record, error) {
	cur, next, err := k.prepare(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return k.store(ctx, id, req, cur, next)
}

// Check refuses, as Correct would, a correction of record id that is not
// one (the record, its source, the schema, the identity rules), and writes
// nothing: a high-risk request is checked before it waits for a second
// person, so that nobody approves what cannot run.
func (k Corrector) Check(ctx context.Context, id string, req CorrectionRequest) error {
	_, _, err := k.prepare(ctx, id, req)
	return err
}

// prepare reads record id and makes its corrected version.
func (k Corrector) prepare(ctx context.Context, id string, req CorrectionRequest) (*Record, *Record, error) {
	now, keyAttribute := k.Now, k.KeyAttribute
	if now == nil {
		now = time.Now
	}
	if keyAttribute == "" {
		keyAttribute = DefaultKeyAttribute
	}
	cur, err := k.Store.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	src, ok := k.Sources[cur.Source]
	if !ok {
		return nil, nil, &CorrectionError{ID: id, Problems: []string{"source " + cur.Source + " is not configured"}}
	}
	// Refuse before reading payloads an archived stub no longer holds.
	if p, kind := cur.uncorrectable(); p != nil {
		return nil, nil, &CorrectionError{ID: id, Problems: p, Kind: kind}
	}
	prev, err := ReplayBody(ctx, k.Payloads, cur)
	if err != nil {
		return nil, nil, err
	}
	attrs, err := LoadAttributes(ctx, k.Payloads, cur)
	if err != nil {
		return nil, nil, err
	}
	next, err := cur.Correct(src, keyAttribute, attrs, prev, req, now().UTC())
	if err != nil {
		return nil, nil, err
	}
	return cur, next, nil
}

// store writes next, the correction of cur, its body to the payload store
// when the item would be too large.
func (k Corrector) store(ctx context.Context, id string, req CorrectionRequest, cur, next *Record) (*Record, error) {
	maxAttempts := k.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	maxAttempts = min(maxAttempts, MaxMaxAttempts)
	size, err := RecordSize(next)
	if err != nil {
		return nil, err
	}
	if size+GrowthReserve(maxAttempts) > ItemBudget {
		if k.Payloads == nil {
			return nil, fmt.Errorf("correction of %d bytes needs a payload bucket: %w", len(req.Body), ErrItemTooLarge)
		}
		c := next.Latest()
		ref, err := k.Payloads.PutPayload(ctx, PayloadKey("corrections", next, c.BodySHA256), req.Body)
		if err != nil {
			return nil, fmt.Errorf("store correction: %w", err)
		}
		c.BodyRef, c.Body = &ref, ""
		if err := next.reseal(cur); err != nil {
			return nil, err
		}
	}
	if err := k.Store.Replace(ctx, cur, next); err != nil {
		if errors.Is(err, ErrVersionConflict) || errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("correct %s: %w", id, ErrCorrectionConflict)
		}
		return nil, fmt.Errorf("store correction: %w", err)
	}
	return next, nil
}

// ReplayBody returns the body a replay of r sends: its latest correction,
// or the original. Either is checked against its sealed hash.
func ReplayBody(ctx context.Context, payloads PayloadStore, r *Record) ([]byte, error) {
	c := r.Latest()
	if c == nil {
		return LoadBody(ctx, payloads, r)
	}
	return CorrectionBody(ctx, payloads, r, c)
}

// CorrectionBody returns the body of correction c of r, checked against
// its hash.
func CorrectionBody(ctx context.Context, payloads PayloadStore, r *Record, c *Correction) ([]byte, error) {
	body := []byte(c.Body)
	if c.BodyRef != nil {
		if payloads == nil {
			return nil, fmt.Errorf("record %s: correction %d is in the payload store, none configured", r.DLQID, c.N)
		}
		b, err := payloads.GetPayload(ctx, *c.BodyRef)
		if err != nil {
			return nil, fmt.Errorf("load correction %d of %s: %w", c.N, r.DLQID, err)
		}
		body = b
	}
	if BodySHA256(body) != c.BodySHA256 {
		return nil, fmt.Errorf("record %s correction %d: %w", r.DLQID, c.N, ErrPayloadMismatch)
	}
	return body, nil
}

// CorrectionNumber is the value of the AttrCorrected attribute.
func (c *Correction) CorrectionNumber() string { return strconv.Itoa(c.N) }
