package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Tamper changes a stored record's item directly, behind the store: no
// seal, no version bump, no counters (someone with write access to the
// table).
type Tamper func(t *testing.T, id string, change func(*quarantine.Record))

// HeldCount sums a source's integrity-hold counter over its shards.
func HeldCount(t testing.TB, cr CounterReader, source string) int64 {
	t.Helper()
	return sumShards(t, cr, func(shard int) quarantine.CounterKey { return quarantine.HeldCounterKey(source, shard) })
}

// RunHold runs the integrity-hold contract: a tampered record is held at
// the version found, exactly as found, counted once, left out of listings
// (but listed with Held), and never overwritten.
func RunHold(t *testing.T, s quarantine.Store, l quarantine.Lister, cr CounterReader, tamper Tamper) {
	ctx := context.Background()
	source := UniqueID("hsrc")
	base := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 3 {
		r := editedIn(t, source, "h", func(r *quarantine.Record) { r.FirstSeen = quarantine.At(base.Add(time.Duration(i) * time.Second)) })
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.DLQID)
	}
	forged := ids[0]
	tamper(t, forged, func(r *quarantine.Record) { r.FailureClass, r.RedriveCount = quarantine.ClassValidation, 0 })
	found, err := s.Get(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(found); quarantine.HoldReason(err) != "seal_mismatch" {
		t.Fatalf("tampered record verifies: %v", err)
	}
	if _, err := found.Claim("ops", base, time.Minute); !quarantine.IsIntegrityFailure(err) {
		t.Fatalf("claim of a tampered record = %v, want a seal error", err)
	}

	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: ids[1], Version: found.Version + 7, Reason: "seal_mismatch", At: base}); !errors.Is(err, quarantine.ErrVersionConflict) {
		t.Fatalf("hold of another version = %v", err)
	}
	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: source + "#nope", Version: 1, Reason: "seal_mismatch", At: base}); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatalf("hold of a missing record = %v", err)
	}
	for range 2 { // the second is a no-op
		if err := s.Hold(ctx, quarantine.IntegrityHold{ID: forged, Version: found.Version, Reason: quarantine.HoldReason(quarantine.Verify(found)), At: base}); err != nil {
			t.Fatalf("hold: %v", err)
		}
	}
	if n := HeldCount(t, cr, source); n != 1 {
		t.Fatalf("held counter = %d, want 1", n)
	}
	after, err := s.Get(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if after.Seal != found.Seal || after.Version != found.Version || after.FailureClass != quarantine.ClassValidation || quarantine.Verify(after) == nil {
		t.Fatalf("the hold changed the evidence: %+v", after)
	}

	if got := listIDs(t, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Limit: 1}); !slices.Equal(got, ids[1:]) {
		t.Fatalf("listing = %v, want %v (the held record left out)", got, ids[1:])
	}
	if got := listIDs(t, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Held: true}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("held listing = %v, want %v", got, ids[:1])
	}

	// Even a correctly sealed successor never overwrites a held record.
	succ := after.Clone()
	succ.Version, succ.PrevSeal, succ.Status = after.Version+1, after.Seal, quarantine.StatusParked
	if err := quarantine.SealRecord(succ); err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, after, succ); !errors.Is(err, quarantine.ErrHeld) {
		t.Fatalf("replace of a held record = %v, want ErrHeld", err)
	}
	if again, _ := s.Get(ctx, forged); again.Seal != found.Seal || again.Status != quarantine.StatusQuarantined {
		t.Fatalf("held record overwritten: %+v", again)
	}
	if n := HeldCount(t, cr, source); n != 1 {
		t.Fatalf("held counter = %d after the refused write, want 1", n)
	}
}
