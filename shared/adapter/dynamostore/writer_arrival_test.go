package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// The ingest key proves arrivals only: a version it proves after another
// must be what Record.Arrive could make of it. Un-parking a poison record
// "by an arrival" is named; real comebacks are not.
func TestLedgerWriterCheckIngestOnlyArrives(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := newWriters()
	check := dynamostore.LedgerWriterCheck(context.Background(), w.keys, w.fake.Verify)
	offline := dynamostore.LedgerWriterCheck(context.Background(), w.keys, nil)
	v1, claimed := claimedPair(t, now, `{"a":1}`)
	redriven, err := claimed.MarkRedriven("ops", "sqs-1", now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := v1.ParkManual("someone", "poison", now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Minute)
	arrive := func(r *quarantine.Record, max int) *quarantine.Record {
		t.Helper()
		n, err := r.Arrive(quarantine.Attempt{At: quarantine.At(at), Stage: "consumer", Reason: "again", Actor: quarantine.ActorIngest, MessageID: "m2"},
			quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "again"}, max, at)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := arrive(parked, 0).Status; got != quarantine.StatusParked {
		t.Fatalf("a parked record arriving is %s", got)
	}
	// The forgery: the parked record's next version QUARANTINED, with one
	// arrival and attempt_count + 1, resealed and proved by the ingest key.
	forged := parked.Clone()
	forged.Status, forged.StatusSince = quarantine.StatusQuarantined, quarantine.At(at)
	forged.Attempts = append(forged.Attempts, quarantine.Attempt{At: quarantine.At(at), Stage: "consumer", Reason: "again", Actor: quarantine.ActorIngest, MessageID: "m2", Kind: quarantine.AttemptArrival})
	forged.AttemptCount++
	forged.LastSeen = quarantine.At(at)
	forged.Version, forged.PrevSeal = parked.Version+1, parked.Seal
	if err := quarantine.SealRecord(forged); err != nil {
		t.Fatal(err)
	}
	if err := quarantine.CheckTransition(parked, forged); err != nil {
		t.Fatalf("the forgery must pass the transition check for this test to mean anything: %v", err)
	}
	// An arrival that also raises the cap.
	capped := arrive(v1, 0)
	capped.RedriveCap += 5
	if err := quarantine.SealRecord(capped); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		prev, next *quarantine.Record
		want       ledger.Kind
	}{
		{"a QUARANTINED record comes back", v1, arrive(v1, 0), ""},
		{"a REDRIVING record comes back", claimed, arrive(claimed, 0), ""},
		{"a REDRIVEN record comes back", redriven, arrive(redriven, 0), ""},
		{"a PARKED record comes back", parked, arrive(parked, 0), ""},
		{"a comeback at the history's bound", redriven, arrive(redriven, 2), ""},
		{"a parked record un-parked by an arrival", parked, forged, ledger.KindWriterRole},
		{"an arrival that raises the cap", v1, capped, ledger.KindWriterRole},
	} {
		prev, next := ledgerItemOf(t, c.prev), w.proved(t, writerproof.RoleIngest, c.next)
		if got := writerKind(check(prev, next)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		// Offline the MAC is not checked, but the role and the arrival are.
		if got := writerKind(offline(prev, next)); c.want != "" && got != c.want {
			t.Errorf("%s offline: %q, want %q", c.name, got, c.want)
		}
	}
}
