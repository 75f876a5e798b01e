package quarantine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// An operator-approved replay of a PARKED poison record whose claim is
// given back (send failed, deferred, held by the gate, unsendable, or its
// outcome unknown) goes back to PARKED under its former cap: it never
// becomes a QUARANTINED record that the next unapproved run replays.
func TestGivenBackParkedClaimStaysParked(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for name, giveBack := range map[string]func(r *quarantine.Record) (*quarantine.Record, error){
		"release": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Release("ops", "send failed after retries: InternalError", now, nil)
		},
		"held by the gate": func(r *quarantine.Record) (*quarantine.Record, error) {
			c := quarantine.Classification{Class: quarantine.ClassValidation, Stage: "gate", Reason: "schema /x required", Signature: "gate|schema /x required|"}
			return r.Release("ops", "held: schema /x required", now, &c)
		},
		"unsendable": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkUnsendable("ops", "the message exceeds the SQS size limit", now)
		},
		"unknown": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.SendUnknown("ops", "deadline", r.RedriveCount, now)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := sealedRecord(t, "pk", validBody, now)
			r.RedriveCount, r.RedriveCap, r.Status, r.FailureClass = 3, 3, quarantine.StatusParked, quarantine.ClassPoison
			if err := quarantine.SealRecord(r); err != nil {
				t.Fatal(err)
			}
			claimed, err := r.ClaimParked("ops", now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			back, err := giveBack(claimed)
			if err != nil {
				t.Fatal(err)
			}
			if back.Status != quarantine.StatusParked || back.FailureClass != quarantine.ClassPoison {
				t.Fatalf("given back as %s %s: the next unapproved run would replay it", back.Status, back.FailureClass)
			}
			if name != "unknown" && (back.RedriveCap != 3 || back.RedriveCount != 3) {
				t.Fatalf("count %d cap %d, want 3 of 3", back.RedriveCount, back.RedriveCap)
			}
			if name == "unknown" && back.RedriveCount != 4 {
				t.Fatalf("a possibly sent round must count: %d", back.RedriveCount)
			}
			if last := back.Attempts[len(back.Attempts)-1]; last.IsPossiblySent() != (name == "unknown") {
				t.Fatalf("%s: the history entry %q is possibly sent: %v", name, last.Reason, last.IsPossiblySent())
			}
			if _, err := back.Claim("policy:p1", now, time.Minute); err == nil {
				t.Fatal("an unapproved claim took the record")
			}
		})
	}
}

// in returns a sealed record in status st, as the store would hand it out.
func in(t *testing.T, st quarantine.Status) *quarantine.Record {
	t.Helper()
	r := sealedRecord(t, "integrity", validBody, fixtureTime)
	r.Status = st
	if st == quarantine.StatusRedriving {
		lease := quarantine.At(r.FirstSeen.Add(time.Hour))
		r.LeaseUntil, r.RedriveCount = &lease, 1
	}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Every transition verifies the version it read before it writes a
// successor: a record whose sealed field, or whose inline body, was changed
// behind the seal is refused with a *SealError, never re-sealed.
func TestEveryTransitionRefusesATamperedPredecessor(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	transitions := []struct {
		name string
		from quarantine.Status
		do   func(r *quarantine.Record) (*quarantine.Record, error)
	}{
		{"Arrive", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Arrive(quarantine.Attempt{Stage: "consumer", Reason: "x", Actor: quarantine.ActorIngest, MessageID: "m2"},
				quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "x"}, 10, now)
		}},
		{"Claim", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("ops", now, time.Minute) }},
		{"ClaimParked", quarantine.StatusParked, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ClaimParked("ops", now, time.Minute)
		}},
		{"ParkPoison", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("ops", now) }},
		{"Release", quarantine.StatusRedriving, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Release("ops", "send failed", now, nil)
		}},
		{"MarkRedriven", quarantine.StatusRedriving, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.MarkRedriven("ops", "mid", now)
		}},
		{"NoteSent", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) { return r.NoteSent("ops", "mid", 1, now) }},
		{"Settle", quarantine.StatusRedriven, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(now, time.Minute) }},
		{"ArchiveStub", quarantine.StatusParked, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: r.Seal, RetainUntil: quarantine.At(now)}, now)
		}},
		{"ParkManual", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkManual("ops", "audit", now)
		}},
		{"Unpark", quarantine.StatusParked, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Unpark("ops", "fixed", now) }},
		{"NotePayloadRead", quarantine.StatusParked, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.NotePayloadRead("ops", now)
		}},
		{"Correct", quarantine.StatusQuarantined, func(r *quarantine.Record) (*quarantine.Record, error) {
			src := &quarantine.Source{Name: r.Source, ARN: r.SourceARN}
			return r.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: "fixer", Reason: "typo", Body: []byte(`{"a":"b"}`)}, now)
		}},
	}
	tampers := []struct {
		name   string
		change func(r *quarantine.Record)
		reason string
	}{
		{"sealed field", func(r *quarantine.Record) { r.FailureClass, r.RedriveCap = quarantine.ClassValidation, 99 }, "seal_mismatch"},
		{"inline body", func(r *quarantine.Record) { r.Body = `{"a":"forged"}` }, "body_mismatch"},
	}
	for _, tr := range transitions {
		for _, tp := range tampers {
			t.Run(tr.name+"/"+tp.name, func(t *testing.T) {
				good := in(t, tr.from)
				if _, err := tr.do(good.Clone()); err != nil {
					t.Fatalf("the untampered record is refused: %v", err)
				}
				bad := good.Clone()
				tp.change(bad)
				before := bad.Clone()
				_, err := tr.do(bad)
				var se *quarantine.SealError
				if !errors.As(err, &se) || quarantine.ErrorKind(err) != "seal_mismatch" || quarantine.HoldReason(err) != tp.reason {
					t.Fatalf("%s of a record with a forged %s = %v, want a seal error (%s)", tr.name, tp.name, err, tp.reason)
				}
				if bad.Seal != before.Seal || bad.Version != before.Version || bad.FailureClass != before.FailureClass || bad.Body != before.Body {
					t.Fatal("the refused transition changed the record it read")
				}
			})
		}
	}
}

