package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Object formats and signing algorithms (design §3), with what review 1
// added to them (optional members: a segment or digest without them reads
// as before):
//
//   - an entry's "late":true: the change reached the ledger after a later
//     change of its shard (Lambda may deliver a retried batch out of
//     order). Its seq is below the chain's last seq when it was written;
//     it is in order within its segment, and its seq appears nowhere else
//     in the shard's chain. Every entry not marked late is after all the
//     not-late entries before it.
//   - an entry's "old_item" on MODIFY and REMOVE: the full old image (on a
//     REMOVE equal to "removed"), so that a segment alone determines its
//     counter deltas; "old" {version, seal} stays.
//   - a segment's "parent_shard": on a shard's first segment, the shard's
//     parent (DescribeStream ParentShardId), when it has one.
//   - a digest's shard entries: "parent_shard" as above, and every shard
//     DescribeStream lists, one without a chain yet with an empty head
//     (last_seq, segment_key, segment_sha256 "", segments 0). A head's
//     last_seq is its chain's highest seq (a segment of late entries only
//     ends below it).
const (
	SegmentFormat = "dlqq-ledger-segment/1"
	DigestFormat  = "dlqq-ledger-digest/1"
	// AlgECDSA is KMS ECDSA_SHA_256 (an ECC_NIST_P256 key); AlgRSAPSS is
	// KMS RSASSA_PSS_SHA_256.
	AlgECDSA  = "ECDSA_SHA_256"
	AlgRSAPSS = "RSASSA_PSS_SHA_256"

	SegmentPrefix = "ledger/segments/"
	DigestPrefix  = "ledger/digests/"
)

// Stream event names.
const (
	EventInsert = "INSERT"
	EventModify = "MODIFY"
	EventRemove = "REMOVE"
)

// Table attributes the ledger reads from items.
const (
	KeyAttr      = "dlq_id"
	VersionAttr  = "version"
	SealAttr     = "seal"
	PrevSealAttr = "prev_seal"
	// HoldAttr and HoldAtAttr mark an integrity hold (dynamostore): the
	// one change that keeps a record's version.
	HoldAttr   = "integrity_hold"
	HoldAtAttr = "integrity_hold_at"
	// IndexKeyAttr is the listing index's partition key (dynamostore's
	// status_key): not sealed, derived from sealed fields (Input.IndexKey).
	IndexKeyAttr = "status_key"
)

// Ledgered reports whether a table key is ledgered: a quarantine record
// (no '#' first), a standing policy ("#pol#...") or a four-eyes approval
// ("#apr#..."); counter shards and the ledger's own items are not.
func Ledgered(key string) bool {
	return key != "" && (key[0] != '#' || strings.HasPrefix(key, "#pol#") || strings.HasPrefix(key, "#apr#"))
}

// Ref names an object and its SHA-256 (hex).
type Ref struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// Old is the version and seal of a change's old image.
type Old struct {
	Version int64  `json:"version"`
	Seal    string `json:"seal"`
}

// Entry is one ledgered change.
//
// OldItem ("old_item") is the full old image of a MODIFY or REMOVE (on a
// REMOVE it equals Removed), so that a segment alone determines the
// counter deltas of its changes. Late ("late":true) marks a change that
// reached the ledger after a later change of its shard (a retried batch
// delivered out of order): its seq is below the previous segments'
// last_seq, and it appears nowhere else in the shard's chain.
type Entry struct {
	Seq     string `json:"seq"`
	Event   string `json:"event"`
	At      string `json:"at"`
	Key     string `json:"key"`
	Item    Item   `json:"item,omitempty"`
	Removed Item   `json:"removed,omitempty"`
	OldItem Item   `json:"old_item,omitempty"`
	Old     *Old   `json:"old,omitempty"`
	Late    bool   `json:"late,omitempty"`

	// oldSHA is the SHA-256 of OldItem's canonical bytes, which Verify
	// keeps once it drops the decoded OldItem (verify.go).
	oldSHA string
}

// Segment is one object of a shard's chain. ParentShard
// ("parent_shard") is the shard's parent (DescribeStream ParentShardId),
// on a shard's first segment only, when it has one.
type Segment struct {
	Format      string  `json:"format"`
	StreamARN   string  `json:"stream_arn"`
	Shard       string  `json:"shard"`
	ParentShard string  `json:"parent_shard,omitempty"`
	FirstSeq    string  `json:"first_seq"`
	LastSeq     string  `json:"last_seq"`
	Prev        *Ref    `json:"prev,omitempty"`
	Entries     []Entry `json:"entries"`
}

// DigestPrev is the previous digest as a digest names it.
type DigestPrev struct {
	Key       string `json:"key"`
	SHA256    string `json:"sha256"`
	Signature string `json:"signature"`
}

