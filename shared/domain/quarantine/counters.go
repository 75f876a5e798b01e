package quarantine

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// Counters keep the metrics function's cost independent of the table's
// size: every record write also adjusts a few counter items in the same
// transaction. Each counter is split into CounterShards items (by record) so
// that concurrent writers rarely touch the same one; readers sum the shards.
const CounterShards = 8

// Counter kinds.
const (
	CounterState    = "state"    // records by status and class
	CounterOpen     = "open"     // QUARANTINED records by failure signature
	CounterArrivals = "arrivals" // new records, per minute
	CounterCameBack = "cameback" // replays that failed again, per hour
	// CounterResolved counts replays that settled, in the hour they
	// settled. A replay that comes back after it settled is taken out of
	// its hour again (and counted as came back), so resolved ÷ (resolved +
	// came back) never counts one replay as both.
	CounterResolved = "resolved"
	CounterPoisoned = "poisoned" // records newly parked as poison, per hour
	// Per standing policy (actor "policy:<id>"): its replays sent, and
	// those that came back to the DLQ, before or after they settled.
	CounterPolicySent     = "policy-sent"
	CounterPolicyCameBack = "policy-cameback"
	// Records set aside by an integrity hold (Store.Hold), per source.
	CounterHeld      = "held"
	CounterNewHeld   = "held-new" // integrity holds set, per minute
	counterKeyPrefix = "#ctr#"    // no queue name starts with #, so no record id does
)

// StoredState is what a record looked like when it was last read from or
// written to the store: the counters it is counted in.
type StoredState struct {
	Status    Status
	Class     Class
	Signature string
	// AttemptCount tells whether a write appended an attempt (a payload
	// read, say, appends none).
	AttemptCount int
	// StatusSince is when the stored status began: for a RESOLVED record,
	// the hour whose resolved counter counts it.
	StatusSince Time
}

// MarkStored records r's current state as the state the store holds. Store
// adapters call it after every read and write.
func (r *Record) MarkStored() {
	r.stored = &StoredState{Status: r.Status, Class: r.FailureClass, Signature: r.FailureSignature, AttemptCount: r.AttemptCount, StatusSince: r.StatusSince}
}

// CounterDelta is one change to one counter shard.
type CounterDelta struct {
	Key    string
	Source string
	Kind   string
	N      int64
	// Signature is set on open-signature counters (they are listed by it).
	Signature string
	// ExpiresAt is set on time-bucket counters (a TTL in Unix seconds).
	ExpiresAt int64
}

// CounterDeltas are the counter changes that writing r makes, given the
// state the store holds for it (none for a new record).
func (r *Record) CounterDeltas() []CounterDelta {
	shard := r.shard()
	var out []CounterDelta
	add := func(d CounterDelta) {
		d.Source = r.Source
		out = append(out, d)
	}
	prev, cur := r.stored, &StoredState{Status: r.Status, Class: r.FailureClass, Signature: r.FailureSignature}
	if prev == nil || prev.Status != cur.Status || prev.Class != cur.Class {
		if prev != nil {
			add(CounterDelta{Key: StateCounterKey(r.Source, prev.Status, prev.Class, shard), Kind: CounterState, N: -1})
		}
		add(CounterDelta{Key: StateCounterKey(r.Source, cur.Status, cur.Class, shard), Kind: CounterState, N: 1})
	}
	wasOpen := prev != nil && prev.Status == StatusQuarantined
	isOpen := cur.Status == StatusQuarantined
	if wasOpen != isOpen || (wasOpen && prev.Signature != cur.Signature) {
		if wasOpen {
			add(CounterDelta{Key: OpenCounterKey(r.Source, prev.Signature, shard), Kind: CounterOpen, N: -1, Signature: prev.Signature})
		}
		if isOpen {
			add(CounterDelta{Key: OpenCounterKey(r.Source, cur.Signature, shard), Kind: CounterOpen, N: 1, Signature: cur.Signature})
		}
	}
	switch {
	case prev == nil:
		at := r.FirstSeen.Truncate(time.Minute)
		add(CounterDelta{Key: BucketCounterKey(r.Source, CounterArrivals, at, shard), Kind: CounterArrivals, N: 1, ExpiresAt: at.Add(48 * time.Hour).Unix()})
	case cur.Status == StatusQuarantined && r.arrived() && (prev.Status == StatusRedriven || prev.Status == StatusRedriving || prev.Status == StatusResolved):
		at := r.LastSeen.Truncate(time.Hour)
		add(CounterDelta{Key: BucketCounterKey(r.Source, CounterCameBack, at, shard), Kind: CounterCameBack, N: 1, ExpiresAt: at.Add(48 * time.Hour).Unix()})
		if prev.Status == StatusResolved {
			// It settled too early: no longer a success of the hour it settled in.
			was := prev.StatusSince.Truncate(time.Hour)
			add(CounterDelta{Key: BucketCounterKey(r.Source, CounterResolved, was, shard), Kind: CounterResolved, N: -1, ExpiresAt: was.Add(48 * time.Hour).Unix()})
		}
	case cur.Status == StatusResolved && prev.Status == StatusRedriven:
		at := r.StatusSince.Truncate(time.Hour)
		add(CounterDelta{Key: BucketCounterKey(r.Source, CounterResolved, at, shard), Kind: CounterResolved, N: 1, ExpiresAt: at.Add(48 * time.Hour).Unix()})
	case cur.Status == StatusParked && cur.Class == ClassPoison && prev.Status != StatusParked:
		at := r.StatusSince.Truncate(time.Hour)
		add(CounterDelta{Key: BucketCounterKey(r.Source, CounterPoisoned, at, shard), Kind: CounterPoisoned, N: 1, ExpiresAt: at.Add(48 * time.Hour).Unix()})
	}
	// Standing policies' breakers: what each sent, and what came back.
	if prev != nil {
		if last := r.lastAttempt(); last != nil && r.AttemptCount != prev.AttemptCount && last.Stage == StageRedrive && last.MessageID != "" {
			if id, ok := PolicyOfActor(last.Actor); ok {
				add(CounterDelta{Key: PolicyCounterKey(r.Source, id, CounterPolicySent, shard), Kind: CounterPolicySent, N: 1})
			}
		}
		// RedrivenBy stays set on a RESOLVED record: a replay that comes
		// back after it settled counts against its policy too.
		if cur.Status == StatusQuarantined && r.arrived() && (prev.Status == StatusRedriven || prev.Status == StatusRedriving || prev.Status == StatusResolved) {
			if id, ok := PolicyOfActor(r.RedrivenBy); ok {
				add(CounterDelta{Key: PolicyCounterKey(r.Source, id, CounterPolicyCameBack, shard), Kind: CounterPolicyCameBack, N: 1})
			}
		}
	}
	return out
}

