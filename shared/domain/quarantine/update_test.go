package quarantine_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// countingStore counts the reads and writes Update makes.
type countingStore struct {
	*memstore.Store
	gets, replaces int
}

func (c *countingStore) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	c.gets++
	return c.Store.Get(ctx, id)
}

func (c *countingStore) Replace(ctx context.Context, prev, next *quarantine.Record) error {
	c.replaces++
	return c.Store.Replace(ctx, prev, next)
}

// created stores the fixture's record of key in s.
func created(t *testing.T, s *memstore.Store, key string) *quarantine.Record {
	t.Helper()
	r := sealedRecord(t, key, validBody, fixtureTime)
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func park(at time.Time) func(*quarantine.Record) (*quarantine.Record, error) {
	return func(cur *quarantine.Record) (*quarantine.Record, error) { return cur.ParkManual("op", "hold it", at) }
}

// UpdateFrom writes from the version the caller holds without reading it
// again, and reads again only when another writer got there first.
func TestUpdateFromReadsOnlyOnAConflict(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: memstore.New()}
	r := created(t, s.Store, "k1")
	got, err := quarantine.UpdateFrom(ctx, s, r, park(fixtureTime.Add(time.Second)))
	if err != nil || got.Status != quarantine.StatusParked {
		t.Fatalf("UpdateFrom = %v, %v", got, err)
	}
	if s.gets != 0 || s.replaces != 1 {
		t.Fatalf("%d reads and %d writes for an unchanged record, want 0 and 1", s.gets, s.replaces)
	}

	other := created(t, s.Store, "k2")
	held := other // the caller's copy, about to go stale
	moved, err := other.ParkManual("another run", "first", fixtureTime.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Replace(ctx, other, moved); err != nil {
		t.Fatal(err)
	}
	s.gets, s.replaces = 0, 0
	calls := 0
	got, err = quarantine.UpdateFrom(ctx, s, held, func(cur *quarantine.Record) (*quarantine.Record, error) {
		calls++
		return cur.NotePayloadRead("auditor", fixtureTime.Add(2*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || s.gets != 1 || s.replaces != 2 {
		t.Fatalf("a stale copy: %d calls, %d reads, %d writes; want 2, 1 and 2 (conflict, read, write)", calls, s.gets, s.replaces)
	}
	if got.Version != moved.Version+1 || got.Status != quarantine.StatusParked {
		t.Fatalf("written v%d %s, want v%d PARKED: the other writer's version kept", got.Version, got.Status, moved.Version+1)
	}
}

// appliedButRefused applies the first Replace and then answers it with a
// conflict: the write's answer was lost and the store's read-back failed.
type appliedButRefused struct {
	*memstore.Store
	done bool
}

func (a *appliedButRefused) Replace(ctx context.Context, prev, next *quarantine.Record) error {
	if err := a.Store.Replace(ctx, prev, next); err != nil || a.done {
		return err
	}
	a.done = true
	return quarantine.ErrVersionConflict
}

// A write that was applied although it came back refused is recognised on
// the re-read: the change is not applied a second time.
func TestUpdateRecognisesARefusedWriteThatWasApplied(t *testing.T) {
	ctx := context.Background()
	s := &appliedButRefused{Store: memstore.New()}
	r := created(t, s.Store, "k1")
	calls := 0
	got, err := quarantine.UpdateFrom(ctx, s, r, func(cur *quarantine.Record) (*quarantine.Record, error) {
		calls++
		return cur.NotePayloadRead("auditor", fixtureTime.Add(time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := s.Get(ctx, r.DLQID)
	if calls != 1 || stored.Version != r.Version+1 || !quarantine.SameVersion(stored, got) || stored.ReadCount != 1 {
		t.Fatalf("%d calls, stored v%d with %d reads (returned v%d); want the one write, v%d, 1 read", calls, stored.Version, stored.ReadCount, got.Version, r.Version+1)
	}
}
