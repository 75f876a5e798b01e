package dynamostore

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The table layout: every key format and attribute name the adapters of
// this package write or query, in one place. One table holds these kinds
// of item, told apart by their key:
//
//	<source>#<idempotency key>[#<n>]  a record (quarantine.RecordID); its
//	                                  attributes are the record's JSON fields
//	#ctr#<source>#<kind>#...#<shard>  a counter shard (CounterItemKey)
//	#pol#<source>#<id>                a standing policy (PolicyStore)
//	#apr#<source>#<id>                a four-eyes approval (ApprovalStore)
//	#src#<source>                     a source marker: the source has records
//	#idx#<index>                      an index migration's state (index.go)
//	#mtr#<source>                     the metrics function's marks (marks.go)
//	#swp#<id>#<version>               a sweeper's payload intent (payloadintents.go)
//
// No queue name starts with '#', so no record key does (IsRecordKey).
//
// The source index (IndexBySource) is partitioned by status_key
// (IndexKeyAttr) and sorted by first_seen. A record's status_key is
// "<source>#<status>#<shard>" (RecordPartition), its shard a hash of its
// key modulo IndexShards, so that one source's listing reads only that
// source and a busy source's writes spread over IndexShards partitions.
// The other items keep one partition each, their status_key equal to
// their status: "CTR#OPEN#<source>" (a source's open-signature counters),
// "#pol#<source>" (policies), "#apr#<source>" (approvals), "#src" (the
// source markers) and "#swp" (the payload intents). status_key is not sealed: it is derived from sealed
// fields (IndexKeyOf), and dlqctl verify names a version whose status_key
// is not the one its fields derive.
//
// The status index (IndexByStatus) is the one it replaces, partitioned by
// status alone; listings read it until the backfill of status_key reports
// complete (index.go, docs/operations.md). Existing items and the
// template's indexes depend on every string here: change none of them
// without a migration.

// MaxItemBytes is DynamoDB's item size limit.
const MaxItemBytes = 400 * 1024

// Key attribute names and index names used in the template.
const (
	CounterAttr   = "n"
	KeyAttr       = "dlq_id"
	VersionAttr   = "version"
	IndexByStatus = "status-first-seen-v2"
	// IndexBySource is the per-source, sharded index (IndexKeyAttr,
	// first_seen) that replaces IndexByStatus.
	IndexBySource = "source-status-v3"
	// IndexKeyAttr is IndexBySource's partition key: derived, not sealed.
	IndexKeyAttr = "status_key"
	// IndexShards is how many index partitions one source's records of one
	// status spread over. Part of the index contract: changing it moves
	// every record to another partition (a migration, as a new index is).
	IndexShards = 16
	// HoldAttr and HoldAtAttr mark a record version set aside by an
	// integrity hold (Store.Hold): the reason kind and when. They are not
	// record fields (no seal covers them), and HoldAttr is projected into
	// the status index, whose listings leave held records out.
	HoldAttr   = "integrity_hold"
	HoldAtAttr = "integrity_hold_at"
)

// Record attributes the adapters name (the record's JSON field names), and
// the attributes of counter and policy items.
const (
	statusAttr         = "status"     // the status index's partition key
	firstSeenAttr      = "first_seen" // the status index's sort key
	sourceAttr         = "source"
	classAttr          = "failure_class"
	signatureAttr      = "failure_signature"
	groupAttr          = "message_group_id"
	idempotencyKeyAttr = "idempotency_key"
	sequenceAttr       = "sequence_number"
	leaseUntilAttr     = "lease_until"
	statusSinceAttr    = "status_since"
	lastSeenAttr       = "last_seen"
	sealAttr           = "seal"
	counterKindAttr    = "counter_kind"
	expiresAtAttr      = "expires_at" // the table's TTL attribute
	policyAttr         = "policy"     // a policy item's sealed JSON
)

const (
	counterKeyPrefix     = "#ctr#"
	openCounterPartition = "CTR#OPEN#"
	policyKeyPrefix      = "#pol#"
	sourceMarkerPrefix   = "#src#"
	// SourcePartition is the index partition of the source markers.
	SourcePartition = "#src"
	// bucketLayout formats a time-bucket counter's minute in its key.
	bucketLayout = "2006-01-02T15:04"
	// bucketTTL is how long a time-bucket counter is kept after its
	// minute begins (expires_at).
	bucketTTL = 48 * time.Hour
)