func (r *Record) lastAttempt() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// PolicyActorPrefix starts the actor of a standing policy's replays.
const PolicyActorPrefix = "policy:"

// PolicyOfActor returns the policy id of a policy's actor.
func PolicyOfActor(actor string) (string, bool) {
	if len(actor) <= len(PolicyActorPrefix) || actor[:len(PolicyActorPrefix)] != PolicyActorPrefix {
		return "", false
	}
	return actor[len(PolicyActorPrefix):], true
}

// PolicyCounterKey is the key of one shard of a standing policy's counter.
func PolicyCounterKey(source, policyID, kind string, shard int) string {
	return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, source, kind, policyID, shard)
}

// IsRecordKey reports whether a table key names a record, not a counter
// or a standing policy (their keys start with '#'; no queue name does).
func IsRecordKey(id string) bool {
	return id != "" && id[0] != '#'
}

// arrived reports whether the newest history entry is an arrival from the
// DLQ (and not, say, redrive giving a claim back).
func (r *Record) arrived() bool {
	return len(r.Attempts) > 0 && r.Attempts[len(r.Attempts)-1].IsArrival()
}

func (r *Record) shard() int { return shardOf(r.DLQID) }

func shardOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % CounterShards)
}

// StateCounterKey is the key of one shard of a status × class counter.
func StateCounterKey(source string, st Status, c Class, shard int) string {
	return fmt.Sprintf("%s%s#%s#%s#%s#%d", counterKeyPrefix, source, CounterState, st, c, shard)
}

// OpenCounterKey is the key of one shard of an open-signature counter.
func OpenCounterKey(source, signature string, shard int) string {
	return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, source, CounterOpen, signature, shard)
}

// BucketCounterKey is the key of one shard of a time-bucket counter.
func BucketCounterKey(source, kind string, at time.Time, shard int) string {
	return fmt.Sprintf("%s%s#%s#%s#%d", counterKeyPrefix, source, kind, at.UTC().Format("2006-01-02T15:04"), shard)
}

// OpenCounterPartition is the status-index partition that holds a source's
// open-signature counters, so they are listed with one query.
func OpenCounterPartition(source string) string {
	return "CTR#OPEN#" + source
}

// HeldCounterKey is the key of one shard of a source's integrity-hold
// counter.
func HeldCounterKey(source string, shard int) string {
	return fmt.Sprintf("%s%s#%s#%d", counterKeyPrefix, source, CounterHeld, shard)
}

// HoldDeltas are the counter changes an integrity hold of record id at at
// makes: one more held record for the source the id names (the key cannot
// be rewritten in the item; its source attribute can), in the record's
// shard, and one more new hold in the minute's bucket (what the alarm
// watches, so that a new hold notifies again once the alarm is back to OK).
func HoldDeltas(id string, at time.Time) []CounterDelta {
	source, shard := SourceOfID(id), shardOf(id)
	minute := at.Truncate(time.Minute)
	return []CounterDelta{
		{Key: HeldCounterKey(source, shard), Source: source, Kind: CounterHeld, N: 1},
		{Key: BucketCounterKey(source, CounterNewHeld, minute, shard), Source: source, Kind: CounterNewHeld, N: 1, ExpiresAt: minute.Add(48 * time.Hour).Unix()},
	}
}

// SourceOfID is the source queue a record id names (the part before the
// first '#': queue names cannot hold one).
func SourceOfID(id string) string {
	if i := strings.IndexByte(id, '#'); i >= 0 {
		return id[:i]
	}
	return id
}
