package quarantine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults for Config fields left at zero.
const (
	DefaultKeyAttribute        = "idempotency-key"
	DefaultMaxAttempts         = 20
	DefaultRedriveCap          = 3
	DefaultBodyInlineMax       = 128 << 10
	DefaultAttributesInlineMax = 32 << 10
	DefaultMaxWriteRetries     = 64
	// MaxMaxAttempts is the largest attempt history a record may keep:
	// with every attempt's texts bounded, it keeps a record's growth within
	// its reserve under DynamoDB's 400 KB item limit.
	MaxMaxAttempts = 100
	// ItemBudget is the most a record may take in JSON when it is written
	// first, leaving room under DynamoDB's 400 KB item limit for attribute
	// names and the history growing to its bound (growthReserve).
	ItemBudget = 300 << 10
)

// growthReserve is what a record may grow by after it is created, in
// DynamoDB's size units: a full attempt history and a full list of reads,
// every entry at its bound. Failure fields are replaced, never appended,
// and are bounded too.
func growthReserve(maxAttempts int) int {
	return maxAttempts*maxAttemptBytes + DefaultMaxReads*maxReadBytes
}

// Config configures a Quarantiner.
type Config struct {
	// Sources by source queue name.
	Sources map[string]*Source
	// KeyAttribute is the message attribute holding a producer-supplied
	// idempotency key (default "idempotency-key").
	KeyAttribute string
	// MaxAttempts bounds the attempt history kept in a record (default 20).
	MaxAttempts int
	// DefaultRedriveCap applies to sources without their own (default 3).
	DefaultRedriveCap int
	// BodyInlineMax is the largest encoded body kept in the item; larger ones
	// go to the payload store (default 128 KiB).
	BodyInlineMax int
	// AttributesInlineMax is the largest attribute set, in JSON, kept in the
	// item (default 32 KiB).
	AttributesInlineMax int
	// MaxWriteRetries bounds optimistic-concurrency retries for one message
	// (default 64); past it the message is reported as failed and redelivered.
	MaxWriteRetries int
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.KeyAttribute == "" {
		out.KeyAttribute = DefaultKeyAttribute
	}
	if out.MaxAttempts <= 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	out.MaxAttempts = min(out.MaxAttempts, MaxMaxAttempts)
	if out.DefaultRedriveCap <= 0 {
		out.DefaultRedriveCap = DefaultRedriveCap
	}
	if out.BodyInlineMax <= 0 {
		out.BodyInlineMax = DefaultBodyInlineMax
	}
	if out.AttributesInlineMax <= 0 {
		out.AttributesInlineMax = DefaultAttributesInlineMax
	}
	if out.MaxWriteRetries <= 0 {
		out.MaxWriteRetries = DefaultMaxWriteRetries
	}
	return out
}

// sourceByDLQ finds the source whose DLQ is named dlqName.
func (c *Config) sourceByDLQ(dlqName string) *Source {
	for _, s := range c.Sources {
		if s.DLQName == dlqName {
			return s
		}
	}
	return nil
}

// Message is one dead-lettered SQS message, as the ingest function sees it.
type Message struct {
	MessageID  string
	Body       []byte
	Attributes map[string]Attribute
	// DLQARN is the queue the message was received from.
	DLQARN string
	// SourceARN is SQS's DeadLetterQueueSourceArn attribute, when present.
	SourceARN      string
	SentTimestamp  int64
	ReceiveCount   int
	TraceHeader    string
	MessageGroupID string
	// SequenceNumber is the SQS sequence number (FIFO queues).
	SequenceNumber string
	// After, when set, is the stamp of the previous message of the same
	// FIFO group in this batch: this one is stamped strictly after it, so
	// first_seen follows the DLQ order even within one clock tick.
	After time.Time
}

// Result says what quarantining one message did.
type Result string

// Results of Quarantine.
const (
	ResultCreated   Result = "created"
	ResultAppended  Result = "appended"
	ResultDuplicate Result = "duplicate"
)

// Outcome is the result of quarantining one message.
type Outcome struct {
	Result Result
	Record *Record
	// At is the instant the arrival was stamped with.
	At time.Time
}

// Quarantiner turns dead-lettered messages into sealed records: one per
// idempotency key, written with conditional writes only.
type Quarantiner struct {
	store    Store
	payloads PayloadStore
	now      func() time.Time
	cfg      Config
}

