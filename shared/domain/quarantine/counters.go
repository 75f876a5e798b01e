package quarantine

import (
	"hash/fnv"
	"strings"
	"time"
)

// Counters keep the metrics function's cost independent of the table's
// size: every change of a record adjusts a few counter items. They are not
// written with the record: the ledger derives each change's deltas from the
// table's stream (ChangeDeltas of the old and new images) and applies them
// per batch, once per change. Each counter is split into CounterShards items
// so that concurrent writers rarely touch the same one; readers sum the
// shards. The deltas below name the record's shard; the ledger moves them
// to the shard of the stream shard that carries the change
// (CounterShardOf), so that one batch touches one shard of each counter.
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
	CounterNewHeld = "held-new" // integrity holds set, per minute (HoldDeltas)
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

// CounterDeltas are the counter changes that replacing prev, the version
// the store holds, with next makes (prev nil: next is a new record). The
// ledger applies them for each change of the table's stream (ChangeDeltas),
// so each write the store applied is counted exactly once, however often
// it was tried.
func CounterDeltas(prev, next *Record) []CounterDelta {
	src, shard := next.Source, next.shard()
	var out []CounterDelta
	add := func(k CounterKey, n int64) {
		out = append(out, CounterDelta{CounterKey: k, N: n})
	}
	if prev == nil || prev.Status != next.Status || prev.FailureClass != next.FailureClass {
		if prev != nil {
			add(StateCounterKey(src, prev.Status, prev.FailureClass, shard), -1)
		}
		add(StateCounterKey(src, next.Status, next.FailureClass, shard), 1)
	}
	wasOpen := prev != nil && prev.Status == StatusQuarantined
	isOpen := next.Status == StatusQuarantined
	if wasOpen != isOpen || (wasOpen && prev.FailureSignature != next.FailureSignature) {
		if wasOpen {
			add(OpenCounterKey(src, prev.FailureSignature, shard), -1)
		}
		if isOpen {
			add(OpenCounterKey(src, next.FailureSignature, shard), 1)
		}
	}
	cameBack := prev != nil && isOpen && next.arrived() &&
		(prev.Status == StatusRedriven || prev.Status == StatusRedriving || prev.Status == StatusResolved)
	switch {
	case prev == nil:
		add(BucketCounterKey(src, CounterArrivals, next.FirstSeen.Truncate(time.Minute), shard), 1)
	case cameBack:
		add(BucketCounterKey(src, CounterCameBack, next.LastSeen.Truncate(time.Hour), shard), 1)
		if prev.Status == StatusResolved {
			// It settled too early: no longer a success of the hour it settled in.
			add(BucketCounterKey(src, CounterResolved, prev.StatusSince.Truncate(time.Hour), shard), -1)
		}
	case next.Status == StatusResolved && prev.Status == StatusRedriven:
		add(BucketCounterKey(src, CounterResolved, next.StatusSince.Truncate(time.Hour), shard), 1)
	case next.Status == StatusParked && next.FailureClass == ClassPoison && prev.Status != StatusParked:
		add(BucketCounterKey(src, CounterPoisoned, next.StatusSince.Truncate(time.Hour), shard), 1)
	}
	// Standing policies' breakers: what each sent, and what came back.
	if prev != nil {
		if last := next.lastAttempt(); last != nil && next.AttemptCount != prev.AttemptCount && last.Stage == StageRedrive && last.MessageID != "" {
			if id, ok := PolicyOfActor(last.Actor); ok {
				add(PolicyCounterKey(src, id, CounterPolicySent, shard), 1)
			}
		}
		// RedrivenBy stays set on a RESOLVED record: a replay that comes
		// back after it settled counts against its policy too.
		if cameBack {
			if id, ok := PolicyOfActor(next.RedrivenBy); ok {
				add(PolicyCounterKey(src, id, CounterPolicyCameBack, shard), 1)
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

// CounterShardOf is the counter shard (0 to CounterShards-1) a key names:
// FNV-1a of it, modulo CounterShards.
func CounterShardOf(key string) int { return shardOf(key) }

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
// shard, and one more new hold in the minute's bucket. The metrics
// function no longer reads the minute's bucket (it publishes the holds
// beyond its marks: MetricMarks); it is still written because the
// counters' recount (dlqctl verify) derives every counter of every
// segment with today's rules: a rule dropped would make the buckets the
// older ledger wrote drift until their TTL.
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

// ChangeDeltas are the counter changes one change of a record's item makes,
// from the item before (old, oldHold) and after (new, newHold) it: what
// the table's stream reports as its old and new images (nil: no image; a
// hold is nil when the image carries none).
//
//   - INSERT (old nil): CounterDeltas(nil, new);
//   - a change of version: CounterDeltas(old, new);
//   - a hold added (newHold set, oldHold nil): HoldDeltas(new's id, the
//     hold's time), the one change Store.Hold makes (with the version
//     unchanged: added to the above if a write ever did both);
//   - REMOVE (new nil): RemoveDeltas(old), the record taken out of its
//     state and open counters (a deletion is tampering, but counters follow
//     the table);
//   - anything else (the same version rewritten, a hold removed, identical
//     images): nothing. No record write of the store makes such a change,
//     and the old counting in the write's transaction did not count it
//     either.
//
// Summed over the changes of a record's life, they are the counter changes
// its writes (Create, Replace, Hold) make.
func ChangeDeltas(old, new *Record, oldHold, newHold *IntegrityHold) []CounterDelta {
	switch {
	case new == nil && old == nil:
		return nil
	case new == nil:
		return RemoveDeltas(old)
	}
	var out []CounterDelta
	if old == nil || old.Version != new.Version {
		out = CounterDeltas(old, new)
	}
	if newHold != nil && oldHold == nil {
		out = append(out, HoldDeltas(new.DLQID, newHold.At)...)
	}
	return out
}

// RemoveDeltas take a record whose item was deleted out of the counters
// that count what the table holds: its state counter, and its open
// counter when it was QUARANTINED. (Time buckets count events, which
// happened; a hold counter counts holds set.)
func RemoveDeltas(old *Record) []CounterDelta {
	src, shard := old.Source, old.shard()
	out := []CounterDelta{{CounterKey: StateCounterKey(src, old.Status, old.FailureClass, shard), N: -1}}
	if old.Status == StatusQuarantined {
		out = append(out, CounterDelta{CounterKey: OpenCounterKey(src, old.FailureSignature, shard), N: -1})
	}
	return out
}
