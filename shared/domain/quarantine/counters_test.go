package quarantine_test

import (
	"maps"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// sum adds deltas into a map by counter key, dropping keys that sum to 0.
func sum(into map[quarantine.CounterKey]int64, ds []quarantine.CounterDelta) {
	for _, d := range ds {
		into[d.CounterKey] += d.N
		if into[d.CounterKey] == 0 {
			delete(into, d.CounterKey)
		}
	}
}

func sumOf(ds []quarantine.CounterDelta) map[quarantine.CounterKey]int64 {
	m := map[quarantine.CounterKey]int64{}
	sum(m, ds)
	return m
}

// must returns a transition's result, failing t on its error.
func must(t *testing.T) func(*quarantine.Record, error) *quarantine.Record {
	return func(r *quarantine.Record, err error) *quarantine.Record {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// arrival is a second failure of r from the DLQ.
func arrival(t *testing.T, r *quarantine.Record, at time.Time) *quarantine.Record {
	t.Helper()
	return must(t)(r.Arrive(quarantine.Attempt{At: quarantine.At(at), Stage: "s", Reason: "again", MessageID: "m-" + at.String(), Actor: quarantine.ActorIngest},
		quarantine.Classification{Class: r.FailureClass, Stage: "s", Reason: "again", Signature: "s|again|"}, 20, at))
}

func TestChangeDeltas(t *testing.T) {
	created := sealedRecord(t, "cd-1", validBody, fixtureTime)
	claimed := must(t)(created.Claim("policy:p1", fixtureTime.Add(time.Minute), time.Minute))
	sent := must(t)(claimed.MarkRedriven("policy:p1", "sent-1", fixtureTime.Add(2*time.Minute)))
	hold := &quarantine.IntegrityHold{ID: created.DLQID, Version: created.Version, Reason: "seal_mismatch", At: fixtureTime.Add(90 * time.Second)}
	rewritten := created.Clone()
	rewritten.FailureClass = quarantine.ClassPoison // the same version, changed behind the store

	for _, tc := range []struct {
		name             string
		old, new         *quarantine.Record
		oldHold, newHold *quarantine.IntegrityHold
		want             []quarantine.CounterDelta
	}{
		{name: "insert", new: created, want: quarantine.CounterDeltas(nil, created)},
		{name: "a new version", old: created, new: claimed, want: quarantine.CounterDeltas(created, claimed)},
		{name: "a send", old: claimed, new: sent, want: quarantine.CounterDeltas(claimed, sent)},
		{name: "a hold added", old: created, new: created, newHold: hold, want: quarantine.HoldDeltas(created.DLQID, hold.At)},
		{name: "remove of an open record", old: created, want: []quarantine.CounterDelta{
			{CounterKey: quarantine.StateCounterKey(created.Source, quarantine.StatusQuarantined, created.FailureClass, stateShard(t, created)), N: -1},
			{CounterKey: quarantine.OpenCounterKey(created.Source, created.FailureSignature, stateShard(t, created)), N: -1},
		}},
		{name: "remove of a redriven record", old: sent, want: []quarantine.CounterDelta{
			{CounterKey: quarantine.StateCounterKey(sent.Source, quarantine.StatusRedriven, sent.FailureClass, stateShard(t, sent)), N: -1},
		}},
		{name: "identical images", old: created, new: created},
		{name: "identical held images", old: created, new: created, oldHold: hold, newHold: hold},
		{name: "the same version rewritten", old: created, new: rewritten},
		{name: "a hold removed", old: created, new: created, oldHold: hold},
		{name: "nothing", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := quarantine.ChangeDeltas(tc.old, tc.new, tc.oldHold, tc.newHold)
			if !maps.Equal(sumOf(got), sumOf(tc.want)) || len(got) != len(tc.want) {
				t.Fatalf("deltas %+v, want %+v", got, tc.want)
			}
		})
	}
}

// stateShard is the shard of r's counters, read off the deltas of its
// creation.
func stateShard(t *testing.T, r *quarantine.Record) int {
	t.Helper()
	for _, d := range quarantine.CounterDeltas(nil, r) {
		return d.Shard
	}
	t.Fatal("no deltas")
	return 0
}

// Summed over a record's whole life, the changes' deltas are what the
// writes counted in their own transactions (CounterDeltas of each Replace,
// HoldDeltas of the hold), and a deletion takes the record out of what
// the table holds.
func TestChangeDeltasOverALifeAreTheWritesCounts(t *testing.T) {
	at := fixtureTime
	tick := func() time.Time { at = at.Add(time.Hour); return at }
	v := []*quarantine.Record{sealedRecord(t, "life-1", validBody, at)}
	step := func(r *quarantine.Record, err error) { v = append(v, must(t)(r, err)) }
	last := func() *quarantine.Record { return v[len(v)-1] }
	step(last().Claim("policy:p1", tick(), time.Minute))
	step(last().MarkRedriven("policy:p1", "sent-1", tick()))
	step(last().Settle(tick(), 0))
	v = append(v, arrival(t, last(), tick())) // came back after it settled
	step(last().Claim("ops", tick(), time.Minute))
	step(last().MarkRedriven("ops", "sent-2", tick()))
	v = append(v, arrival(t, last(), tick())) // came back before it settled
	step(last().ParkPoison("ops", tick()))
	step(last().NotePayloadRead("ops", tick()))

	old := map[quarantine.CounterKey]int64{}
	sum(old, quarantine.CounterDeltas(nil, v[0]))
	changes := map[quarantine.CounterKey]int64{}
	sum(changes, quarantine.ChangeDeltas(nil, v[0], nil, nil))
	for i := 1; i < len(v); i++ {
		sum(old, quarantine.CounterDeltas(v[i-1], v[i]))
		sum(changes, quarantine.ChangeDeltas(v[i-1], v[i], nil, nil))
	}
	final := last()
	hold := &quarantine.IntegrityHold{ID: final.DLQID, Version: final.Version, Reason: "chain_mismatch", At: tick()}
	sum(old, quarantine.HoldDeltas(hold.ID, hold.At))
	sum(changes, quarantine.ChangeDeltas(final, final, nil, hold))
	if len(old) < 8 {
		t.Fatalf("the life counted only %v: the test lost its coverage", old)
	}
	if !maps.Equal(old, changes) {
		t.Fatalf("changes counted %v, the writes %v", changes, old)
	}
	shard := stateShard(t, final)
	for _, k := range []quarantine.CounterKey{
		quarantine.StateCounterKey(final.Source, quarantine.StatusParked, quarantine.ClassPoison, shard),
		quarantine.PolicyCounterKey(final.Source, "p1", quarantine.CounterPolicySent, shard),
		quarantine.PolicyCounterKey(final.Source, "p1", quarantine.CounterPolicyCameBack, shard),
		quarantine.HeldCounterKey(final.Source, shard),
	} {
		if changes[k] != 1 {
			t.Errorf("%+v = %d, want 1", k, changes[k])
		}
	}

	// Deleted, held: the record is no longer in its state counter; what
	// happened (arrivals, holds set) stays counted.
	sum(changes, quarantine.ChangeDeltas(final, nil, hold, nil))
	if n := changes[quarantine.StateCounterKey(final.Source, quarantine.StatusParked, quarantine.ClassPoison, shard)]; n != 0 {
		t.Fatalf("state after the delete = %d", n)
	}
	if n := changes[quarantine.HeldCounterKey(final.Source, shard)]; n != 1 {
		t.Fatalf("held after the delete = %d", n)
	}
}