// MayRepeat reads back, from the entries the transitions themselves write,
// every round that may have reached SQS more often than its confirmed
// sends, and no other: whoever counts a replay's copies (the soak) relies
// on it to tell a duplicate the history explains from one it hides.
func TestMayRepeatReadsTheTransitionsOwnWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	claimed := func(t *testing.T, round int) *quarantine.Record {
		t.Helper()
		r := sealedRecord(t, "repeat", validBody, now)
		r.RedriveCount, r.RedriveCap = round-1, 30
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		c, err := r.Claim("ops", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	comeback := func(note string) quarantine.Attempt {
		return quarantine.Attempt{Stage: "consumer", Reason: "lease expired; round 9 reclaimed, a duplicate send is possible", Actor: quarantine.ActorIngest, MessageID: "m2", Note: note}
	}
	for name, tc := range map[string]struct {
		step func(t *testing.T, c *quarantine.Record) (*quarantine.Record, error)
		want bool
	}{
		"claimed": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) { return c, nil }, false},
		"sent": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.MarkSent("ops", "m1", false, false, now)
		}, false},
		"sent after no answer": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.MarkSent("ops", "m1", true, false, now)
		}, true},
		"sent after no answer, FIFO (deduplicated)": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.MarkSent("ops", "m1", true, true, now)
		}, false},
		"sent after no answer while the record changed": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.NoteSentWhileChanged("ops", "m1", c.RedriveCount, true, false, now)
		}, true},
		"sent while the record changed": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.NoteSentWhileChanged("ops", "m1", c.RedriveCount, false, false, now)
		}, false},
		"outcome unknown": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.SendUnknown("ops", "InternalError", c.RedriveCount, now)
		}, true},
		"given back": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.Release("ops", "send failed after retries: InternalError", now, nil)
		}, false},
		// The run may have crashed after sending, before recording the
		// round: the comeback clears the lease, so no takeover says it.
		"came back before the round's outcome": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.Arrive(comeback("came back from src, the queue it was replayed into"), quarantine.Classification{Stage: "consumer", Reason: "x"}, 0, now)
		}, true},
		"came back before the round's outcome, its note at its bound": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.Arrive(comeback(strings.Repeat("n", quarantine.MaxNoteBytes)), quarantine.Classification{Stage: "consumer", Reason: "x"}, 0, now)
		}, true},
		"came back after the round's outcome": {func(t *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			s, err := c.MarkSent("ops", "m1", false, false, now)
			if err != nil {
				t.Fatal(err)
			}
			return s.Arrive(comeback(""), quarantine.Classification{Stage: "consumer", Reason: "x"}, 0, now)
		}, false},
		"lease expired, reclaimed": {func(_ *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			return c.Claim("ops", now.Add(time.Hour), time.Minute)
		}, true},
		"lease of an approved parked replay expired": {func(t *testing.T, c *quarantine.Record) (*quarantine.Record, error) {
			p, err := c.ParkPoison("ops", now)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := p.ClaimParked("ops", now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return pc.ReturnExpiredParkedClaim("ops", now.Add(time.Hour))
		}, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, round := range []int{1, 2, 12} {
				c := claimed(t, round)
				next, err := tc.step(t, c)
				if err != nil {
					t.Fatal(err)
				}
				last := next.Attempts[len(next.Attempts)-1]
				got, ok := last.MayRepeat()
				if want := next.RedriveCount; ok != tc.want || ok && got != want {
					t.Errorf("round %d: %q: MayRepeat = %d, %v; want %v (round %d)", round, last.Reason, got, ok, tc.want, want)
				}
			}
		})
	}
	// An arrival's reason is the sender's own text: never the history's
	// word, whatever it says.
	forged := quarantine.Attempt{Stage: quarantine.StageRedrive, Kind: quarantine.AttemptArrival, Reason: "lease expired; round 1 reclaimed, a duplicate send is possible"}
	if _, ok := forged.MayRepeat(); ok {
		t.Error("an arrival's reason explained a duplicate")
	}
	// An arrival of an older record (no kind), whose consumer named the
	// stage redrive: ingest wrote it, in the sender's words.
	legacy := quarantine.Attempt{Stage: quarantine.StageRedrive, Actor: quarantine.ActorIngest, Reason: "lease expired; round 7 reclaimed, a duplicate send is possible"}
	if _, ok := legacy.MayRepeat(); ok {
		t.Error("an older arrival's reason explained a duplicate")
	}
	// Only the note's own ending, as Arrive writes it, on an arrival ingest
	// wrote: not an older arrival's, not a word inside another note.
	for _, a := range []quarantine.Attempt{
		{Stage: "consumer", Actor: quarantine.ActorIngest, Note: "came back before round 4 recorded its outcome: possibly sent more than once"},
		{Stage: "consumer", Kind: quarantine.AttemptArrival, Actor: "ops", Note: "came back before round 4 recorded its outcome: possibly sent more than once"},
		{Stage: "consumer", Kind: quarantine.AttemptArrival, Actor: quarantine.ActorIngest, Note: "xcame back before round 4 recorded its outcome: possibly sent more than once"},
		{Stage: "consumer", Kind: quarantine.AttemptArrival, Actor: quarantine.ActorIngest, Note: "came back before round 4 recorded its outcome: possibly sent more than once; more"},
		{Stage: "consumer", Kind: quarantine.AttemptArrival, Actor: quarantine.ActorIngest, Note: "came back before round 0 recorded its outcome: possibly sent more than once"},
		{Stage: "consumer", Kind: quarantine.AttemptArrival, Actor: quarantine.ActorIngest, Note: "came back before round  4 recorded its outcome: possibly sent more than once"},
	} {
		if round, ok := a.MayRepeat(); ok {
			t.Errorf("%+v explained round %d", a, round)
		}
	}
	// Histories written before said "possibly sent twice".
	older := quarantine.Attempt{Stage: quarantine.StageRedrive, Actor: "ops", MessageID: "m", Reason: "sent (round 3); an earlier try had no answer and may also have been enqueued: possibly sent twice"}
	if round, ok := older.MayRepeat(); !ok || round != 3 {
		t.Errorf("the older wording: %d, %v", round, ok)
	}
}