// NewQuarantiner returns a Quarantiner. payloads may be nil when no bucket
// is configured; oversized messages then fail (and are redelivered) instead
// of being stored incompletely. now may be nil for time.Now.
func NewQuarantiner(store Store, payloads PayloadStore, now func() time.Time, cfg Config) *Quarantiner {
	if now == nil {
		now = time.Now
	}
	return &Quarantiner{store: store, payloads: payloads, now: now, cfg: cfg.withDefaults()}
}

// Quarantine stores m durably. It returns an error only when the message was
// not durably stored and must be delivered again.
//
// The record for m is the one at its key's id, unless that record cannot
// take arrivals any more (it is ARCHIVED, or fails its seal): then m goes to
// a successor record at "<id>#r<n>", linked to it, and the record itself is
// left untouched. A corrected replay sent under a new key comes back to the
// record it was corrected in (see correctedComeback).
func (q *Quarantiner) Quarantine(ctx context.Context, m Message) (Outcome, error) {
	now := q.now().UTC()
	if !m.After.IsZero() && !now.After(m.After) {
		// The previous message of this FIFO group was stamped in this very
		// clock tick (or the clock stepped back): stay after it.
		now = m.After.UTC().Add(time.Nanosecond)
	}
	src, note := q.resolveSource(m)
	verdict := src.Check(m.Body)
	class := Classify(src, m.Attributes, verdict)
	key, origin := DeriveKey(src, q.cfg.KeyAttribute, m.Attributes, verdict.Doc, src.ARN, m.Body)

	att := Attempt{
		At: At(now), Stage: class.Stage, Reason: class.Reason, MessageID: m.MessageID,
		Actor: ActorIngest, ReceiveCount: m.ReceiveCount, BodySHA256: BodySHA256(m.Body), Note: note,
	}
	rec := q.newRecord(src, m, key, origin, class, att, now)
	start := rec.DLQID
	target, err := q.correctedComeback(ctx, src, m, key, att.BodySHA256)
	if err != nil {
		return Outcome{}, err
	}
	if target != nil {
		// The event keeps the identity of the record it was corrected in.
		start, rec.IdempotencyKey, rec.KeyOrigin = target.DLQID, target.IdempotencyKey, target.KeyOrigin
	}
	out, err := q.createOrAppend(ctx, start, rec, m, att, class)
	if errors.Is(err, errBodyConflict) {
		// The producer reused an idempotency key for a different body. Keep
		// the new body as its own record beside the original: never drop it.
		c := Classification{Class: ClassValidation, Stage: "ingest", Reason: "idempotency key reused with a different body"}
		c.Signature = Signature(c.Stage, c.Reason, src.SchemaVersion)
		att.Stage, att.Reason = c.Stage, c.Reason
		rec = q.newRecord(src, m, key, origin, c, att, now)
		out, err = q.createOrAppend(ctx, RecordID(src.Name, key)+"#body-"+att.BodySHA256[:16], rec, m, att, c)
	}
	out.At = now
	return out, err
}

var errBodyConflict = errors.New("idempotency key reused with a different body")

// ErrChainTooLong means a key has more successor records than ingest walks.
var ErrChainTooLong = errors.New("too many successor records for one key")

// maxChain bounds the successor records walked for one key (one is opened
// per archive of the key's current record, so chains stay short).
const maxChain = 256

// chainID is the id of position pos of the chain that starts at start: the
// start itself, then its successors "<start>#r<pos>".
func chainID(start string, pos int) string {
	if pos == 0 {
		return start
	}
	return start + "#r" + strconv.Itoa(pos)
}

// maxRecordIDBytes bounds a record id taken from a message attribute
// (DynamoDB allows 2048 bytes in a partition key).
const maxRecordIDBytes = 2048

