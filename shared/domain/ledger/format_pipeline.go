package ledger

import (
	"strings"
	"time"
)

// The pipeline's evidence in a digest (issue 25: a stopped ledger pages
// someone). A digest run reads the ledger function's event source
// mappings on the stream (Lambda ListEventSourceMappings) and records them
// as "mapping"; it writes a canary change to the table and records it as
// "canary". Verify names a digest during which the mapping was off,
// changed or re-created (verify_mapping.go), and a canary that never
// reached the ledger.

// MappingEnabled is the State of a mapping that polls its stream.
const MappingEnabled = "Enabled"

// Mapping is one event source mapping as ListEventSourceMappings returns
// it: only what the API returns (StartingPosition is returned for stream
// sources; LastModified is its time, RFC 3339).
type Mapping struct {
	UUID             string `json:"uuid"`
	State            string `json:"state"`
	LastModified     string `json:"last_modified"`
	EventSourceARN   string `json:"event_source_arn"`
	StartingPosition string `json:"starting_position,omitempty"`
}

// MappingSeen is what a digest run found: every mapping of the function
// on the stream (none, one, or more), or why it could not read them
// (Error; Mappings then empty). A failure to read does not stop the
// digest: it is recorded, and verify names it.
type MappingSeen struct {
	Mappings []Mapping `json:"mappings"`
	Error    string    `json:"error,omitempty"`
}

// CanaryRef is the canary change a digest run wrote before signing: its
// number (one more than the run before's) and its time (RFC 3339).
type CanaryRef struct {
	N  int64  `json:"n"`
	At string `json:"at"`
}

// CanaryPrefix starts the canary's table key. Only the ledger role writes
// it; the stream handler ledgers it (Ledgered does not: it is not a
// record, and verify's record checks ignore it) so that its arrival in a
// segment proves the stream reached the ledger.
const (
	CanaryPrefix = "#cny#"
	CanaryKey    = CanaryPrefix + "ledger"
	// CanaryNAttr and CanaryAtAttr are the canary item's number and time.
	CanaryNAttr  = "canary_n"
	CanaryAtAttr = "canary_at"
)

// IsCanary reports whether a table key is the ledger's canary.
func IsCanary(key string) bool { return strings.HasPrefix(key, CanaryPrefix) }

// Kept reports whether the stream handler ledgers a change of key: a
// record, a standing policy, or the canary.
func Kept(key string) bool { return Ledgered(key) || IsCanary(key) }

// CanaryOf is the canary number an entry carries (false when it is not a
// canary's INSERT or MODIFY).
func CanaryOf(e Entry) (int64, bool) {
	if !IsCanary(e.Key) || e.Item == nil {
		return 0, false
	}
	return e.Item.Int(CanaryNAttr)
}

// CanaryItem is the canary's table item (CanaryKey): the newest canary
// written (N, At) and Since, when the oldest canary that had not arrived
// when it was written was written (At when all before it had arrived).
type CanaryItem struct {
	N     int64
	At    time.Time
	Since time.Time
}
