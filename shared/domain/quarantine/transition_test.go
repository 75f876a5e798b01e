package quarantine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

var transNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// mustT returns r, failing t on err.
func mustT(t *testing.T) func(r *quarantine.Record, err error) *quarantine.Record {
	return func(r *quarantine.Record, err error) *quarantine.Record {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func reArrive(r *quarantine.Record, max int, at time.Time) (*quarantine.Record, error) {
	return r.Arrive(quarantine.Attempt{At: quarantine.At(at), Stage: "consumer", Reason: "again", Actor: quarantine.ActorIngest, MessageID: "m-" + at.String()},
		quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "again"}, max, at)
}

// realTransitions are the pairs (prev, next) that every transition
// function produces; CheckTransition accepts each.
func realTransitions(t *testing.T) map[string][2]*quarantine.Record {
	now := transNow
	pairs := map[string][2]*quarantine.Record{}
	add := func(name string, prev *quarantine.Record, do func(r *quarantine.Record) (*quarantine.Record, error)) *quarantine.Record {
		t.Helper()
		next := mustT(t)(do(prev.Clone()))
		pairs[name] = [2]*quarantine.Record{prev, next}
		return next
	}
	q := in(t, quarantine.StatusQuarantined)
	add("Arrive", q, func(r *quarantine.Record) (*quarantine.Record, error) { return reArrive(r, 10, now) })
	claimed := add("Claim", q, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("ops", now, time.Minute) })
	add("Claim/reclaim", claimed, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Claim("ops", now.Add(time.Hour), time.Minute)
	})
	add("Release", claimed, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Release("ops", "send failed", now, nil)
	})
	add("ParkUnsendable", claimed, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkUnsendable("ops", "too big", now) })
	add("SendUnknown", claimed, func(r *quarantine.Record) (*quarantine.Record, error) { return r.SendUnknown("ops", "timeout", 1, now) })
	add("NoteSentWhileChanged", q, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.NoteSentWhileChanged("ops", "mid", 1, true, false, now)
	})
	add("Arrive/before the round's outcome", claimed, func(r *quarantine.Record) (*quarantine.Record, error) { return reArrive(r, 10, now) })
	add("ParkPoison", claimed, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("ops", now) })
	sent := add("MarkRedriven", claimed, func(r *quarantine.Record) (*quarantine.Record, error) { return r.MarkRedriven("ops", "mid", now) })
	add("Arrive/after a replay", sent, func(r *quarantine.Record) (*quarantine.Record, error) { return reArrive(r, 10, now) })
	resolved := add("Settle", sent, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Settle(now.Add(time.Hour), time.Minute)
	})
	add("ArchiveStub/resolved", resolved, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: r.Seal, RetainUntil: quarantine.At(now)}, now)
	})
	parked := add("ParkManual", q, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkManual("ops", "audit", now) })
	add("Unpark", parked, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Unpark("ops", "fixed", now) })
	add("Arrive/parked", parked, func(r *quarantine.Record) (*quarantine.Record, error) { return reArrive(r, 10, now) })
	add("NotePayloadRead", parked, func(r *quarantine.Record) (*quarantine.Record, error) { return r.NotePayloadRead("ops", now) })
	pc := add("ClaimParked", parked, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ClaimParked("ops", now, time.Minute) })
	add("ReturnExpiredParkedClaim", pc, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ReturnExpiredParkedClaim("ops", now.Add(time.Hour))
	})
	add("MarkSent", pc, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkSent("ops", "mid", true, true, now)
	})
	add("ArchiveStub/parked", parked, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: r.Seal, RetainUntil: quarantine.At(now)}, now)
	})
	corrected := add("Correct", q, func(r *quarantine.Record) (*quarantine.Record, error) {
		src := &quarantine.Source{Name: r.Source, ARN: r.SourceARN}
		return r.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: "fixer", Reason: "typo", Body: []byte(`{"a":"b"}`)}, now)
	})
	cp := add("ParkManual/corrected", corrected, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkManual("ops", "x", now) })
	add("ArchiveStub/corrected", cp, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: r.Seal, RetainUntil: quarantine.At(now)}, now)
	})
	// The bounded window shifts: many arrivals with a small bound keep the
	// first arrival and the newest; the total still grows.
	r := q
	for i := range 6 {
		prev := r
		r = add("Arrive/window "+string(rune('0'+i)), prev, func(r *quarantine.Record) (*quarantine.Record, error) {
			return reArrive(r, 3, now.Add(time.Duration(i)*time.Minute))
		})
	}
	for i := range 25 {
		prev := r
		r = mustT(t)(prev.Clone().NotePayloadRead("ops", now.Add(time.Duration(i)*time.Second)))
		pairs["NotePayloadRead/window"] = [2]*quarantine.Record{prev, r}
	}
	return pairs
}