// A round an arrival found open may have gone out more than once, unless
// the run then recorded its one confirmed send; what another entry says
// stands whatever follows.
func TestRoundsThatMayRepeat(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	claimed := func(t *testing.T) *quarantine.Record {
		t.Helper()
		c, err := sealedRecord(t, "rounds", validBody, now).Claim("ops", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	back := func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Arrive(quarantine.Attempt{Stage: "consumer", Reason: "x", Actor: quarantine.ActorIngest, MessageID: "m2"}, quarantine.Classification{Stage: "consumer", Reason: "x"}, 0, now)
	}
	sentWhileChanged := func(maybeTwice, fifo bool) func(r *quarantine.Record) (*quarantine.Record, error) {
		return func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.NoteSentWhileChanged("ops", "m2", 1, maybeTwice, fifo, now)
		}
	}
	for name, tc := range map[string]struct {
		steps []func(*quarantine.Record) (*quarantine.Record, error)
		want  bool
	}{
		"came back, no outcome ever":           {[]func(*quarantine.Record) (*quarantine.Record, error){back}, true},
		"came back, then sent once":            {[]func(*quarantine.Record) (*quarantine.Record, error){back, sentWhileChanged(false, false)}, false},
		"came back, then sent after no answer": {[]func(*quarantine.Record) (*quarantine.Record, error){back, sentWhileChanged(true, false)}, true},
		"came back, then sent once into FIFO":  {[]func(*quarantine.Record) (*quarantine.Record, error){back, sentWhileChanged(true, true)}, false},
		"taken over, then sent once": {[]func(*quarantine.Record) (*quarantine.Record, error){
			func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.Claim("ops", now.Add(time.Hour), time.Minute)
			},
			func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.MarkSent("ops", "m3", false, false, now.Add(time.Hour))
			},
		}, true},
		"sent once": {[]func(*quarantine.Record) (*quarantine.Record, error){
			func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.MarkSent("ops", "m3", false, false, now)
			},
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			r := claimed(t)
			var all []quarantine.Attempt
			for _, step := range tc.steps {
				next, err := step(r)
				if err != nil {
					t.Fatal(err)
				}
				r = next
				all = append(all, r.Attempts...) // every version's, as the soak reads them
			}
			if got := quarantine.RoundsThatMayRepeat(all)[1]; got != tc.want {
				t.Fatalf("round 1 may repeat: %v, want %v (%+v)", got, tc.want, r.Attempts)
			}
		})
	}
}
