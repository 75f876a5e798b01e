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
	first, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
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
	ctx := context.Background()
	for i := range quarantine.DefaultMaxAttempts + 5 {
		if _, err := q.Quarantine(ctx, msg(fmt.Sprintf("m%d", i), validBody)); err != nil {
			t.Fatal(err)
		}
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
	ctx := context.Background()
	if _, err := q.Quarantine(ctx, msg("m1", validBody)); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(validBody, `"lot":"L1"`, `"lot":"L2"`, 1)
	out, err := q.Quarantine(ctx, msg("m2", other))
	if err != nil {
		t.Fatal(err)
	}
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
	out, err := q.Quarantine(ctx, msg("m1", string(body)))
	if err != nil {
		t.Fatal(err)
	}
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
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
	bucket := func(kind string) int64 {
		var keys []quarantine.CounterKey
		for s := range quarantine.CounterShards {
			keys = append(keys, quarantine.BucketCounterKey("inventory", kind, clk.Now().Truncate(time.Hour), s))
		}
		got, _ := store.ReadCounters(ctx, keys)
		var n int64
		for _, v := range got {
			n += v
		}
		return n
	}
	step := func(f func(r *quarantine.Record) (*quarantine.Record, error)) {
		t.Helper()
		r, err := store.Get(ctx, out.Record.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		next, err := f(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
	}
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("op", clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Release("op", "held", clk.Now(), nil) })
	if n := bucket(quarantine.CounterCameBack); n != 0 {
		t.Fatalf("a released claim counted as came back: %d", n)
	}
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("op", clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven("op", "sent-1", clk.Now())
	})
	if _, err := q.Quarantine(ctx, msg("sent-1", validBody)); err != nil {
		t.Fatal(err)
	}
	if n := bucket(quarantine.CounterCameBack); n != 1 {
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
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(key func(shard int) quarantine.CounterKey) int64 {
		var keys []quarantine.CounterKey
		for s := range quarantine.CounterShards {
			keys = append(keys, key(s))
		}
		got, _ := store.ReadCounters(ctx, keys)
		var n int64
		for _, v := range got {
			n += v
		}
		return n
	}
	bucket := func(kind string, hour time.Time) int64 {
		return sum(func(s int) quarantine.CounterKey { return quarantine.BucketCounterKey("inventory", kind, hour, s) })
	}
	step := func(f func(r *quarantine.Record) (*quarantine.Record, error)) {
		t.Helper()
		r, err := store.Get(ctx, out.Record.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		next, err := f(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
	}
	const actor = quarantine.PolicyActorPrefix + "p1"
	noon := clk.Now().Truncate(time.Hour)
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim(actor, clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven(actor, "sent-1", clk.Now())
	})
	clk.Advance(20 * time.Minute)
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(clk.Now(), 15*time.Minute) })
	if n := bucket(quarantine.CounterResolved, noon); n != 1 {
		t.Fatalf("resolved = %d, want 1", n)
	}
	clk.Advance(time.Hour) // it comes back in the next hour
	if _, err := q.Quarantine(ctx, msg("sent-1", validBody)); err != nil {
		t.Fatal(err)
	}
	if r, _ := store.Get(ctx, out.Record.DLQID); r.Status != quarantine.StatusQuarantined {
		t.Fatalf("status %s after the comeback", r.Status)
	}
	if n := bucket(quarantine.CounterResolved, noon); n != 0 {
		t.Errorf("resolved of the settle hour = %d after the comeback, want 0", n)
	}
	if n := bucket(quarantine.CounterResolved, noon.Add(time.Hour)); n != 0 {
		t.Errorf("resolved of the comeback hour = %d, want 0", n)
	}
	if n := bucket(quarantine.CounterCameBack, noon.Add(time.Hour)); n != 1 {
		t.Errorf("came back = %d, want 1", n)
	}
	if n := sum(func(s int) quarantine.CounterKey {
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
