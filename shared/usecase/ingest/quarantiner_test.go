package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

func TestDuplicateDeliveryIsANoOp(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	ctx := context.Background()
	first, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil || first.Result != ingest.ResultCreated {
		t.Fatalf("first = %v, %v", first.Result, err)
	}
	dup, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil || dup.Result != ingest.ResultDuplicate {
		t.Fatalf("dup = %v, %v", dup.Result, err)
	}
	all := store.All()
	if len(all) != 1 || all[0].Version != 1 || all[0].AttemptCount != 1 {
		t.Fatalf("records = %+v", all)
	}
}

func TestRefailureAppendsAndChains(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	first := quarantined(t, q, msg("m1", validBody))
	clk.Advance(time.Minute)
	second, err := q.Quarantine(ctx, msg("m2", validBody))
	if err != nil || second.Result != ingest.ResultAppended {
		t.Fatalf("second = %v, %v", second.Result, err)
	}
	got, err := store.Get(ctx, first.Record.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AttemptCount != 2 || len(got.Attempts) != 2 || !got.FirstSeen.Equal(first.Record.FirstSeen.Time) || !got.LastSeen.Equal(clk.Now()) {
		t.Fatalf("after re-failure: count %d, attempts %d, first %v, last %v", got.AttemptCount, len(got.Attempts), got.FirstSeen, got.LastSeen)
	}
	if err := quarantine.VerifyChain(first.Record, got); err != nil {
		t.Fatal(err)
	}
}

func TestAttemptHistoryIsBounded(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	for i := range quarantine.DefaultMaxAttempts + 5 {
		quarantined(t, q, msg(fmt.Sprintf("m%d", i), validBody))
	}
	r := store.All()[0]
	if r.AttemptCount != quarantine.DefaultMaxAttempts+5 || len(r.Attempts) != quarantine.DefaultMaxAttempts {
		t.Fatalf("count %d, kept %d", r.AttemptCount, len(r.Attempts))
	}
	if last := r.Attempts[len(r.Attempts)-1].MessageID; last != fmt.Sprintf("m%d", quarantine.DefaultMaxAttempts+4) {
		t.Fatalf("newest kept attempt is %s", last)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := q.Quarantine(context.Background(), msg(fmt.Sprintf("m%d", i), validBody))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := store.All()
	if len(all) != 1 || all[0].AttemptCount != 32 {
		t.Fatalf("records %d, attempts %d", len(all), all[0].AttemptCount)
	}
}

func TestKeyReusedWithDifferentBodyKeepsBoth(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	quarantined(t, q, msg("m1", validBody))
	other := strings.Replace(validBody, `"lot":"L1"`, `"lot":"L2"`, 1)
	out := quarantined(t, q, msg("m2", other))
	if out.Record.Body != other || out.Record.FailureClass != quarantine.ClassValidation || !strings.Contains(out.Record.DLQID, "#body-") {
		t.Fatalf("conflict record = %+v", out.Record)
	}
	if n := len(store.All()); n != 2 {
		t.Fatalf("records = %d, want 2", n)
	}
}

func TestLargeBodyGoesToPayloadStore(t *testing.T) {
	t.Parallel()
	q, store, payloads, _ := newQ(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("a"), 900<<10)
	out := quarantined(t, q, msg("m1", string(body)))
	r := store.All()[0]
	if r.BodyRef == nil || r.Body != "" || out.Record.BodyRef == nil {
		t.Fatalf("body not offloaded: ref %v, inline %d bytes", r.BodyRef, len(r.Body))
	}
	got, err := quarantine.LoadBody(ctx, payloads, r)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("LoadBody: %v", err)
	}
	payloads.Overwrite(r.BodyRef.Key, []byte("tampered"))
	if _, err := quarantine.LoadBody(ctx, payloads, r); !errors.Is(err, quarantine.ErrPayloadMismatch) {
		t.Fatalf("tampered payload: %v", err)
	}
}

// Only a message that fails again counts as a replay that came back; a
// claim given back (the gate held the payload) does not.
func TestCameBackCountsArrivalsOnly(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	id := quarantined(t, q, msg("m1", validBody)).Record.DLQID
	cameBack := func() int64 { return bucketCount(store, quarantine.CounterCameBack, clk.Now().Truncate(time.Hour)) }
	apply(t, store, nil, id,
		func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("op", clk.Now(), time.Minute) },
		func(r *quarantine.Record) (*quarantine.Record, error) { return r.Release("op", "held", clk.Now(), nil) })
	if n := cameBack(); n != 0 {
		t.Fatalf("a released claim counted as came back: %d", n)
	}
	sendReplay(t, store, clk, id, "op", "sent-1")
	quarantined(t, q, msg("sent-1", validBody))
	if n := cameBack(); n != 1 {
		t.Fatalf("came back = %d, want 1", n)
	}
}

