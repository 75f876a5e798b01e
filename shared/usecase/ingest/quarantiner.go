package ingest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/bytegate"
)

// QuarantinerConfig configures a Quarantiner.
type QuarantinerConfig struct {
	// Sources by source queue name.
	Sources map[string]*quarantine.Source
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
	// DecodeBudget bounds the bytes of bodies decoded and checked against
	// their schemas at once, across the messages of a batch stored
	// concurrently (default bytegate.DecodeBudget). A larger body decodes
	// alone.
	DecodeBudget int
}

func (c *QuarantinerConfig) withDefaults() QuarantinerConfig {
	out := *c
	if out.KeyAttribute == "" {
		out.KeyAttribute = quarantine.DefaultKeyAttribute
	}
	if out.MaxAttempts <= 0 {
		out.MaxAttempts = quarantine.DefaultMaxAttempts
	}
	out.MaxAttempts = min(out.MaxAttempts, quarantine.MaxMaxAttempts)
	if out.DefaultRedriveCap <= 0 {
		out.DefaultRedriveCap = quarantine.DefaultRedriveCap
	}
	if out.BodyInlineMax <= 0 {
		out.BodyInlineMax = quarantine.DefaultBodyInlineMax
	}
	if out.AttributesInlineMax <= 0 {
		out.AttributesInlineMax = quarantine.DefaultAttributesInlineMax
	}
	if out.MaxWriteRetries <= 0 {
		out.MaxWriteRetries = quarantine.DefaultMaxWriteRetries
	}
	if out.DecodeBudget <= 0 {
		out.DecodeBudget = bytegate.DecodeBudget
	}
	return out
}

// Message is one dead-lettered SQS message, as the ingest function sees it.
type Message struct {
	MessageID  string
	Body       []byte
	Attributes map[string]quarantine.Attribute
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
	Record *quarantine.Record
	// At is the instant the arrival was stamped with.
	At time.Time
	// Route says how the message found its source (RouteConfigured,
	// RouteUnconfigured, RouteUnrouted).
	Route string
}

// Quarantiner turns dead-lettered messages into sealed records: one per
// idempotency key, written with conditional writes only.
type Quarantiner struct {
	store    quarantine.Store
	payloads quarantine.PayloadStore
	now      func() time.Time
	cfg      QuarantinerConfig
	decoding *bytegate.Gate
}

// NewQuarantiner returns a Quarantiner. payloads may be nil when no bucket
// is configured; oversized messages then fail (and are redelivered) instead
// of being stored incompletely. now may be nil for time.Now.
func NewQuarantiner(store quarantine.Store, payloads quarantine.PayloadStore, now func() time.Time, cfg QuarantinerConfig) *Quarantiner {
	if now == nil {
		now = time.Now
	}
	c := cfg.withDefaults()
	return &Quarantiner{store: store, payloads: payloads, now: now, cfg: c, decoding: bytegate.New(int64(c.DecodeBudget))}
}