// correctedComeback returns the record a corrected replay sent under a new
// key belongs to, or nil. The attributes redrive adds (dlq-record-id,
// dlq-corrected) are never trusted by themselves: the record must exist,
// verify, belong to the source, and hold that correction with exactly this
// new key and this body.
func (q *Quarantiner) correctedComeback(ctx context.Context, src *Source, m Message, key, sum string) (*Record, error) {
	rid, hasID := m.Attributes[AttrRecordID]
	cn, hasN := m.Attributes[AttrCorrected]
	if !hasID || !hasN || !strings.HasPrefix(rid.DataType, "String") || !strings.HasPrefix(cn.DataType, "Number") {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(cn.StringValue))
	id := rid.StringValue
	if err != nil || n < 1 || id == RecordID(src.Name, key) || !strings.HasPrefix(id, src.Name+"#") ||
		len(id) > maxRecordIDBytes || !utf8.ValidString(id) {
		return nil, nil
	}
	r, err := q.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read corrected record: %w", err)
	}
	if err := Verify(r); err != nil {
		var se *SealError
		if errors.As(err, &se) {
			return nil, nil // its corrections cannot be trusted
		}
		return nil, err
	}
	if r.Source != src.Name || n > len(r.Corrections) {
		return nil, nil
	}
	c := r.Corrections[n-1]
	if c.N != n || c.NewKey == "" || c.NewKey != key || c.BodySHA256 != sum {
		return nil, nil
	}
	return r, nil
}

// link is how a record on a key's chain stands towards an arrival.
type link int

const (
	linkOpen    link = iota // takes the arrival
	linkClosed              // archived: the arrival goes to its successor
	linkBroken              // fails its seal: nothing in it is trusted
	linkForeign             // another key's record that happens to sit at this id
)

// standing says how cur, at position pos of the chain, stands towards an
// arrival for proto's key; prev is the chain's last closed or broken record.
func standing(cur, prev, proto *Record, pos int) (link, error) {
	if err := Verify(cur); err != nil {
		var se *SealError
		if errors.As(err, &se) {
			return linkBroken, nil
		}
		return 0, err
	}
	if cur.IdempotencyKey != proto.IdempotencyKey {
		return linkForeign, nil
	}
	if pos > 0 {
		// A successor names the record before it; anything else at a
		// successor's id belongs to a key that ends in "#r<n>".
		want, got := "", ""
		if prev != nil {
			want = prev.DLQID
		}
		if cur.Predecessor != nil {
			got = cur.Predecessor.ID
		}
		if got != want {
			return linkForeign, nil
		}
	}
	if cur.Status == StatusArchived {
		return linkClosed, nil
	}
	return linkOpen, nil
}

// createOrAppend stores the arrival on the chain of records that starts at
// start: appended to the first record that takes arrivals, or created as a
// new record (proto, at the first free position, linked to the last record
// that could not take it). A duplicate delivery found anywhere on the chain
// is a no-op.
func (q *Quarantiner) createOrAppend(ctx context.Context, start string, proto *Record, m Message, att Attempt, class Classification) (Outcome, error) {
	baseNote := att.Note
	var (
		pos      int
		prev     *Record // the chain's last record that cannot take arrivals
		prevLink link
		accepted = map[string]bool{} // the bodies the chain's records hold
	)
	ours := func(id string) bool {
		for i := 0; i <= pos; i++ {
			if chainID(start, i) == id {
				return true
			}
		}
		return false
	}
	for i := 0; i < q.cfg.MaxWriteRetries; {
		if pos >= maxChain {
			return Outcome{}, fmt.Errorf("record %s: %w", LogRef(start), ErrChainTooLong)
		}
		id := chainID(start, pos)
		att.Note = joinNote(baseNote, redriveHeaderNote(m, ours))
		cur, err := q.store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			rec := q.successor(proto, id, prev, prevLink, att)
			if err := q.offload(ctx, rec); err != nil {
				return Outcome{}, err
			}
			if err := SealRecord(rec); err != nil {
				return Outcome{}, err
			}
			err := q.store.Create(ctx, rec)
			if err == nil {
				return Outcome{Result: ResultCreated, Record: rec}, nil
			}
			if !errors.Is(err, ErrExists) {
				return Outcome{}, fmt.Errorf("create record: %w", err)
			}
			i++ // another writer created it: read it
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("read record: %w", err)
		}
		st, err := standing(cur, prev, proto, pos)
		if err != nil {
			return Outcome{}, err
		}
		if st == linkForeign {
			pos++
			continue
		}
		if st == linkBroken {
			// Set aside, untouched: its history may be forged, so it
			// proves no duplicate either.
			prev, prevLink = cur, st
			pos++
			continue
		}
		if cur.HasMessage(m.MessageID) {
			return Outcome{Result: ResultDuplicate, Record: cur}, nil
		}
		accepted[cur.BodySHA256] = true
		for _, c := range cur.Corrections {
			// (A corrected replay coming back is the same event.)
			accepted[c.BodySHA256] = true
		}
		if !accepted[proto.BodySHA256] {
			return Outcome{}, errBodyConflict
		}
		if st == linkClosed {
			prev, prevLink = cur, st
			pos++
			continue
		}
		next, err := cur.Arrive(att, class, q.cfg.MaxAttempts, att.At.Time)
		var se *SealError
		if errors.As(err, &se) {
			prev, prevLink = cur, linkBroken
			pos++
			continue
		}
		if err != nil {
			return Outcome{}, err
		}
		err = q.store.Replace(ctx, cur, next)
		if err == nil {
			return Outcome{Result: ResultAppended, Record: next}, nil
		}
		if errors.Is(err, ErrHeld) {
			// Set aside by an integrity hold (its claim-checked payload
			// failed its hash, say): never written again, so the arrival
			// goes to a successor instead of being retried until the DLQ's
			// retention drops it.
			prev, prevLink = cur, linkBroken
			pos++
			continue
		}
		if !errors.Is(err, ErrVersionConflict) && !errors.Is(err, ErrNotFound) {
			return Outcome{}, fmt.Errorf("append attempt: %w", err)
		}
		if err := backoff(ctx, i); err != nil {
			return Outcome{}, err
		}
		i++
	}
	return Outcome{}, ErrContention
}

