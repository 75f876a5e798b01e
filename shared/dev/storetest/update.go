package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// recordIn is Record in a source of its own, so that its counters are
// its alone.
func recordIn(t testing.TB, source string) *quarantine.Record {
	t.Helper()
	return editedIn(t, source, "u", nil)
}

// editedIn is recordIn with an id prefix and an edit.
func editedIn(t testing.TB, source, prefix string, edit func(*quarantine.Record)) *quarantine.Record {
	t.Helper()
	r := Record(t, UniqueID(prefix))
	r.Source, r.DLQID = source, source+"#"+r.IdempotencyKey
	if edit != nil {
		edit(r)
	}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sameVersion reports whether a and b are the same version of one record.
func sameVersion(a, b *quarantine.Record) bool {
	return a != nil && b != nil && a.DLQID == b.DLQID && a.Version == b.Version && a.Seal == b.Seal
}

// RunUpdate runs the contract of Store.Update against s, and of the
// counters of a replace whose answer was lost (cr reads s's counters).
func RunUpdate(t *testing.T, s quarantine.Store, cr CounterReader) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	create := func(t *testing.T) *quarantine.Record {
		t.Helper()
		r := recordIn(t, UniqueID("usrc"))
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	read := func(actor string) func(cur *quarantine.Record) (*quarantine.Record, error) {
		return func(cur *quarantine.Record) (*quarantine.Record, error) { return cur.NotePayloadRead(actor, now) }
	}
	get := func(t *testing.T, id string) *quarantine.Record {
		t.Helper()
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("update writes what fn computes", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		next, err := s.Update(ctx, r.DLQID, func(cur *quarantine.Record) (*quarantine.Record, error) {
			return cur.Claim("alice", now, time.Minute)
		})
		if err != nil {
			t.Fatal(err)
		}
		got := get(t, r.DLQID)
		if !sameVersion(got, next) || got.Status != quarantine.StatusRedriving {
			t.Fatalf("stored %s v%d, want the version Update returned (v%d)", got.Status, got.Version, next.Version)
		}
		if err := quarantine.VerifyChain(r, got); err != nil {
			t.Fatal(err)
		}
		src := r.Source
		if q, c := StateCount(t, cr, src, quarantine.StatusQuarantined, r.FailureClass), StateCount(t, cr, src, quarantine.StatusRedriving, r.FailureClass); q != 0 || c != 1 {
			t.Fatalf("state counters quarantined=%d redriving=%d, want 0 and 1", q, c)
		}
	})

	t.Run("a conflict is retried with the fresh record", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		var seen []*quarantine.Record
		var other *quarantine.Record
		next, err := s.Update(ctx, r.DLQID, func(cur *quarantine.Record) (*quarantine.Record, error) {
			seen = append(seen, cur)
			if len(seen) == 1 {
				// Another writer changes the record between this read and its write.
				o, err := cur.NotePayloadRead("bob", now)
				if err != nil {
					return nil, err
				}
				if err := s.Replace(ctx, cur, o); err != nil {
					return nil, err
				}
				other = o
			}
			return cur.NotePayloadRead("alice", now.Add(time.Second))
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2 || !sameVersion(seen[1], other) {
			t.Fatalf("fn ran %d times; want twice, the second time with the other writer's version", len(seen))
		}
		got := get(t, r.DLQID)
		if !sameVersion(got, next) || got.Version != r.Version+2 || len(got.Reads) != 2 {
			t.Fatalf("stored v%d with %d reads, want v%d with both reads", got.Version, len(got.Reads), r.Version+2)
		}
		if err := quarantine.VerifyChain(other, got); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("concurrent updates all land", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		const writers = 4
		errs := make(chan error, writers)
		for range writers {
			go func() {
				_, err := s.Update(ctx, r.DLQID, read("w"))
				errs <- err
			}()
		}
		for range writers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := get(t, r.DLQID); got.Version != r.Version+writers || len(got.Reads) != writers {
			t.Fatalf("stored v%d with %d reads, want v%d with %d", got.Version, len(got.Reads), r.Version+writers, writers)
		}
	})

	t.Run("fn's error or no change makes no write", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		boom := errors.New("boom")
		calls := 0
		if _, err := s.Update(ctx, r.DLQID, func(*quarantine.Record) (*quarantine.Record, error) { calls++; return nil, boom }); !errors.Is(err, boom) || calls != 1 {
			t.Fatalf("update = %v after %d calls, want fn's error after one", err, calls)
		}
		cur, err := s.Update(ctx, r.DLQID, func(*quarantine.Record) (*quarantine.Record, error) { return nil, nil })
		if err != nil || !sameVersion(cur, r) {
			t.Fatalf("update without a change = %v, %v; want the record as read", cur, err)
		}
		if got := get(t, r.DLQID); !sameVersion(got, r) {
			t.Fatalf("stored v%d, want v%d untouched", got.Version, r.Version)
		}
	})

	t.Run("a held record is ErrHeld, not retried", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		if err := s.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: "seal_mismatch", At: now}); err != nil {
			t.Fatal(err)
		}
		calls := 0
		_, err := s.Update(ctx, r.DLQID, func(cur *quarantine.Record) (*quarantine.Record, error) {
			calls++
			return cur.NotePayloadRead("alice", now)
		})
		if !errors.Is(err, quarantine.ErrHeld) || calls != 1 {
			t.Fatalf("update of a held record = %v after %d calls, want ErrHeld after one", err, calls)
		}
		if got := get(t, r.DLQID); !sameVersion(got, r) {
			t.Fatalf("held record overwritten: v%d", got.Version)
		}
	})

	t.Run("a missing record is ErrNotFound", func(t *testing.T) {
		t.Parallel()
		calls := 0
		_, err := s.Update(ctx, "src#"+UniqueID("gone"), func(cur *quarantine.Record) (*quarantine.Record, error) { calls++; return cur, nil })
		if !errors.Is(err, quarantine.ErrNotFound) || calls != 0 {
			t.Fatalf("update of a missing record = %v after %d calls, want ErrNotFound before any", err, calls)
		}
	})

	t.Run("a conflict that persists is ErrVersionConflict after the bound", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		calls := 0
		_, err := s.Update(ctx, r.DLQID, func(cur *quarantine.Record) (*quarantine.Record, error) {
			calls++
			o, err := cur.NotePayloadRead("bob", now) // another writer, every time
			if err != nil {
				return nil, err
			}
			if err := s.Replace(ctx, cur, o); err != nil {
				return nil, err
			}
			return cur.NotePayloadRead("alice", now)
		})
		if !errors.Is(err, quarantine.ErrVersionConflict) || calls != quarantine.UpdateTries {
			t.Fatalf("update = %v after %d calls, want ErrVersionConflict after %d", err, calls, quarantine.UpdateTries)
		}
		if got := get(t, r.DLQID); got.Version != r.Version+quarantine.UpdateTries {
			t.Fatalf("stored v%d, want only the other writer's %d versions", got.Version, quarantine.UpdateTries)
		}
	})

	t.Run("a replace of another record's version is refused", func(t *testing.T) {
		t.Parallel()
		r, other := create(t), create(t)
		next, err := r.Claim("alice", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Replace(ctx, other, next); err == nil {
			t.Fatal("replace with a prev of another record succeeded")
		}
		if err := s.Replace(ctx, nil, next); err == nil {
			t.Fatal("replace without prev succeeded")
		}
		if got := get(t, r.DLQID); !sameVersion(got, r) {
			t.Fatalf("stored v%d, want v%d untouched", got.Version, r.Version)
		}
	})

	t.Run("a replace whose answer was lost counts once", func(t *testing.T) {
		t.Parallel()
		r := create(t)
		next, err := r.Claim("alice", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// The retry of a replace whose first try was applied: the store
		// recognizes its own write (quarantine.SameVersion) and applies nothing again.
		for range 2 {
			if err := s.Replace(ctx, r, next); err != nil {
				t.Fatal(err)
			}
		}
		src, c := r.Source, r.FailureClass
		if q, rd := StateCount(t, cr, src, quarantine.StatusQuarantined, c), StateCount(t, cr, src, quarantine.StatusRedriving, c); q != 0 || rd != 1 {
			t.Fatalf("state counters quarantined=%d redriving=%d after the replayed replace, want 0 and 1", q, rd)
		}
	})
}
