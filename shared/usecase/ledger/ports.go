// Package ledger is the ledger function (design §5, DESIGN.md invariants
// 14 and 15): it writes the quarantine table's change stream, shard by
// shard, into chained segment objects of the Object Lock bucket, advances
// each shard's head item, hands the changes to the counters, and on a
// schedule signs a digest of every shard's head.
package ledger

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// Objects are the ledger's objects in the Object Lock bucket.
type Objects interface {
	// PutIfAbsent writes body under key, locked in COMPLIANCE mode until
	// retainUntil, with its SHA-256 checksum, only if key holds nothing
	// (dl.ErrExists otherwise).
	PutIfAbsent(ctx context.Context, key string, body []byte, retainUntil time.Time) error
	// Get reads an object (dl.ErrNotFound when absent).
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns the keys under prefix after startAfter ("" for all),
	// in key order.
	List(ctx context.Context, prefix, startAfter string) ([]string, error)
	// Versions counts the versions of exactly key (not of longer keys
	// under it): object versions, and the delete markers not older than
	// its first version (S3 ListObjectVersions; a marker placed before
	// the ledger's If-None-Match PUT hides nothing). A key the ledger
	// adopts has one version and no such marker (adoptable).
	Versions(ctx context.Context, key string) (versions, deleteMarkers int, err error)
}

// Head is a shard chain's head item (#led#head#<shard>).
type Head = dl.ChainHead

// DigestHead is the digest chain's head item (#led#digest).
type DigestHead = dl.DigestHead

// State holds the ledger's items in the quarantine table. Every read is
// consistent.
type State interface {
	// Head reads a shard's head (false when the shard has none).
	Head(ctx context.Context, shard string) (Head, bool, error)
	// Heads reads the heads of shards; shards without one are absent.
	Heads(ctx context.Context, shards []string) (map[string]Head, error)
	// AdvanceHead writes h (its LastSeq, segment and count) if the head's
	// segment_key is still prevSegmentKey ("" : no head yet), keeping an
	// existing pending_since and setting pendingSince otherwise
	// (dl.ErrConflict when the condition fails). The segment key, not
	// last_seq, is the condition: a segment of late changes moves the head
	// and keeps its last_seq.
	AdvanceHead(ctx context.Context, h Head, prevSegmentKey string, pendingSince time.Time) error
	// MarkAnchored sets anchored_seq to lastSeq and removes pending_since
	// if the head's segment_key is still segmentKey (dl.ErrConflict
	// otherwise).
	MarkAnchored(ctx context.Context, shard, segmentKey, lastSeq string) error
	// DigestHead reads the digest chain's head (false: no digest yet).
	DigestHead(ctx context.Context) (DigestHead, bool, error)
	// PutDigestHead writes d if the head's n is still prevN (0: none yet;
	// dl.ErrConflict otherwise).
	PutDigestHead(ctx context.Context, d DigestHead, prevN int64) error
}

// Signer signs digests with the asymmetric KMS key.
type Signer interface {
	// Sign signs a SHA-256 hash (KMS MessageType DIGEST).
	Sign(ctx context.Context, hash [32]byte) ([]byte, error)
	// KeyID is the key's ARN as digests record it; Algorithm the signing
	// algorithm (dl.AlgECDSA or dl.AlgRSAPSS).
	KeyID() string
	Algorithm() string
	// PublicKey is the key's public part, DER (SubjectPublicKeyInfo).
	PublicKey(ctx context.Context) ([]byte, error)
}

// Shards lists the shards of the table's stream: shard id → its parent
// shard id (DescribeStream ParentShardId; "" when it has none).
type Shards interface {
	Shards(ctx context.Context) (map[string]string, error)
}

// Counts counts the shard chains' segments into the metrics counters,
// segment by segment in chain order, idempotently (design §4 as review 1's
// F2 changed it; dynamostore.Counts): counting follows the ledger, not the
// stream, so a change delivered late is counted once it is ledgered.
type Counts interface {
	// Counted is the number of shard's last fully counted segment (its
	// place in the chain: 1 for the first, the head's Segments for the
	// head; 0 when none is).
	Counted(ctx context.Context, shard string) (int64, error)
	// Count counts segment n of shard's chain, the segments before it
	// being counted (nothing to do when it is counted already).
	Count(ctx context.Context, shard string, n int64, seg dl.Segment) error
}

// ImageDecoder converts a stream image into the ledger's item
// (dynamostore.LedgerItemFromStream).
type ImageDecoder func(map[string]events.DynamoDBAttributeValue) (dl.Item, error)