// successor returns the new record to create at id: proto itself, linked to
// prev when prev could not take the arrival. A successor of an archived
// record carries its redrive count on, so the cap holds across the chain.
func (q *Quarantiner) successor(proto *Record, id string, prev *Record, how link, att Attempt) *Record {
	rec := proto.Clone()
	rec.DLQID = id
	att.Kind = AttemptArrival
	if prev == nil {
		rec.Attempts = appendBounded(nil, att, q.cfg.MaxAttempts)
		return rec
	}
	reason := LinkArchived
	if how == linkBroken {
		reason = LinkSealMismatch
	}
	rec.Predecessor = &RecordLink{ID: prev.DLQID, Seal: prev.Seal, Reason: reason}
	// The same event: it keeps its place in its FIFO group (the order a
	// replay walks a group in), as first_seen is kept on any re-failure.
	if !prev.FirstSeen.IsZero() && prev.FirstSeen.Before(rec.FirstSeen.Time) {
		rec.FirstSeen = prev.FirstSeen
	}
	if prev.SequenceNumber != "" {
		rec.SequenceNumber = prev.SequenceNumber
	}
	if how == linkClosed {
		rec.RedriveCount = prev.RedriveCount
		rec.RedriveCap = max(rec.RedriveCap, prev.RedriveCap)
		att.Note = joinNote(att.Note, fmt.Sprintf("successor of an archived record; redrive count %d of cap %d carried on", rec.RedriveCount, rec.RedriveCap))
	} else {
		// Nothing in the broken record can be trusted, its redrive count
		// least of all: the successor starts at its cap, so the next run
		// parks it as poison (alarmed) and no run replays it without an
		// approval, which raises the cap in the sealed history.
		att.Note = joinNote(att.Note, "successor of a record that fails its seal (set aside, untouched); at its cap: its redrive count cannot be trusted")
		rec.RedriveCap = max(rec.RedriveCap, prev.RedriveCap)
		rec.RedriveCount = max(prev.RedriveCount, rec.RedriveCap)
	}
	rec.Attempts = appendBounded(nil, att, q.cfg.MaxAttempts)
	return rec
}

// backoff sleeps with full jitter, growing from 2 ms to 100 ms.
func backoff(ctx context.Context, attempt int) error {
	return Backoff(ctx, attempt, 2*time.Millisecond, 100*time.Millisecond)
}