// Quarantine stores m durably. It returns an error only when the message was
// not durably stored and must be delivered again.
//
// The record for m is the one at its key's id, unless that record cannot
// take arrivals any more (it is ARCHIVED, or fails its seal): then m goes to
// a successor record at "<id>#r<n>", linked to it, and the record itself is
// left untouched. A corrected replay sent under a new key comes back to the
// record it was corrected in (see correctedComeback).
func (qr *Quarantiner) Quarantine(ctx context.Context, m Message) (Outcome, error) {
	now := qr.now().UTC()
	if !m.After.IsZero() && !now.After(m.After) {
		// The previous message of this FIFO group was stamped in this very
		// clock tick (or the clock stepped back): stay after it.
		now = m.After.UTC().Add(time.Nanosecond)
	}
	src, note, route := qr.resolveSource(m)
	class, key, origin := qr.inspect(src, m)

	att := quarantine.Attempt{
		At: quarantine.At(now), Stage: class.Stage, Reason: class.Reason, MessageID: m.MessageID,
		Actor: quarantine.ActorIngest, ReceiveCount: m.ReceiveCount, BodySHA256: quarantine.BodySHA256(m.Body), Note: note,
	}
	rec := qr.newRecord(src, m, key, origin, class, att, now)
	start := rec.DLQID
	target, err := qr.correctedComeback(ctx, src, m, key, att.BodySHA256)
	if err != nil {
		return Outcome{}, err
	}
	if target != nil {
		// The event keeps the identity of the record it was corrected in.
		start, rec.IdempotencyKey, rec.KeyOrigin = target.DLQID, target.IdempotencyKey, target.KeyOrigin
	}
	// A target unregistered since the replay (its messages now
	// unconfigured) still links back: the sealed history decides.
	if target == nil && (route == RouteConfigured || route == RouteUnconfigured) {
		orig, err := qr.retargetComeback(ctx, src, m, att.BodySHA256)
		if err != nil {
			return Outcome{}, err
		}
		if orig != nil {
			// A replay into src, another queue than its own source's,
			// failed there and came back through src's DLQ: the same
			// event, appended to the record it was sent from.
			start, route = orig.DLQID, RouteConfigured // an arrival of the record's own, configured source
			rec.Source, rec.SourceARN, rec.DLQARN, rec.RedriveCap = orig.Source, orig.SourceARN, orig.DLQARN, orig.RedriveCap
			rec.IdempotencyKey, rec.KeyOrigin = orig.IdempotencyKey, orig.KeyOrigin
			att.Note = quarantine.JoinNote(att.Note, "came back from "+src.Name+", the queue it was replayed into")
			rec.Attempts[0].Note = att.Note
		}
	}
	out, err := qr.createOrAppend(ctx, start, rec, m, att, class)
	if errors.Is(err, errBodyConflict) {
		// The producer reused an idempotency key for a different body. Keep
		// the new body as its own record beside the original: never drop it.
		c := quarantine.Classification{Class: quarantine.ClassValidation, Stage: "ingest", Reason: "idempotency key reused with a different body"}
		c.Signature = quarantine.Signature(c.Stage, c.Reason, src.SchemaVersion)
		att.Stage, att.Reason = c.Stage, c.Reason
		rec = qr.newRecord(src, m, key, origin, c, att, now)
		out, err = qr.createOrAppend(ctx, quarantine.RecordID(src.Name, key)+"#body-"+att.BodySHA256[:16], rec, m, att, c)
	}
	out.At, out.Route = now, route
	return out, err
}

// inspect checks m's body against its source's schema and derives its
// key, while the body's decoded tree is alive: within the decode budget.
func (qr *Quarantiner) inspect(src *quarantine.Source, m Message) (quarantine.Classification, string, quarantine.KeyOrigin) {
	defer qr.decoding.Acquire(int64(len(m.Body)))()
	verdict := src.Check(m.Body)
	class := quarantine.Classify(src, m.Attributes, verdict)
	key, origin := quarantine.DeriveKey(src, qr.cfg.KeyAttribute, m.Attributes, verdict.Doc, src.ARN, m.Body)
	return class, key, origin
}

var errBodyConflict = errors.New("idempotency key reused with a different body")

// maxRecordIDBytes bounds a record id taken from a message attribute
// (DynamoDB allows 2048 bytes in a partition key).
const maxRecordIDBytes = 2048