// A replay that settled and then comes back is taken out of the resolved
// counter of the hour it settled in (not the hour it came back in) and is
// counted as came back, for the source and for the standing policy that
// sent it.
func TestComebackAfterResolvedUndoesTheSuccess(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	id := quarantined(t, q, msg("m1", validBody)).Record.DLQID
	const actor = quarantine.PolicyActorPrefix + "p1"
	noon := clk.Now().Truncate(time.Hour)
	sendReplay(t, store, clk, id, actor, "sent-1")
	clk.Advance(20 * time.Minute)
	apply(t, store, nil, id, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(clk.Now(), 15*time.Minute) })
	if n := bucketCount(store, quarantine.CounterResolved, noon); n != 1 {
		t.Fatalf("resolved = %d, want 1", n)
	}
	clk.Advance(time.Hour) // it comes back in the next hour
	quarantined(t, q, msg("sent-1", validBody))
	if r := mustGet(t, store, id); r.Status != quarantine.StatusQuarantined {
		t.Fatalf("status %s after the comeback", r.Status)
	}
	if n := bucketCount(store, quarantine.CounterResolved, noon); n != 0 {
		t.Errorf("resolved of the settle hour = %d after the comeback, want 0", n)
	}
	if n := bucketCount(store, quarantine.CounterResolved, noon.Add(time.Hour)); n != 0 {
		t.Errorf("resolved of the comeback hour = %d, want 0", n)
	}
	if n := bucketCount(store, quarantine.CounterCameBack, noon.Add(time.Hour)); n != 1 {
		t.Errorf("came back = %d, want 1", n)
	}
	if n := counterSum(store, func(s int) quarantine.CounterKey {
		return quarantine.PolicyCounterKey("inventory", "p1", quarantine.CounterPolicyCameBack, s)
	}); n != 1 {
		t.Errorf("policy came back = %d, want 1: its breaker must see a comeback after RESOLVED", n)
	}
}

// A send recorded with actor "ingest" (a redrive request that named itself
// so, before such names were refused) is not an arrival: its message id
// coming back is a re-failure, not a duplicate delivery.
func TestSendByIngestIsNotAnArrival(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	out := quarantined(t, q, msg("m-orig", `{"event_id":"evt-9"}`))
	rec := out.Record
	if !rec.HasMessage("m-orig") || rec.Attempts[0].Kind != quarantine.AttemptArrival {
		t.Fatalf("the arrival is not recognised: %+v", rec.Attempts)
	}
	sent := sendReplay(t, store, clk, rec.DLQID, quarantine.ActorIngest, "m-replay")
	if sent.HasMessage("m-replay") {
		t.Fatal("a send by actor ingest is taken for an arrival")
	}
	// The replay fails again: it is appended and the record is open again.
	clk.Advance(time.Second)
	back := quarantined(t, q, msg("m-replay", `{"event_id":"evt-9"}`))
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
	out := quarantined(t, q, msg("m-first", `{"event_id":"evt-r"}`))
	rec := out.Record
	attempts := rec.AttemptCount
	reads := make([]transition, 25)
	for i := range reads {
		reads[i] = func(r *quarantine.Record) (*quarantine.Record, error) {
			clk.Advance(time.Second)
			return r.NotePayloadRead(fmt.Sprintf("reader-%d", i), clk.Now())
		}
	}
	apply(t, store, nil, rec.DLQID, reads...)
	got := mustGet(t, store, rec.DLQID)
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
	out := quarantined(t, q, msg("m-first", `{"event_id":"evt-t"}`))
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
	out := quarantined(t, q, msg("m-p", `{"event_id":"evt-p"}`))
	rec := out.Record
	claimed := apply(t, store, nil, rec.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Claim("policy:p1", clk.Now(), time.Minute)
	})
	sent := apply(t, store, nil, rec.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven("policy:p1", "m-sent", clk.Now())
	})
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
	read, err := sent.NotePayloadRead("alice", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := policySent(sent, read); n != 0 {
		t.Fatalf("a payload read counts as %d policy sends", n)
	}
}

// BenchmarkQuarantineCPU is the per-message CPU cost of enrich + classify +
// seal on the in-memory store (no I/O).
func BenchmarkQuarantineCPU(b *testing.B) {
	q, _, _, _ := newQ(b)
	body := []byte(validBody)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := msg("m", "")
		m.Body = body
		m.Attributes = map[string]quarantine.Attribute{"idempotency-key": {DataType: "String", StringValue: "k" + string(rune('a'+i%26)) + time.Now().String()}}
		if _, err := q.Quarantine(b.Context(), m); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