// IsRecordKey reports whether a table key names a record, not a counter
// or a standing policy (their keys start with '#'; no queue name does).
func IsRecordKey(id string) bool {
	return id != "" && id[0] != '#'
}

// CounterItemKey is the table key of one counter shard.
func CounterItemKey(k quarantine.CounterKey) string {
	switch k.Kind {
	case quarantine.CounterState:
		return fmt.Sprintf("%s%s#%s#%s#%s#%d", counterKeyPrefix, k.Source, k.Kind, k.Status, k.Class, k.Shard)
	case quarantine.CounterOpen:
		return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, k.Source, k.Kind, k.Signature, k.Shard)
	case quarantine.CounterHeld:
		return fmt.Sprintf("%s%s#%s#%d", counterKeyPrefix, k.Source, k.Kind, k.Shard)
	case quarantine.CounterPolicySent, quarantine.CounterPolicyCameBack:
		return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, k.Source, k.Kind, k.Policy, k.Shard)
	}
	// A time bucket: arrivals, came back, resolved, poisoned, new holds.
	return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, k.Source, k.Kind, k.Bucket.UTC().Format(bucketLayout), k.Shard)
}

// counterExpiry is the TTL of a counter shard in Unix seconds (0: kept):
// time-bucket counters expire bucketTTL after their minute.
func counterExpiry(k quarantine.CounterKey) int64 {
	if k.Bucket.IsZero() {
		return 0
	}
	return k.Bucket.Add(bucketTTL).Unix()
}

// OpenCounterPartition is the status-index partition that holds a source's
// open-signature counters, so they are listed with one query.
func OpenCounterPartition(source string) string {
	return openCounterPartition + source
}

// policyKey is the table key of a standing policy.
func policyKey(source, id string) string { return policyKeyPrefix + source + "#" + id }

// PolicyPartition is the status-index partition of a source's policies.
func PolicyPartition(source string) string { return policyKeyPrefix + source }

// IndexShard is the index shard of the record with key id: FNV-1a of the
// key modulo IndexShards.
func IndexShard(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % IndexShards)
}

// RecordPartition is the source index partition of a source's records of
// one status in one shard.
func RecordPartition(source string, st quarantine.Status, shard int) string {
	return fmt.Sprintf("%s#%s#%02d", source, st, shard)
}

// recordIndexKey is the status_key of a record's item.
func recordIndexKey(source string, st quarantine.Status, id string) string {
	return RecordPartition(source, st, IndexShard(id))
}

// sourceMarkerKey is the table key of a source's marker.
func sourceMarkerKey(source string) string { return sourceMarkerPrefix + source }

// itemKey is the primary key of the item whose key attribute is k.
func itemKey(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{KeyAttr: &types.AttributeValueMemberS{Value: k}}
}

// The ledger's own items (design §2): a shard chain's head, the counters'
// checkpoint of a shard, and the digest chain's head. The ledger ignores
// changes to them (its writes stream back to it).
const (
	LedgerKeyPrefix   = "#led#"
	LedgerHeadPrefix  = LedgerKeyPrefix + "head#"
	LedgerCountPrefix = LedgerKeyPrefix + "ctr#"
	LedgerDigestKey   = LedgerKeyPrefix + "digest"

	// Head attributes.
	LedgerLastSeqAttr       = "last_seq"
	LedgerSegmentKeyAttr    = "segment_key"
	LedgerSegmentSHA256Attr = "segment_sha256"
	LedgerSegmentsAttr      = "segments"
	LedgerPendingSinceAttr  = "pending_since"
	LedgerAnchoredSeqAttr   = "anchored_seq"
	LedgerUpdatedAtAttr     = "updated_at"
	// The counters' checkpoint attribute of the old, sequence-number
	// format: a checkpoint that still holds it is refused (counts.go).
	LedgerCountSeqAttr = "ctr_seq"
	// Digest head attributes.
	LedgerDigestNAttr         = "n"
	LedgerDigestKeyAttr       = "key"
	LedgerDigestSHA256Attr    = "sha256"
	LedgerDigestSignatureAttr = "signature"
	LedgerDigestAtAttr        = "at"
)

// LedgerHeadKey is the table key of a shard chain's head.
func LedgerHeadKey(shard string) string { return LedgerHeadPrefix + shard }

// LedgerCountKey is the table key of a shard's counters' checkpoint.
func LedgerCountKey(shard string) string { return LedgerCountPrefix + shard }
