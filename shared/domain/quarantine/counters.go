package quarantine

import (
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
	CounterHeld    = "held"
	CounterNewHeld = "held-new" // integrity holds set, per minute
)

// CounterKey names one shard of one counter by what it counts. The store
// adapter owns how it is written down (dynamostore's layout); keys compare
// with ==, so the constructors below are the way to build one.
type CounterKey struct {
	Source string
	Kind   string
	// Status and Class are set on state counters.
	Status Status
	Class  Class
	// Signature is set on open-signature counters (they are listed by it).
	Signature string
	// Policy is set on a standing policy's counters.
	Policy string
	// Bucket is the minute a time-bucket counter counts (in UTC; an hour
	// bucket is the minute the hour starts). Zero on the other counters.
	Bucket time.Time
	Shard  int
}

// CounterDelta is one change to one counter shard.
type CounterDelta struct {
	CounterKey
	N int64
}

// counted is what of a record its counters count.
type counted struct {
	Status       Status
	Class        Class
	Signature    string
	AttemptCount int
	StatusSince  Time
}

func countedOf(r *Record) *counted {
	return &counted{Status: r.Status, Class: r.FailureClass, Signature: r.FailureSignature, AttemptCount: r.AttemptCount, StatusSince: r.StatusSince}
}

// CounterDeltas are the counter changes that replacing prev, the version
// the store holds, with next makes (prev nil: next is a new record). The
// store applies them in the same transaction as the record, so a write
// conditional on prev.Version counts each change exactly once; a retried
// write found already applied (SameVersion) applies nothing again.
func CounterDeltas(prev, next *Record) []CounterDelta {
	r := next
	shard := r.shard()
	var out []CounterDelta
	add := func(k CounterKey, n int64) {
		out = append(out, CounterDelta{CounterKey: k, N: n})
	}
	var was *counted
	if prev != nil {
		was = countedOf(prev)
	}
	cur := countedOf(r)
	if was == nil || was.Status != cur.Status || was.Class != cur.Class {
		if was != nil {
			add(StateCounterKey(r.Source, was.Status, was.Class, shard), -1)
		}
		add(StateCounterKey(r.Source, cur.Status, cur.Class, shard), 1)
	}
	wasOpen := was != nil && was.Status == StatusQuarantined
	isOpen := cur.Status == StatusQuarantined
	if wasOpen != isOpen || (wasOpen && was.Signature != cur.Signature) {
		if wasOpen {
			add(OpenCounterKey(r.Source, was.Signature, shard), -1)
		}
		if isOpen {
			add(OpenCounterKey(r.Source, cur.Signature, shard), 1)
		}
	}
	cameBack := was != nil && cur.Status == StatusQuarantined && r.arrived() &&
		(was.Status == StatusRedriven || was.Status == StatusRedriving || was.Status == StatusResolved)
	switch {
	case was == nil:
		add(BucketCounterKey(r.Source, CounterArrivals, r.FirstSeen.Truncate(time.Minute), shard), 1)
	case cameBack:
		add(BucketCounterKey(r.Source, CounterCameBack, r.LastSeen.Truncate(time.Hour), shard), 1)
		if was.Status == StatusResolved {
			// It settled too early: no longer a success of the hour it settled in.
			add(BucketCounterKey(r.Source, CounterResolved, was.StatusSince.Truncate(time.Hour), shard), -1)
		}
	case cur.Status == StatusResolved && was.Status == StatusRedriven:
		add(BucketCounterKey(r.Source, CounterResolved, r.StatusSince.Truncate(time.Hour), shard), 1)
	case cur.Status == StatusParked && cur.Class == ClassPoison && was.Status != StatusParked:
		add(BucketCounterKey(r.Source, CounterPoisoned, r.StatusSince.Truncate(time.Hour), shard), 1)
	}
	// Standing policies' breakers: what each sent, and what came back.
	if was != nil {
		if last := r.lastAttempt(); last != nil && r.AttemptCount != was.AttemptCount && last.Stage == StageRedrive && last.MessageID != "" {
			if id, ok := PolicyOfActor(last.Actor); ok {
				add(PolicyCounterKey(r.Source, id, CounterPolicySent, shard), 1)
			}
		}
		// RedrivenBy stays set on a RESOLVED record: a replay that comes
		// back after it settled counts against its policy too.
		if cameBack {
			if id, ok := PolicyOfActor(r.RedrivenBy); ok {
				add(PolicyCounterKey(r.Source, id, CounterPolicyCameBack, shard), 1)
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

// PolicyCounterKey names one shard of a standing policy's counter of kind.
func PolicyCounterKey(source, policyID, kind string, shard int) CounterKey {
	return CounterKey{Source: source, Kind: kind, Policy: policyID, Shard: shard}
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

// StateCounterKey names one shard of a status × class counter.
func StateCounterKey(source string, st Status, c Class, shard int) CounterKey {
	return CounterKey{Source: source, Kind: CounterState, Status: st, Class: c, Shard: shard}
}

// OpenCounterKey names one shard of an open-signature counter.
func OpenCounterKey(source, signature string, shard int) CounterKey {
	return CounterKey{Source: source, Kind: CounterOpen, Signature: signature, Shard: shard}
}

// BucketCounterKey names one shard of a time-bucket counter: the minute
// of at (in UTC).
func BucketCounterKey(source, kind string, at time.Time, shard int) CounterKey {
	return CounterKey{Source: source, Kind: kind, Bucket: at.Truncate(time.Minute).UTC(), Shard: shard}
}

// HeldCounterKey names one shard of a source's integrity-hold counter.
func HeldCounterKey(source string, shard int) CounterKey {
	return CounterKey{Source: source, Kind: CounterHeld, Shard: shard}
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
		{CounterKey: HeldCounterKey(source, shard), N: 1},
		{CounterKey: BucketCounterKey(source, CounterNewHeld, minute, shard), N: 1},
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