// Backoff sleeps before retry attempt (0 for the first retry) with full
// jitter: up to first doubled per attempt, at most most, plus a
// millisecond. It returns early with the context's error.
func Backoff(ctx context.Context, attempt int, first, most time.Duration) error {
	limit := min(first<<min(attempt, 16), most)
	t := time.NewTimer(rand.N(limit) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (q *Quarantiner) resolveSource(m Message) (*Source, string) {
	if m.SourceARN != "" {
		name := ARNResource(m.SourceARN)
		if s, ok := q.cfg.Sources[name]; ok {
			return s, ""
		}
		return &Source{Name: name, ARN: m.SourceARN, RedriveCap: q.cfg.DefaultRedriveCap}, "source has no configuration"
	}
	dlq := ARNResource(m.DLQARN)
	if s := q.cfg.sourceByDLQ(dlq); s != nil {
		return s, ""
	}
	return &Source{Name: "unresolved." + dlq, RedriveCap: q.cfg.DefaultRedriveCap}, "source queue unresolved"
}

// redriveHeaderNote flags redrive attributes that do not belong to this
// message: their record id must be one of the records the arrival's chain
// holds (ours). They are never trusted either way: the record comes from
// the derived key (or a verified correction) and the redrive count from the
// store.
func redriveHeaderNote(m Message, ours func(id string) bool) string {
	rid, hasID := m.Attributes[AttrRecordID]
	cnt, hasCount := m.Attributes[AttrRedriveCount]
	if !hasID && !hasCount {
		return ""
	}
	// Redrive adds the record id, and the count when there is room for it.
	if !hasID || !ours(rid.StringValue) {
		return "forged redrive attributes ignored"
	}
	if hasCount {
		if n, err := strconv.Atoi(strings.TrimSpace(cnt.StringValue)); err != nil || n < 0 {
			return "forged redrive attributes ignored"
		}
	}
	return ""
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// ARNResource is the last part of an ARN: a queue's name.
func ARNResource(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	if i := strings.LastIndexByte(arn, '/'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

func (q *Quarantiner) newRecord(src *Source, m Message, key string, origin KeyOrigin, c Classification, att Attempt, now time.Time) *Record {
	c, att.Kind = c.bound(), AttemptArrival
	r := &Record{
		DLQID: RecordID(src.Name, key), Source: src.Name, SourceARN: src.ARN, DLQARN: m.DLQARN,
		IdempotencyKey: key, KeyOrigin: origin,
		Status: StatusQuarantined, StatusSince: At(now),
		FailureClass: c.Class, FailureSignature: c.Signature, FailureStage: c.Stage,
		FailureReason: c.Reason, FailureDetail: c.Detail, SchemaVersion: src.SchemaVersion,
		BodySHA256: att.BodySHA256, BodySize: int64(len(m.Body)),
		Attributes: m.Attributes, SentTimestamp: m.SentTimestamp, ReceiveCount: m.ReceiveCount,
		TraceHeader: m.TraceHeader, MessageGroupID: m.MessageGroupID, SequenceNumber: m.SequenceNumber,
		Attempts: []Attempt{att}, AttemptCount: 1, FirstSeen: At(now), LastSeen: At(now),
		RedriveCap: src.RedriveCap, Version: 1,
	}
	if r.RedriveCap <= 0 {
		r.RedriveCap = q.cfg.DefaultRedriveCap
	}
	if len(r.Attributes) == 0 {
		r.Attributes = nil
	}
	if utf8.Valid(m.Body) {
		r.Body, r.BodyEncoding = string(m.Body), EncodingUTF8
	} else {
		r.Body, r.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), EncodingBase64
	}
	return r
}

// offload moves the body and attributes to the payload store when they would
// make the item too large. It is idempotent: object keys are content hashes.
func (q *Quarantiner) offload(ctx context.Context, r *Record) error {
	if r.BodyRef == nil && len(r.Body) > q.cfg.BodyInlineMax {
		if err := q.offloadBody(ctx, r); err != nil {
			return err
		}
	}
	if r.AttributesRef == nil && r.Attributes != nil {
		raw, err := json.Marshal(r.Attributes)
		if err != nil {
			return fmt.Errorf("marshal attributes: %w", err)
		}
		if len(raw) > q.cfg.AttributesInlineMax {
			if err := q.offloadAttributes(ctx, r, raw); err != nil {
				return err
			}
		}
	}
	// Cheap bound first: everything but body and attributes is small.
	if len(r.Body)+attributesSize(r.Attributes)+smallFieldsBound+growthReserve(q.cfg.MaxAttempts) <= ItemBudget {
		return nil
	}
	size, err := recordSize(r)
	if err != nil {
		return err
	}
	if size+growthReserve(q.cfg.MaxAttempts) <= ItemBudget {
		return nil
	}
	if r.BodyRef == nil && r.Body != "" {
		if err := q.offloadBody(ctx, r); err != nil {
			return err
		}
	}
	if r.AttributesRef == nil && r.Attributes != nil {
		raw, err := json.Marshal(r.Attributes)
		if err != nil {
			return fmt.Errorf("marshal attributes: %w", err)
		}
		if err := q.offloadAttributes(ctx, r, raw); err != nil {
			return err
		}
	}
	if size, err = recordSize(r); err != nil {
		return err
	}
	if size+growthReserve(q.cfg.MaxAttempts) > ItemBudget {
		// Unreachable while every stored text is bounded (actors.go): what
		// stays in the item once body and attributes are in the payload
		// store is far below the budget.
		return fmt.Errorf("record %s is %d bytes after offloading: %w", r.DLQID, size, ErrItemTooLarge)
	}
	return nil
}

func (q *Quarantiner) offloadBody(ctx context.Context, r *Record) error {
	if q.payloads == nil {
		return fmt.Errorf("body of %d bytes needs a payload bucket: %w", r.BodySize, ErrItemTooLarge)
	}
	raw, err := decodeBody(r)
	if err != nil {
		return err
	}
	ref, err := q.payloads.PutPayload(ctx, payloadKey("bodies", r, r.BodySHA256), raw)
	if err != nil {
		return fmt.Errorf("store body: %w", err)
	}
	r.BodyRef, r.Body = &ref, ""
	return nil
}

func (q *Quarantiner) offloadAttributes(ctx context.Context, r *Record, raw []byte) error {
	if q.payloads == nil {
		return fmt.Errorf("attributes of %d bytes need a payload bucket: %w", len(raw), ErrItemTooLarge)
	}
	ref, err := q.payloads.PutPayload(ctx, payloadKey("attributes", r, BodySHA256(raw)), raw)
	if err != nil {
		return fmt.Errorf("store attributes: %w", err)
	}
	r.AttributesRef, r.Attributes = &ref, nil
	return nil
}

// smallFieldsBound bounds the JSON of every record field but the body,
// the attributes and the attempts (ids, hashes, reasons, times).
const smallFieldsBound = 16 << 10

// attributesSize bounds the JSON size of attrs (base64 grows binary by 4/3,
// escaping at most 6x a control character: count 6 per byte to be safe).
func attributesSize(attrs map[string]Attribute) int {
	n := 0
	for k, a := range attrs {
		n += 64 + 6*(len(k)+len(a.DataType)+len(a.StringValue)) + 2*len(a.BinaryValue)
	}
	return n
}

// payloadKey names a claim-check object: per record (so the sweeper may
// delete it once archived without touching another record's) and per
// content hash (so a retried write is idempotent).
func payloadKey(kind string, r *Record, sum string) string {
	return kind + "/" + r.Source + "/" + BodySHA256([]byte(r.DLQID))[:32] + "/" + sum
}

func recordSize(r *Record) (int, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("marshal record: %w", err)
	}
	return len(raw), nil
}

func decodeBody(r *Record) ([]byte, error) {
	if r.BodyEncoding == EncodingBase64 {
		b, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			return nil, fmt.Errorf("decode body of %s: %w", r.DLQID, err)
		}
		return b, nil
	}
	return []byte(r.Body), nil
}

// LoadBody returns the original body bytes of r, from the item or from the
// payload store, and checks them against r.BodySHA256.
func LoadBody(ctx context.Context, payloads PayloadStore, r *Record) ([]byte, error) {
	var body []byte
	if r.BodyRef != nil {
		if payloads == nil {
			return nil, fmt.Errorf("record %s: body is in the payload store, none configured", r.DLQID)
		}
		b, err := payloads.GetPayload(ctx, *r.BodyRef)
		if err != nil {
			return nil, fmt.Errorf("load body of %s: %w", r.DLQID, err)
		}
		body = b
	} else {
		b, err := decodeBody(r)
		if err != nil {
			return nil, err
		}
		body = b
	}
	if BodySHA256(body) != r.BodySHA256 {
		return nil, fmt.Errorf("record %s: %w", r.DLQID, ErrPayloadMismatch)
	}
	return body, nil
}

// LoadAttributes returns the original message attributes of r, from the item
// or from the payload store.
func LoadAttributes(ctx context.Context, payloads PayloadStore, r *Record) (map[string]Attribute, error) {
	if r.AttributesRef == nil {
		return r.Attributes, nil
	}
	if payloads == nil {
		return nil, fmt.Errorf("record %s: attributes are in the payload store, none configured", r.DLQID)
	}
	raw, err := payloads.GetPayload(ctx, *r.AttributesRef)
	if err != nil {
		return nil, fmt.Errorf("load attributes of %s: %w", r.DLQID, err)
	}
	var attrs map[string]Attribute
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return nil, fmt.Errorf("decode attributes of %s: %w", r.DLQID, err)
	}
	return attrs, nil
}