// Head is a shard chain's head as a digest records it. A shard that
// DescribeStream lists but that has no chain yet has an empty head
// (LastSeq, SegmentKey and SegmentSHA256 "", Segments 0). ParentShard is
// the shard's parent (DescribeStream ParentShardId), when it has one.
// LastSeq is the chain's highest seq (a segment of late changes only ends
// below it).
type Head struct {
	Shard         string `json:"shard"`
	ParentShard   string `json:"parent_shard,omitempty"`
	LastSeq       string `json:"last_seq"`
	SegmentKey    string `json:"segment_key"`
	SegmentSHA256 string `json:"segment_sha256"`
	Segments      int64  `json:"segments"`
}

// Digest is one signed digest object.
type Digest struct {
	Format    string      `json:"format"`
	N         int64       `json:"n"`
	At        string      `json:"at"`
	StreamARN string      `json:"stream_arn"`
	KeyID     string      `json:"key_id"`
	Algorithm string      `json:"algorithm"`
	Prev      *DigestPrev `json:"prev,omitempty"`
	Shards    []Head      `json:"shards"`
	// Baseline names the newest baseline object (absent until one exists).
	Baseline  *BaselineRef `json:"baseline,omitempty"`
	Signature string       `json:"signature,omitempty"`
	// Unproven lists the shard heads the table held that the digest run
	// could not prove against the bucket (issue 25, part A: unproven.go);
	// such a shard's entry in Shards is the previous digest's head.
	// Absent when every head was proven.
	Unproven []UnprovenHead `json:"unproven,omitempty"`
	// Pipeline (issue 25, format_pipeline.go): what the run saw of the
	// stream's event source mapping ("mapping") and the canary it wrote
	// ("canary"). Absent on digests written before it, and when the run
	// does not check the pipeline.
	Mapping *MappingSeen `json:"mapping,omitempty"`
	Canary  *CanaryRef   `json:"canary,omitempty"`
	// WriterProofs says every record and policy change after this
	// digest's heads carries a writer proof (the ledger's WRITER_PROOFS);
	// the first signed digest that says so is verify's writer-proof
	// cut-off (verify_writers.go). Absent: not (yet) on.
	WriterProofs bool `json:"writer_proofs,omitempty"`
	// WriterKeys (issue 25 review) are the writer HMAC keys' ARNs the
	// ledger function was deployed with, by role (ingest, redrive,
	// sweeper): verify requires its --writer-keys to be the newest signed
	// digest's (verify_writerkeys.go). Absent: not configured (or a digest
	// written before it).
	WriterKeys map[string]string `json:"writer_keys,omitempty"`
}

// SegmentKey is the object key of a shard's segment starting at firstSeq.
func SegmentKey(shard, firstSeq string) string {
	return SegmentPrefix + shard + "/" + mustPadSeq(firstSeq) + ".json"
}

// DigestKey is the object key of digest n.
func DigestKey(n int64) string { return fmt.Sprintf("%s%012d.json", DigestPrefix, n) }

// SHA256Hex is the hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Encode returns the segment's canonical bytes.
func (s Segment) Encode() ([]byte, error) { return canonical(s) }

// Encode returns the digest's canonical bytes (with its signature).
func (d Digest) Encode() ([]byte, error) { return canonical(d) }

