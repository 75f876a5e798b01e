package ledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// UnprovenHead is a shard head the ledger's table state held that the
// digest run could not prove against the bucket (the segment missing or
// not hashing to it, not chaining back to the previous digest's head in
// as many segments as it counts, a count or last_seq gone backwards, or a
// walk that did not finish in the run's time). It is recorded, never
// signed as the shard's head: the digest keeps the previous one.
type UnprovenHead struct {
	Shard         string `json:"shard"`
	SegmentKey    string `json:"segment_key"`
	SegmentSHA256 string `json:"segment_sha256"`
	Segments      int64  `json:"segments"`
	LastSeq       string `json:"last_seq"`
	Reason        string `json:"reason"`
}

// ReasonNotReached is an UnprovenHead's reason when the run ran out of
// time before its walk finished (the next run continues).
const ReasonNotReached = "not reached in time"

// checkUnproven checks a digest's unproven list: each names a shard and a
// reason, sorted by shard, each shard once.
func checkUnproven(us []UnprovenHead) error {
	for i, u := range us {
		if u.Shard == "" || u.Reason == "" {
			return fmt.Errorf("unproven head %d without a shard or a reason", i)
		}
	}
	if !slices.IsSortedFunc(us, func(a, b UnprovenHead) int { return strings.Compare(a.Shard, b.Shard) }) {
		return errors.New("unproven heads not sorted by shard")
	}
	for i := 1; i < len(us); i++ {
		if us[i].Shard == us[i-1].Shard {
			return fmt.Errorf("unproven head of shard %s twice", us[i].Shard)
		}
	}
	return nil
}