// correctedComeback returns the record a corrected replay sent under a new
// key belongs to, or nil. The attributes redrive adds (dlq-record-id,
// dlq-corrected) are never trusted by themselves: the record must exist,
// verify, belong to the source, and hold that correction with exactly this
// new key and this body.
func (qr *Quarantiner) correctedComeback(ctx context.Context, src *quarantine.Source, m Message, key, sum string) (*quarantine.Record, error) {
	rid, hasID := m.Attributes[quarantine.AttrRecordID]
	cn, hasN := m.Attributes[quarantine.AttrCorrected]
	if !hasID || !hasN || !strings.HasPrefix(rid.DataType, "String") || !strings.HasPrefix(cn.DataType, "Number") {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(cn.StringValue))
	id := rid.StringValue
	if err != nil || n < 1 || id == quarantine.RecordID(src.Name, key) || !strings.HasPrefix(id, src.Name+"#") ||
		len(id) > maxRecordIDBytes || !utf8.ValidString(id) {
		return nil, nil
	}
	r, err := qr.trusted(ctx, id)
	if r == nil || err != nil {
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

// retargetComeback returns the record a replay into src (a redrive to
// another queue: src is its target, not its source) was sent from, or nil.
// The record id redrive adds (dlq-record-id) is never trusted by itself: the
// record must exist, verify, be of another source, hold in its sealed
// history a send into src, and hold this body (or a correction's). A
// producer who sets the attribute on a message of its own links nothing
// that the history does not already say was sent to src with this body;
// anything else is a new arrival of src, its forged header noted.
func (qr *Quarantiner) retargetComeback(ctx context.Context, src *quarantine.Source, m Message, sum string) (*quarantine.Record, error) {
	rid, ok := m.Attributes[quarantine.AttrRecordID]
	if !ok || !strings.HasPrefix(rid.DataType, "String") {
		return nil, nil
	}
	id := rid.StringValue
	if strings.HasPrefix(id, src.Name+"#") || !strings.Contains(id, "#") || len(id) > maxRecordIDBytes || !utf8.ValidString(id) {
		return nil, nil
	}
	r, err := qr.trusted(ctx, id)
	if r == nil || err != nil {
		return nil, err
	}
	if r.Source == src.Name || !r.SentTo(src.Name) || r.BodySHA256 != sum && !r.HasCorrection(sum) {
		return nil, nil
	}
	return r, nil
}

// trusted is the record at id when it exists and verifies: a redrive
// header links an arrival only to what a sealed history says. nil, nil
// when there is none or it fails its seal (its history cannot be trusted).
func (qr *Quarantiner) trusted(ctx context.Context, id string) (*quarantine.Record, error) {
	r, err := qr.store.Get(ctx, id)
	if errors.Is(err, quarantine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the record a redrive header names: %w", err)
	}
	if err := quarantine.Verify(r); err != nil {
		var se *quarantine.SealError
		if errors.As(err, &se) {
			return nil, nil
		}
		return nil, err
	}
	return r, nil
}

// createOrAppend stores the arrival on the chain of records that starts at
// start: appended to the first record that takes arrivals, or created as a
// new record (proto, at the first free position, linked to the last record
// that could not take it). A duplicate delivery found anywhere on the chain
// is a no-op. Its reads and writes are not Store.Update's: a conflict
// re-reads the same position within this loop's budget (MaxWriteRetries,
// shared with the create path), and a record deleted or held under the
// append moves the arrival on (created, or to a successor).
func (qr *Quarantiner) createOrAppend(ctx context.Context, start string, proto *quarantine.Record, m Message, att quarantine.Attempt, class quarantine.Classification) (Outcome, error) {
	baseNote := att.Note
	var (
		pos      int
		prev     *quarantine.Record // the chain's last record that cannot take arrivals
		prevLink quarantine.Standing
		accepted = map[string]bool{} // the bodies the chain's records hold
	)
	ours := func(id string) bool {
		for i := 0; i <= pos; i++ {
			if quarantine.ChainID(start, i) == id {
				return true
			}
		}
		return false
	}
	// A first arrival is one conditional PutItem: create first, and read
	// only when the record exists (a re-failure or a duplicate delivery,
	// handled below from position 0). Only when nothing would be offloaded
	// (offload is then a no-op), so that no payload object is uploaded for
	// a record that exists.
	att.Note = quarantine.JoinNote(baseNote, redriveHeaderNote(m, ours))
	if rec := quarantine.Successor(proto, start, nil, prevLink, att, qr.cfg.MaxAttempts); qr.inline(rec) {
		if out, err := qr.create(ctx, rec); !errors.Is(err, quarantine.ErrExists) {
			return out, err
		}
	}
	for i := 0; i < qr.cfg.MaxWriteRetries; {
		if pos >= quarantine.MaxChain {
			return Outcome{}, fmt.Errorf("record %s: %w", quarantine.LogRef(start), quarantine.ErrChainTooLong)
		}
		id := quarantine.ChainID(start, pos)
		att.Note = quarantine.JoinNote(baseNote, redriveHeaderNote(m, ours))
		cur, err := qr.store.Get(ctx, id)
		if errors.Is(err, quarantine.ErrNotFound) {
			rec := quarantine.Successor(proto, id, prev, prevLink, att, qr.cfg.MaxAttempts)
			if err := qr.offload(ctx, rec); err != nil {
				return Outcome{}, err
			}
			if out, err := qr.create(ctx, rec); !errors.Is(err, quarantine.ErrExists) {
				return out, err
			}
			i++ // another writer created it: read it
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("read record: %w", err)
		}
		st, err := quarantine.StandingOf(cur, prev, proto, pos)
		if err != nil {
			return Outcome{}, err
		}
		if st == quarantine.StandingForeign {
			pos++
			continue
		}
		if st == quarantine.StandingBroken {
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
		if st == quarantine.StandingClosed {
			prev, prevLink = cur, st
			pos++
			continue
		}
		next, err := cur.Arrive(att, class, qr.cfg.MaxAttempts, att.At.Time)
		var se *quarantine.SealError
		if errors.As(err, &se) {
			prev, prevLink = cur, quarantine.StandingBroken
			pos++
			continue
		}
		if err != nil {
			return Outcome{}, err
		}
		err = qr.store.Replace(ctx, cur, next)
		if err == nil {
			return Outcome{Result: ResultAppended, Record: next}, nil
		}
		if errors.Is(err, quarantine.ErrHeld) {
			// Set aside by an integrity hold (its claim-checked payload
			// failed its hash, say): never written again, so the arrival
			// goes to a successor instead of being retried until the DLQ's
			// retention drops it.
			prev, prevLink = cur, quarantine.StandingBroken
			pos++
			continue
		}
		if !errors.Is(err, quarantine.ErrVersionConflict) && !errors.Is(err, quarantine.ErrNotFound) {
			return Outcome{}, fmt.Errorf("append attempt: %w", err)
		}
		if err := backoff(ctx, i); err != nil {
			return Outcome{}, err
		}
		i++
	}
	return Outcome{}, quarantine.ErrContention
}

// create seals rec and writes it as a new record. An error that is
// quarantine.ErrExists means another writer created the record first.
func (qr *Quarantiner) create(ctx context.Context, rec *quarantine.Record) (Outcome, error) {
	if err := quarantine.SealRecord(rec); err != nil {
		return Outcome{}, err
	}
	if err := qr.store.Create(ctx, rec); err != nil {
		return Outcome{}, fmt.Errorf("create record: %w", err)
	}
	return Outcome{Result: ResultCreated, Record: rec}, nil
}

// backoff sleeps with full jitter, growing from 2 ms to 100 ms.
func backoff(ctx context.Context, attempt int) error {
	return quarantine.Backoff(ctx, attempt, 2*time.Millisecond, 100*time.Millisecond)
}

// Routes say how a message found its source (Outcome.Route).
const (
	// RouteConfigured: its DeadLetterQueueSourceArn is a configured
	// source's ARN, exactly (or, without one, its DLQ is one source's only).
	RouteConfigured = ""
	// RouteUnconfigured: a source queue SOURCES does not name. The record
	// is kept under the queue's name, so that once the source is added
	// (a redeploy) its records are replayable.
	RouteUnconfigured = "unconfigured"
	// RouteUnrouted: no source can be told (no DeadLetterQueueSourceArn on
	// a DLQ that several sources or none share), or the ARN names a queue
	// that shares its name with a configured source of another ARN, or
	// lies outside its DLQ's account and Region (SQS moves a message only
	// within them). The record is kept under "unrouted.…" or
	// "unresolved.<dlq>", names no queue can have, for a person to read:
	// it never collides with a configured source's records and is never
	// replayed.
	RouteUnrouted = "unrouted"
)

// resolveSource is the source m belongs to, the note its arrival is
// recorded with and how it was routed. A message is routed by its
// DeadLetterQueueSourceArn to the source with exactly that ARN: many
// sources may share one DLQ.
func (qr *Quarantiner) resolveSource(m Message) (*quarantine.Source, string, string) {
	unknown := func(name, arn string) *quarantine.Source {
		return &quarantine.Source{Name: name, ARN: arn, RedriveCap: qr.cfg.DefaultRedriveCap}
	}
	dlq := ARNResource(m.DLQARN)
	if m.SourceARN != "" {
		for _, s := range qr.cfg.Sources {
			if s.ARN == m.SourceARN {
				return s, "", RouteConfigured
			}
		}
		name := ARNResource(m.SourceARN)
		if s, ok := qr.cfg.Sources[name]; ok && s.ARN == "" {
			return s, "", RouteConfigured // a source configured without its ARN (sources.Validate requires one)
		}
		home := sources.QueueARN(m.SourceARN) && sameAccountAndRegion(m.SourceARN, m.DLQARN)
		switch _, taken := qr.cfg.Sources[name]; {
		case home && !taken:
			return unknown(name, m.SourceARN), "source has no configuration", RouteUnconfigured
		case home:
			p := strings.Split(m.SourceARN, ":")
			return unknown("unrouted."+p[3]+"."+p[4]+"."+name, m.SourceARN),
				"source queue unrouted: its name is a configured source's, its ARN is not", RouteUnrouted
		case sources.QueueARN(m.SourceARN):
			p := strings.Split(m.SourceARN, ":")
			return unknown("unrouted."+p[3]+"."+p[4]+"."+name, m.SourceARN),
				"source queue unrouted: outside its DLQ's account and Region", RouteUnrouted
		}
		return unknown("unresolved."+dlq, ""), "source queue unresolved: DeadLetterQueueSourceArn is no queue ARN", RouteUnrouted
	}
	var owners []*quarantine.Source
	for _, s := range qr.cfg.Sources {
		if s.DLQName == dlq {
			owners = append(owners, s)
		}
	}
	switch len(owners) {
	case 1:
		return owners[0], "", RouteConfigured
	case 0:
		return unknown("unresolved."+dlq, ""), "source queue unresolved", RouteUnrouted
	}
	// A consumer that dead-letters a message itself into a DLQ several
	// sources share may declare its source (quarantine.AttrFailureSource):
	// taken only among the DLQ's own sources, so a message is never filed
	// under a source whose DLQ it did not arrive in. Any sender to the DLQ
	// can declare any of them, so the sealed history says the source was
	// declared, not named by SQS.
	if declared := m.Attributes[quarantine.AttrFailureSource].StringValue; declared != "" {
		for _, s := range owners {
			if s.Name == declared {
				return s, "source declared by its sender (" + quarantine.AttrFailureSource + "): sent to the DLQ directly, not moved there by SQS", RouteConfigured
			}
		}
	}
	return unknown("unresolved."+dlq, ""),
		fmt.Sprintf("source queue unresolved: %d sources share the DLQ and the message has no DeadLetterQueueSourceArn (dead-lettered by a consumer itself)", len(owners)),
		RouteUnrouted
}

// sameAccountAndRegion reports whether queue ARNs a and b share their
// partition, Region and account.
func sameAccountAndRegion(a, b string) bool {
	pa, pb := strings.Split(a, ":"), strings.Split(b, ":")
	return len(pa) == 6 && len(pb) == 6 && pa[1] == pb[1] && pa[3] == pb[3] && pa[4] == pb[4]
}

// redriveHeaderNote flags redrive attributes that do not belong to this
// message: their record id must be one of the records the arrival's chain
// holds (ours). They are never trusted either way: the record comes from
// the derived key (or a verified correction) and the redrive count from the
// store.
func redriveHeaderNote(m Message, ours func(id string) bool) string {
	rid, hasID := m.Attributes[quarantine.AttrRecordID]
	cnt, hasCount := m.Attributes[quarantine.AttrRedriveCount]
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

func (qr *Quarantiner) newRecord(src *quarantine.Source, m Message, key string, origin quarantine.KeyOrigin, c quarantine.Classification, att quarantine.Attempt, now time.Time) *quarantine.Record {
	c, att.Kind = c.Bounded(), quarantine.AttemptArrival
	r := &quarantine.Record{
		DLQID: quarantine.RecordID(src.Name, key), Source: src.Name, SourceARN: src.ARN, DLQARN: m.DLQARN,
		IdempotencyKey: key, KeyOrigin: origin,
		Status: quarantine.StatusQuarantined, StatusSince: quarantine.At(now),
		FailureClass: c.Class, FailureSignature: c.Signature, FailureStage: c.Stage,
		FailureReason: c.Reason, FailureDetail: c.Detail, SchemaVersion: src.SchemaVersion,
		BodySHA256: att.BodySHA256, BodySize: int64(len(m.Body)),
		Attributes: m.Attributes, SentTimestamp: m.SentTimestamp, ReceiveCount: m.ReceiveCount,
		TraceHeader: m.TraceHeader, MessageGroupID: m.MessageGroupID, SequenceNumber: m.SequenceNumber,
		Attempts: []quarantine.Attempt{att}, AttemptCount: 1, FirstSeen: quarantine.At(now), LastSeen: quarantine.At(now),
		RedriveCap: src.RedriveCap, Version: 1,
	}
	if r.RedriveCap <= 0 {
		r.RedriveCap = qr.cfg.DefaultRedriveCap
	}
	if len(r.Attributes) == 0 {
		r.Attributes = nil
	}
	if utf8.Valid(m.Body) {
		r.Body, r.BodyEncoding = string(m.Body), quarantine.EncodingUTF8
	} else {
		r.Body, r.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), quarantine.EncodingBase64
	}
	return r
}