func TestCheckTransitionAcceptsEveryRealTransition(t *testing.T) {
	for name, p := range realTransitions(t) {
		if err := quarantine.CheckTransition(p[0], p[1]); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := quarantine.CheckTransition(nil, in(t, quarantine.StatusQuarantined)); err != nil {
		t.Errorf("a first version: %v", err)
	}
}

func TestCheckTransitionRejectsForgedChanges(t *testing.T) {
	reseal := func(t *testing.T, r *quarantine.Record) {
		t.Helper()
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	pairs := realTransitions(t)
	cases := []struct {
		name, pair string
		forge      func(prev, next *quarantine.Record)
		want       string
	}{
		{"payload changed and re-sealed", "Arrive", func(_, n *quarantine.Record) {
			n.Body = `{"forged":true}`
			n.BodySHA256, n.BodySize = quarantine.BodySHA256([]byte(n.Body)), int64(len(n.Body))
		}, "BodySHA256 changed"},
		{"payload changed, hash kept", "Arrive", func(_, n *quarantine.Record) { n.Body = `{"forged":true}` }, "seal does not verify"},
		{"garbage seal", "Claim", func(_, n *quarantine.Record) { n.Status = quarantine.StatusResolved }, "seal does not verify"},
		{"attempt removed", "Claim", func(_, n *quarantine.Record) { n.Attempts = n.Attempts[1:] }, "attempt history"},
		{"first arrival dropped", "Arrive/window 5", func(_, n *quarantine.Record) { n.Attempts = n.Attempts[1:] }, "first arrival"},
		{"attempt rewritten", "Claim", func(_, n *quarantine.Record) { n.Attempts[0].Reason = "nothing happened" }, "attempt history"},
		{"attempt count shrinks", "Claim", func(_, n *quarantine.Record) { n.AttemptCount = 1 }, "attempt count"},
		{"first_seen moved", "Claim", func(_, n *quarantine.Record) { n.FirstSeen = quarantine.At(transNow) }, "FirstSeen changed"},
		{"source changed", "Claim", func(_, n *quarantine.Record) { n.Source = "other" }, "Source changed"},
		{"key changed", "Claim", func(_, n *quarantine.Record) { n.IdempotencyKey = "k2" }, "IdempotencyKey changed"},
		{"attributes changed", "Claim", func(_, n *quarantine.Record) {
			n.Attributes = map[string]quarantine.Attribute{"x": {DataType: "String", StringValue: "y"}}
		}, "payload or its attributes"},
		{"status jump", "Claim", func(_, n *quarantine.Record) { n.Status = quarantine.StatusResolved }, "is no transition"},
		{"archived record revived", "ArchiveStub/parked", func(p, n *quarantine.Record) {
			*p = *n.Clone()
			x := mustT(t)(n.Clone().NotePayloadRead("ops", transNow))
			*n = *x
			n.ReadCount, n.Reads = p.ReadCount, p.Reads
			n.AttemptCount++
			n.Attempts = append(n.Attempts, quarantine.Attempt{Stage: "operator", Reason: "revived", Actor: "ops"})
			n.Status = quarantine.StatusQuarantined
		}, "is no transition"},
		{"payload kept on an archived stub", "ArchiveStub/parked", func(p, n *quarantine.Record) { n.Body = p.Body }, "still holds a payload"},
		{"correction removed", "ParkManual/corrected", func(_, n *quarantine.Record) { n.Corrections = nil }, "corrections"},
		{"version skipped", "Claim", func(_, n *quarantine.Record) { n.Version++ }, "follows version"},
		{"prev_seal wrong", "Claim", func(_, n *quarantine.Record) { n.PrevSeal = "x" }, "prev_seal"},
		{"read removed", "NotePayloadRead/window", func(_, n *quarantine.Record) { n.Reads = n.Reads[1:] }, "reads"},
		{"read with a status change", "NotePayloadRead", func(_, n *quarantine.Record) { n.Status = quarantine.StatusQuarantined }, "more than the reads"},
		{"archive reference changed", "Arrive/parked", func(_, n *quarantine.Record) { n.Archive = &quarantine.ArchiveRef{Key: "x"} }, "archive reference"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pairs[c.pair]
			if p[0] == nil {
				t.Fatalf("no pair %s", c.pair)
			}
			prev, next := p[0].Clone(), p[1].Clone()
			c.forge(prev, next)
			if c.name != "garbage seal" && c.name != "payload changed, hash kept" {
				reseal(t, next)
			}
			err := quarantine.CheckTransition(prev, next)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckTransition = %v, want an error with %q", err, c.want)
			}
		})
	}
	if err := quarantine.CheckTransition(nil, pairs["Claim"][1]); err == nil {
		t.Error("a version 2 accepted as a first version")
	}
}
