package quarantine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// A send recorded with actor "ingest" (a redrive request that named itself
// so, before such names were refused) is not an arrival: its message id
// coming back is a re-failure, not a duplicate delivery.
func TestSendByIngestIsNotAnArrival(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m-orig", `{"event_id":"evt-9"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := out.Record
	if !rec.HasMessage("m-orig") || rec.Attempts[0].Kind != quarantine.AttemptArrival {
		t.Fatalf("the arrival is not recognised: %+v", rec.Attempts)
	}
	claimed, err := rec.Claim(quarantine.ActorIngest, clk.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, rec, claimed); err != nil {
		t.Fatal(err)
	}
	sent, err := claimed.MarkRedriven(quarantine.ActorIngest, "m-replay", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, claimed, sent); err != nil {
		t.Fatal(err)
	}
	if sent.HasMessage("m-replay") {
		t.Fatal("a send by actor ingest is taken for an arrival")
	}
	// The replay fails again: it is appended and the record is open again.
	clk.Advance(time.Second)
	back, err := q.Quarantine(ctx, msg("m-replay", `{"event_id":"evt-9"}`))
	if err != nil {
		t.Fatal(err)
	}
	if back.Result != ingest.ResultAppended || back.Record.Status != quarantine.StatusQuarantined {
		t.Fatalf("the replay's comeback: %s, %s; want appended, QUARANTINED", back.Result, back.Record.Status)
	}

	// Records stored before attempts had a kind: an ingest entry at a
	// redrive stage is a send, at any other stage an arrival.
	old := &quarantine.Record{Attempts: []quarantine.Attempt{
		{Stage: "gate", Reason: "schema /ndc pattern", MessageID: "a1", Actor: quarantine.ActorIngest},
		{Stage: quarantine.StageRedrive, Reason: "sent (round 1)", MessageID: "s1", Actor: quarantine.ActorIngest},
		{Stage: quarantine.StageAudit, Reason: "payload read", MessageID: "r1", Actor: quarantine.ActorIngest},
	}}
	if !old.HasMessage("a1") || old.HasMessage("s1") || old.HasMessage("r1") {
		t.Fatal("arrivals of a record without attempt kinds are misread")
	}
	// A kind other than arrival is never an arrival, whatever its actor.
	odd := &quarantine.Record{Attempts: []quarantine.Attempt{{Stage: "gate", MessageID: "x", Actor: quarantine.ActorIngest, Kind: "other"}}}
	if odd.HasMessage("x") {
		t.Fatal("an attempt of another kind is taken for an arrival")
	}
}

// Payload reads are audit entries, not attempts: 25 of them leave the
// failure history, its first failure and its count as they were.
func TestPayloadReadsKeepTheFailureHistory(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m-first", `{"event_id":"evt-r"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := out.Record
	attempts := rec.AttemptCount
	for i := 0; i < 25; i++ {
		clk.Advance(time.Second)
		next, err := rec.NotePayloadRead(fmt.Sprintf("reader-%d", i), clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, rec, next); err != nil {
			t.Fatal(err)
		}
		rec = next
	}
	got, err := store.Get(ctx, rec.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(got); err != nil {
		t.Fatal(err)
	}
	if got.AttemptCount != attempts || !got.HasMessage("m-first") || got.Attempts[0].MessageID != "m-first" {
		t.Fatalf("attempt_count %d (want %d), history %+v", got.AttemptCount, attempts, got.Attempts)
	}
	if got.ReadCount != 25 || len(got.Reads) != quarantine.DefaultMaxReads || got.Reads[len(got.Reads)-1].Actor != "reader-24" {
		t.Fatalf("read_count %d, reads %+v", got.ReadCount, got.Reads)
	}
}

// Operator actions stay in the history, but trimming it never evicts the
// first arrival (the original failure and its message id).
func TestTrimmedHistoryKeepsTheFirstArrival(t *testing.T) {
	t.Parallel()
	q, _, _, clk := newQ(t)
	out, err := q.Quarantine(context.Background(), msg("m-first", `{"event_id":"evt-t"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := out.Record
	for i := 0; i < 30; i++ {
		clk.Advance(time.Second)
		c, err := rec.Claim("alice", clk.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if rec, err = c.Release("alice", fmt.Sprintf("given back %d", i), clk.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Attempts) != quarantine.DefaultMaxAttempts || rec.AttemptCount != 61 {
		t.Fatalf("%d attempts kept of %d", len(rec.Attempts), rec.AttemptCount)
	}
	first, last := rec.Attempts[0], rec.Attempts[len(rec.Attempts)-1]
	if first.MessageID != "m-first" || !first.IsArrival() || last.Reason != "given back 29" || rec.Attempts[1].Reason != "given back 20" {
		t.Fatalf("history %+v", rec.Attempts)
	}
}

// A payload read after a policy's send is not another send: the policy's
// breaker counts the send once.
func TestPayloadReadDoesNotRecountAPolicySend(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m-p", `{"event_id":"evt-p"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := out.Record
	claimed, err := rec.Claim("policy:p1", clk.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, rec, claimed); err != nil {
		t.Fatal(err)
	}
	sent, err := claimed.MarkRedriven("policy:p1", "m-sent", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	policySent := func(prev, r *quarantine.Record) int {
		n := 0
		for _, d := range quarantine.CounterDeltas(prev, r) {
			if d.Kind == quarantine.CounterPolicySent {
				n++
			}
		}
		return n
	}
	if n := policySent(claimed, sent); n != 1 {
		t.Fatalf("the send counts %d times", n)
	}
	if err := store.Replace(ctx, claimed, sent); err != nil {
		t.Fatal(err)
	}
	read, err := sent.NotePayloadRead("alice", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := policySent(sent, read); n != 0 {
		t.Fatalf("a payload read counts as %d policy sends", n)
	}
}