// SigningHash is SHA-256 of the canonical JSON of d without its signature:
// what KMS signs (MessageType DIGEST).
func (d Digest) SigningHash() ([32]byte, error) {
	d.Signature = ""
	b, err := canonical(d)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// decodeStrict decodes b into v, refusing unknown fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// ParseSegment decodes and checks a segment's form: its format, its
// sequence numbers (valid; first and last as stated) and its entries'
// events. Their order is Verify's to judge (it names a duplicate).
func ParseSegment(b []byte) (Segment, error) {
	var s Segment
	if err := decodeStrict(b, &s); err != nil {
		return Segment{}, fmt.Errorf("parse segment: %w", err)
	}
	if s.Format != SegmentFormat {
		return Segment{}, fmt.Errorf("parse segment: format %q", s.Format)
	}
	if len(s.Entries) == 0 {
		return Segment{}, errors.New("parse segment: no entries")
	}
	for i, e := range s.Entries {
		if !ValidSeq(e.Seq) {
			return Segment{}, fmt.Errorf("parse segment: entry %d: sequence number %q", i, e.Seq)
		}
		if err := e.check(); err != nil {
			return Segment{}, fmt.Errorf("parse segment: entry %s: %w", e.Seq, err)
		}
	}
	if s.FirstSeq != s.Entries[0].Seq || s.LastSeq != s.Entries[len(s.Entries)-1].Seq {
		return Segment{}, errors.New("parse segment: first_seq/last_seq do not match its entries")
	}
	if s.Shard == "" {
		return Segment{}, errors.New("parse segment: no shard")
	}
	return s, nil
}

func (e Entry) check() error {
	if e.Key == "" {
		return errors.New("no key")
	}
	if _, err := time.Parse(time.RFC3339Nano, e.At); err != nil {
		return fmt.Errorf("at %q: not RFC 3339", e.At)
	}
	switch e.Event {
	case EventInsert, EventModify:
		if e.Item == nil || e.Removed != nil {
			return fmt.Errorf("%s without its new image", e.Event)
		}
		if e.Event == EventInsert && e.OldItem != nil {
			return errors.New("INSERT with an old image")
		}
	case EventRemove:
		if e.Removed == nil || e.Item != nil {
			return errors.New("REMOVE without its old image")
		}
		if e.OldItem != nil && !sameItem(e.OldItem, e.Removed) {
			return errors.New("REMOVE whose old_item is not what it removed")
		}
	default:
		return fmt.Errorf("event %q", e.Event)
	}
	// Every image the stream gives holds the item's key: an image without
	// it, or of another key, is no change of e.Key (and an empty one would
	// read as none at all).
	for name, it := range map[string]Item{"item": e.Item, "removed": e.Removed, "old_item": e.OldItem} {
		if it != nil && it.S(KeyAttr) != e.Key {
			return fmt.Errorf("%s is not an image of key %s (its %s is %q)", name, e.Key, KeyAttr, it.S(KeyAttr))
		}
	}
	return nil
}

// ParseDigest decodes and checks a digest's form (not its signature).
func ParseDigest(b []byte) (Digest, error) {
	var d Digest
	if err := decodeStrict(b, &d); err != nil {
		return Digest{}, fmt.Errorf("parse digest: %w", err)
	}
	if d.Format != DigestFormat {
		return Digest{}, fmt.Errorf("parse digest: format %q", d.Format)
	}
	if d.N < 1 || (d.N == 1) != (d.Prev == nil) {
		return Digest{}, fmt.Errorf("parse digest: n %d with prev %v", d.N, d.Prev != nil)
	}
	if !slices.IsSortedFunc(d.Shards, func(a, b Head) int { return strings.Compare(a.Shard, b.Shard) }) {
		return Digest{}, errors.New("parse digest: shards not sorted")
	}
	if err := checkUnproven(d.Unproven); err != nil {
		return Digest{}, fmt.Errorf("parse digest: %w", err)
	}
	return d, nil
}

// NewSegment builds the segment of shard holding entries (sorted here by
// sequence number, each seq once), chained to prev (nil on a shard's first
// segment). Entries marked Late may be below prev's last_seq; the others
// are after it (the caller's to ensure). It refuses no entries, an invalid
// or repeated sequence number and an entry that does not check.
func NewSegment(streamARN, shard string, prev *Ref, entries []Entry) (Segment, error) {
	if len(entries) == 0 {
		return Segment{}, errors.New("segment without entries")
	}
	es := slices.Clone(entries)
	for _, e := range es {
		if !ValidSeq(e.Seq) {
			return Segment{}, fmt.Errorf("entry %s: invalid sequence number", e.Seq)
		}
		if err := e.check(); err != nil {
			return Segment{}, fmt.Errorf("entry %s: %w", e.Seq, err)
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return SeqCompare(a.Seq, b.Seq) })
	for i := 1; i < len(es); i++ {
		if SeqCompare(es[i-1].Seq, es[i].Seq) == 0 {
			return Segment{}, fmt.Errorf("entry %s twice", es[i].Seq)
		}
	}
	return Segment{Format: SegmentFormat, StreamARN: streamARN, Shard: shard, FirstSeq: es[0].Seq,
		LastSeq: es[len(es)-1].Seq, Prev: prev, Entries: es}, nil
}

// NewDigest builds digest n (unsigned) over heads (sorted here by shard),
// chained to prev (nil for n = 1).
func NewDigest(n int64, at time.Time, streamARN, keyID, algorithm string, prev *DigestPrev, heads []Head) Digest {
	hs := slices.Clone(heads)
	slices.SortFunc(hs, func(a, b Head) int { return strings.Compare(a.Shard, b.Shard) })
	if hs == nil {
		hs = []Head{}
	}
	return Digest{Format: DigestFormat, N: n, At: at.UTC().Format(time.RFC3339Nano), StreamARN: streamARN,
		KeyID: keyID, Algorithm: algorithm, Prev: prev, Shards: hs}
}

// sameItem reports whether a and b have the same canonical bytes.
func sameItem(a, b Item) bool {
	ca, err := a.Canonical()
	if err != nil {
		return false
	}
	cb, err := b.Canonical()
	return err == nil && bytes.Equal(ca, cb)
}
