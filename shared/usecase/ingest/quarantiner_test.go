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

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
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

// A replay that comes back while its record is still REDRIVING (the run
// sent it and crashed, or has not recorded the round yet) clears the lease,
// so no takeover will ever say the round may have gone out twice: the
// arrival says it. A run that then records its send confirms the round.
func TestComebackBeforeTheRoundsOutcomeSaysItMayRepeat(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	id := quarantined(t, q, msg("m1", validBody)).Record.DLQID
	claimed := apply(t, store, nil, id, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Claim("ops", clk.Now(), time.Minute)
	})
	clk.Advance(time.Second)
	back := quarantined(t, q, msg("replay-1", validBody))
	if back.Result != ingest.ResultAppended || back.Record.Status != quarantine.StatusQuarantined || back.Record.LeaseUntil != nil {
		t.Fatalf("the comeback: %s, %s, lease %v; want appended, QUARANTINED, no lease", back.Result, back.Record.Status, back.Record.LeaseUntil)
	}
	last := back.Record.Attempts[len(back.Record.Attempts)-1]
	if round, ok := last.MayRepeat(); !ok || round != claimed.RedriveCount {
		t.Fatalf("the arrival %q explains round %d, %v; want round %d", last.Note, round, ok, claimed.RedriveCount)
	}
	// The run's late mark is written to the history, and the record stays
	// open: its replay failed.
	marked := apply(t, store, nil, id, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.NoteSentWhileChanged("ops", "replay-1", claimed.RedriveCount, false, false, clk.Now())
	})
	if marked.Status != quarantine.StatusQuarantined {
		t.Errorf("status %s after the late mark", marked.Status)
	}
	// A comeback of a round whose outcome is recorded says nothing more.
	clk.Advance(time.Second)
	again := quarantined(t, q, msg("replay-2", validBody))
	if round, ok := again.Record.Attempts[len(again.Record.Attempts)-1].MayRepeat(); ok {
		t.Errorf("a comeback of a QUARANTINED record explains round %d", round)
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

// A message that fails again after its record was archived opens a new
// record, linked to the archived one and sealed, that goes through the
// normal lifecycle; the stub (and so its archive object) is not touched.
// Duplicates are found on every record of the chain, the successor's own
// replay comes back to it, and an archived successor gets a successor too.
func TestArrivalAfterArchiveOpensALinkedSuccessor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, store, _, clk := newQ(t)
	m1 := msg("m1", validBody)
	out := quarantined(t, q, m1)
	base := out.Record.DLQID
	stub := archiveRecord(t, store, clk, base)

	// The archived record's own message, delivered again: a no-op.
	if out, err := q.Quarantine(ctx, m1); err != nil || out.Result != ingest.ResultDuplicate || out.Record.DLQID != base {
		t.Fatalf("redelivery of the archived record's message: %+v %v", out, err)
	}
	// A genuine re-failure of the same event.
	m2 := msg("m2", validBody)
	out = quarantined(t, q, m2)
	succ := out.Record
	if out.Result != ingest.ResultCreated || succ.DLQID != base+"#r1" {
		t.Fatalf("re-failure after archive: %s at %q, want a new record at %q", out.Result, succ.DLQID, base+"#r1")
	}
	want := quarantine.RecordLink{ID: base, Seal: stub.Seal, Reason: quarantine.LinkArchived}
	if succ.Predecessor == nil || *succ.Predecessor != want {
		t.Fatalf("predecessor %+v, want %+v", succ.Predecessor, want)
	}
	if succ.Status != quarantine.StatusQuarantined || succ.Version != 1 || succ.IdempotencyKey != stub.IdempotencyKey ||
		succ.Body != validBody || succ.RedriveCount != stub.RedriveCount || succ.RedriveCount != 1 || !succ.FirstSeen.Equal(stub.FirstSeen.Time) || !succ.LastSeen.Equal(clk.Now()) {
		// (first_seen is the event's: it keeps its place in its FIFO group.)
		t.Fatalf("successor: %s v%d count %d/%d first seen %s", succ.Status, succ.Version, succ.RedriveCount, succ.RedriveCap, succ.FirstSeen)
	}
	stored := mustGet(t, store, succ.DLQID)
	if err := quarantine.Verify(stored); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, store, base); got.Seal != stub.Seal || got.Version != stub.Version || got.AttemptCount != stub.AttemptCount {
		t.Fatalf("the stub changed: v%d → v%d", stub.Version, got.Version)
	}

	// Redeliveries of either message change nothing; a third failure is
	// appended to the successor.
	for _, m := range []ingest.Message{m1, m2} {
		if out, err := q.Quarantine(ctx, m); err != nil || out.Result != ingest.ResultDuplicate {
			t.Fatalf("redelivery of %s: %+v %v", m.MessageID, out, err)
		}
	}
	clk.Advance(time.Second)
	if out, err := q.Quarantine(ctx, msg("m3", validBody)); err != nil || out.Result != ingest.ResultAppended || out.Record.DLQID != succ.DLQID {
		t.Fatalf("third failure: %+v %v", out, err)
	}

	// The successor's replay carries its id and comes back to it, not
	// flagged as forged.
	sendReplay(t, store, clk, succ.DLQID, "ops", "replay-1")
	back := msg("replay-1", validBody)
	back.Attributes = map[string]quarantine.Attribute{
		quarantine.AttrRecordID:     {DataType: "String", StringValue: succ.DLQID},
		quarantine.AttrRedriveCount: {DataType: "Number", StringValue: "2"},
	}
	out, err := q.Quarantine(ctx, back)
	if err != nil || out.Result != ingest.ResultAppended || out.Record.DLQID != succ.DLQID || out.Record.Status != quarantine.StatusQuarantined {
		t.Fatalf("the successor's replay came back: %+v %v", out, err)
	}
	if last := out.Record.Attempts[len(out.Record.Attempts)-1]; strings.Contains(last.Note, "forged") {
		t.Fatalf("the successor's own replay was flagged: %q", last.Note)
	}

	// The successor is archived in its turn: the next failure opens #r2,
	// linked to #r1.
	stub1 := archiveRecord(t, store, clk, succ.DLQID)
	out, err = q.Quarantine(ctx, msg("m4", validBody))
	if err != nil || out.Result != ingest.ResultCreated || out.Record.DLQID != base+"#r2" ||
		out.Record.Predecessor == nil || out.Record.Predecessor.ID != succ.DLQID || out.Record.Predecessor.Seal != stub1.Seal {
		t.Fatalf("after the second archive: %+v %v", out, err)
	}
	if out.Record.RedriveCount != 3 {
		t.Fatalf("redrive count %d carried on, want 3", out.Record.RedriveCount)
	}
	for _, id := range []string{"m1", "m2", "m3", "m4", "replay-1"} {
		if out, err := q.Quarantine(ctx, msg(id, validBody)); err != nil || out.Result != ingest.ResultDuplicate {
			t.Fatalf("redelivery of %s: %+v %v", id, out, err)
		}
	}
	if n := len(store.All()); n != 3 {
		t.Fatalf("%d records, want 3", n)
	}
	checkCounters(t, store, "inventory")
}

// A stored record whose sealed fields were changed without resealing is
// never re-sealed by an arrival: it stays as it is (set aside), and the
// message is stored in a successor linked to it, so it is acknowledged
// instead of failing forever.
func TestArrivalForTamperedRecordOpensASuccessor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, store, _, clk := newQ(t)
	out := quarantined(t, q, msg("m1", validBody))
	base := out.Record.DLQID
	store.Tamper(base, func(r *quarantine.Record) { r.FailureReason = "nothing to see here" }) // written straight to the table
	r := mustGet(t, store, base)
	var se *quarantine.SealError
	if err := quarantine.Verify(mustGet(t, store, base)); !errors.As(err, &se) {
		t.Fatalf("tampered record verifies: %v", err)
	}
	clk.Advance(time.Second)
	out, err := q.Quarantine(ctx, msg("m2", validBody))
	if err != nil {
		t.Fatal(err)
	}
	want := quarantine.RecordLink{ID: base, Seal: r.Seal, Reason: quarantine.LinkSealMismatch}
	if out.Result != ingest.ResultCreated || out.Record.DLQID != base+"#r1" || out.Record.Predecessor == nil || *out.Record.Predecessor != want {
		t.Fatalf("arrival for a tampered record: %+v %v", out, err)
	}
	if out.Record.RedriveCount < out.Record.RedriveCap {
		t.Fatalf("successor of a tampered record at %d of cap %d: its redrive count cannot be trusted, it must start at its cap", out.Record.RedriveCount, out.Record.RedriveCap)
	}
	if !out.Record.FirstSeen.Equal(r.FirstSeen.Time) {
		t.Fatalf("successor first seen %s, its predecessor %s: it must keep its place in its group", out.Record.FirstSeen, r.FirstSeen)
	}
	if err := quarantine.Verify(mustGet(t, store, out.Record.DLQID)); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, store, base)
	if got.Seal != r.Seal || got.Version != r.Version || got.FailureReason != r.FailureReason || got.AttemptCount != 1 {
		t.Fatal("the tampered record was rewritten")
	}
	if out, err := q.Quarantine(ctx, msg("m2", validBody)); err != nil || out.Result != ingest.ResultDuplicate {
		t.Fatalf("redelivery: %+v %v", out, err)
	}
	// The tampered record's history proves nothing: a redelivery of its
	// message is recorded, with its id, in the successor.
	if out, err := q.Quarantine(ctx, msg("m1", validBody)); err != nil || out.Result != ingest.ResultAppended || out.Record.DLQID != base+"#r1" {
		t.Fatalf("redelivery of the tampered record's message: %+v %v", out, err)
	}
}

// A record that merely sits at a successor's id (its key ends in "#r1")
// is another event's: a chain walks past it, and neither touches the other.
func TestSuccessorChainSkipsAnotherKeysRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, store, _, clk := newQ(t)
	body := func(id string) string { return strings.Replace(validBody, `"evt-1"`, `"`+id+`"`, 1) }
	out := quarantined(t, q, msg("a1", body("evt-1")))
	base := out.Record.DLQID
	other, err := q.Quarantine(ctx, msg("b1", body("evt-1#r1")))
	if err != nil || other.Record.DLQID != base+"#r1" {
		t.Fatalf("%+v %v", other, err)
	}
	archiveRecord(t, store, clk, base)
	out, err = q.Quarantine(ctx, msg("a2", body("evt-1")))
	if err != nil || out.Result != ingest.ResultCreated || out.Record.DLQID != base+"#r2" || out.Record.Predecessor.ID != base {
		t.Fatalf("%+v %v", out, err)
	}
	if r := mustGet(t, store, base+"#r1"); r.Version != other.Record.Version || r.AttemptCount != 1 {
		t.Fatal("the other key's record was touched")
	}
	if out, err := q.Quarantine(ctx, msg("b2", body("evt-1#r1"))); err != nil || out.Result != ingest.ResultAppended || out.Record.DLQID != base+"#r1" {
		t.Fatalf("%+v %v", out, err)
	}
}

// A correction that changes the event identity (new_key) is replayed under
// the new key; when that replay fails again it comes back to the record it
// was corrected in, with its redrive count, so the cap holds across the
// key change. Attributes that do not match a stored correction exactly are
// not trusted.
func TestCorrectedReplayUnderNewKeyComesBackToItsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bad := strings.Replace(validBody, "12345-678-90", "NDC?", 1)
	fixed := strings.Replace(validBody, `"evt-1"`, `"evt-1-fixed"`, 1)
	setup := func(t *testing.T) (*quarantiner, *memstore.Store, *clock.Fake, *quarantine.Record) {
		q, store, _, clk := newQ(t)
		out := quarantined(t, q, msg("m1", bad))
		r, err := q.Correct(ctx, out.Record.DLQID, quarantine.CorrectionRequest{Actor: "fixer@ops", Reason: "wrong event id", Body: []byte(fixed), NewKey: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Latest().NewKey != "evt-1-fixed" {
			t.Fatalf("new key %q", r.Latest().NewKey)
		}
		return q, store, clk, r
	}
	replay := func(t *testing.T, store *memstore.Store, clk *clock.Fake, id string) *quarantine.Record {
		if _, err := mustGet(t, store, id).Claim("ops", clk.Now(), time.Minute); err != nil {
			return nil
		}
		return sendReplay(t, store, clk, id, "ops", "sent")
	}
	comeback := func(id string, round int, n string, body string) ingest.Message {
		m := msg("replay-"+id+"-"+n+"-"+string(rune('0'+round)), body)
		m.Attributes = map[string]quarantine.Attribute{
			quarantine.AttrRecordID:     {DataType: "String", StringValue: id},
			quarantine.AttrRedriveCount: {DataType: "Number", StringValue: string(rune('0' + round))},
			quarantine.AttrCorrected:    {DataType: "Number", StringValue: n},
		}
		return m
	}
	newKeyID := quarantine.RecordID("inventory", "evt-1-fixed")

	t.Run("comeback", func(t *testing.T) {
		q, store, clk, r := setup(t)
		for round := 1; round <= r.RedriveCap; round++ {
			if replay(t, store, clk, r.DLQID) == nil {
				t.Fatalf("round %d not claimable", round)
			}
			clk.Advance(time.Second)
			out := quarantined(t, q, comeback(r.DLQID, round, "1", fixed))
			if out.Result != ingest.ResultAppended || out.Record.DLQID != r.DLQID {
				t.Fatalf("round %d came back as %s at a record of its own", round, out.Result)
			}
			got := mustGet(t, store, r.DLQID)
			if got.Status != quarantine.StatusQuarantined || got.RedriveCount != round || strings.Contains(got.Attempts[len(got.Attempts)-1].Note, "forged") {
				t.Fatalf("round %d: %s count %d note %q", round, got.Status, got.RedriveCount, got.Attempts[len(got.Attempts)-1].Note)
			}
			if _, err := store.Get(ctx, newKeyID); !errors.Is(err, quarantine.ErrNotFound) {
				t.Fatalf("round %d: a record under the new key: %v", round, err)
			}
		}
		// The cap holds: the next claim parks it.
		if _, err := mustGet(t, store, r.DLQID).Claim("ops", clk.Now(), time.Minute); !errors.Is(err, quarantine.ErrCapReached) {
			t.Fatalf("claim at the cap: %v", err)
		}
		checkCounters(t, store, "inventory")
	})

	forged := map[string]func(r *quarantine.Record) ingest.Message{
		"no such correction": func(r *quarantine.Record) ingest.Message { return comeback(r.DLQID, 1, "2", fixed) },
		"another body": func(r *quarantine.Record) ingest.Message {
			return comeback(r.DLQID, 1, "1", strings.Replace(fixed, `"L1"`, `"L2"`, 1))
		},
		"no such record": func(r *quarantine.Record) ingest.Message { return comeback("inventory#evt-9", 1, "1", fixed) },
		"another source": func(r *quarantine.Record) ingest.Message {
			return comeback(strings.Replace(r.DLQID, "inventory#", "payments#", 1), 1, "1", fixed)
		},
	}
	for name, build := range forged {
		t.Run(name, func(t *testing.T) {
			q, store, clk, r := setup(t)
			replay(t, store, clk, r.DLQID)
			before := mustGet(t, store, r.DLQID)
			m := build(r)
			out := quarantined(t, q, m)
			if out.Result != ingest.ResultCreated || out.Record.DLQID != newKeyID {
				t.Fatalf("%s: %s at %q, want a new record under the new key", name, out.Result, out.Record.DLQID)
			}
			if note := out.Record.Attempts[0].Note; !strings.Contains(note, "forged redrive attributes ignored") {
				t.Fatalf("note %q", note)
			}
			if got := mustGet(t, store, r.DLQID); got.Version != before.Version {
				t.Fatal("the corrected record was touched")
			}
		})
	}
}

// A new-key correction needs room for dlq-record-id in the replay, or its
// comeback could not find the record again.
func TestNewKeyCorrectionNeedsRoomForTheRecordID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _, _, _ := newQ(t)
	m := msg("m1", strings.Replace(validBody, "12345-678-90", "NDC?", 1))
	m.Attributes = map[string]quarantine.Attribute{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		m.Attributes[k] = quarantine.Attribute{DataType: "String", StringValue: "v"}
	}
	out := quarantined(t, q, m)
	fixed := strings.Replace(validBody, `"evt-1"`, `"evt-2"`, 1)
	_, err := q.Correct(ctx, out.Record.DLQID, quarantine.CorrectionRequest{Actor: "a", Reason: "r", Body: []byte(fixed), NewKey: true})
	var ce *quarantine.CorrectionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "needs room for 2 more") {
		t.Fatalf("9 attributes and a new key: %v", err)
	}
}

// Ingest stamps a message strictly after the previous one of its FIFO
// group (Message.After), even when the clock has not moved.
func TestArrivalIsStampedAfterItsPredecessorInTheGroup(t *testing.T) {
	t.Parallel()
	q, _, _, clk := newQ(t)
	var after time.Time
	var seen []time.Time
	for i, id := range []string{"evt-a", "evt-b", "evt-c"} {
		m := msg("m"+id, strings.Replace(validBody, `"evt-1"`, `"`+id+`"`, 1))
		m.MessageGroupID, m.SequenceNumber, m.After = "g", "1000000000000000000000"+string(rune('0'+i)), after
		out := quarantined(t, q, m)
		if out.Record.SequenceNumber != m.SequenceNumber || out.Record.MessageGroupID != "g" {
			t.Fatalf("sequence %q group %q", out.Record.SequenceNumber, out.Record.MessageGroupID)
		}
		after = out.At
		seen = append(seen, out.Record.FirstSeen.Time)
	}
	if !seen[0].Equal(clk.Now()) || !seen[0].Before(seen[1]) || !seen[1].Before(seen[2]) {
		t.Fatalf("first_seen %v in one clock tick", seen)
	}
}

// Concurrent re-failures of an archived record open exactly one successor
// and all land on it.
func TestConcurrentArrivalsAfterArchiveShareOneSuccessor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, store, _, clk := newQ(t)
	out := quarantined(t, q, msg("m0", validBody))
	stub := archiveRecord(t, store, clk, out.Record.DLQID)
	const n = 16
	results := make([]ingest.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := q.Quarantine(ctx, msg(fmt.Sprint("c", i), validBody))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = out.Result
		}()
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		if r == ingest.ResultCreated {
			created++
		}
	}
	succ := mustGet(t, store, stub.DLQID+"#r1")
	if created != 1 || succ.AttemptCount != n || len(store.All()) != 2 {
		t.Fatalf("%d created, successor with %d attempts, %d records", created, succ.AttemptCount, len(store.All()))
	}
	if got := mustGet(t, store, stub.DLQID); got.Version != stub.Version {
		t.Fatal("the stub changed")
	}
	checkCounters(t, store, "inventory")
}

// A record set aside by an integrity hold whose seal still verifies (its
// claim-checked payload failed its hash) refuses every write: an arrival
// for it opens a successor instead of being retried until the DLQ's
// retention drops the message.
func TestArrivalForAHeldRecordOpensASuccessor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, store, _, clk := newQ(t)
	out := quarantined(t, q, msg("m1", validBody))
	base := out.Record
	if err := store.Hold(ctx, quarantine.IntegrityHold{ID: base.DLQID, Version: base.Version, Reason: "payload_mismatch", At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	out, err := q.Quarantine(ctx, msg("m2", validBody))
	if err != nil {
		t.Fatalf("arrival for a held record: %v", err)
	}
	if out.Result != ingest.ResultCreated || out.Record.DLQID != base.DLQID+"#r1" || out.Record.Predecessor == nil {
		t.Fatalf("arrival for a held record: %+v", out)
	}
	if got := mustGet(t, store, base.DLQID); got.Seal != base.Seal || got.Version != base.Version {
		t.Fatal("the held record was rewritten")
	}
}

// An arrival for a tampered record never re-seals the forgery: the
// message is stored in a successor record linked to it, and the tampered
// record stays exactly as found.
func TestArrivalForATamperedRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	q, store, _, _ := newQ(t)
	first := quarantined(t, q, msg("m1", badNDC))
	id := first.Record.DLQID
	store.Tamper(id, func(r *quarantine.Record) { r.RedriveCount = 0; r.FailureClass = quarantine.ClassExhausted })
	found, _ := store.Get(ctx, id)
	if out, err := q.Quarantine(ctx, msg("m2", badNDC)); err != nil || out.Result != ingest.ResultCreated || out.Record.Predecessor == nil || out.Record.Predecessor.ID != id {
		t.Fatalf("arrival for a tampered record = %+v, %v; want a successor linked to it", out, err)
	}
	after, _ := store.Get(ctx, id)
	if after.Seal != found.Seal || after.Version != found.Version || len(after.Attempts) != len(found.Attempts) {
		t.Fatal("the arrival re-sealed the tampered record")
	}
}

// A refused correction changes nothing; an accepted one keeps the original
// verbatim and sealed, chains in the history and makes the record
// exhausted; tampering with the original, a correction's body or its
// author afterwards fails Verify.
func TestCorrectionKeepsTheOriginalAndIsSealed(t *testing.T) {
	ctx := context.Background()
	q, store, _, _ := newQ(t)
	out := quarantined(t, q, msg("m1", badNDC))
	id, before := out.Record.DLQID, out.Record
	if before.FailureClass != quarantine.ClassValidation {
		t.Fatalf("class %s", before.FailureClass)
	}
	for name, req := range map[string]quarantine.CorrectionRequest{
		"still invalid":     correctReq(fixed("12-3")),
		"not JSON":          correctReq([]byte(`{"event_id":`)),
		"identity changed":  correctReq([]byte(strings.Replace(string(fixed("12345-678-90")), "evt-9", "evt-10", 1))),
		"unchanged":         correctReq([]byte(badNDC)),
		"no reason":         {Actor: "a", Body: fixed("12345-678-90")},
		"new key, same key": {Actor: "a", Reason: "r", Body: fixed("12345-678-90"), NewKey: true},
	} {
		_, err := q.Correct(ctx, id, req)
		var ce *quarantine.CorrectionError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a CorrectionError", name, err)
		}
		if got, _ := store.Get(ctx, id); got.Version != before.Version || got.Seal != before.Seal {
			t.Fatalf("%s: a refused correction changed the record", name)
		}
	}
	first, err := q.Correct(ctx, id, correctReq(fixed("12345-678-90")))
	if err != nil {
		t.Fatal(err)
	}
	second, err := q.Correct(ctx, id, quarantine.CorrectionRequest{Actor: "lead@example.com", Reason: "wrong package code", Body: fixed("12345-678-91")})
	if err != nil {
		t.Fatal(err)
	}
	if second.PrevSeal != first.Seal || len(second.Corrections) != 2 || second.Corrections[0].BodySHA256 != first.Corrections[0].BodySHA256 {
		t.Fatal("the second correction does not chain to the first")
	}
	c := second.Corrections[1]
	if c.N != 2 || c.Actor != "lead@example.com" || c.Reason != "wrong package code" || c.FromSHA256 != first.Corrections[0].BodySHA256 || len(c.DiffSHA256) != 64 {
		t.Fatalf("correction %+v", c)
	}
	if second.FailureClass != quarantine.ClassExhausted || second.Body != badNDC || second.BodySHA256 != before.BodySHA256 {
		t.Fatal("the original body or the class is wrong after corrections")
	}
	if err := quarantine.Verify(second); err != nil {
		t.Fatal(err)
	}
	body, err := quarantine.ReplayBody(ctx, nil, second)
	if err != nil || string(body) != string(fixed("12345-678-91")) {
		t.Fatalf("replay body %q, %v", body, err)
	}
	for name, tamper := range map[string]func(r *quarantine.Record){
		"original body": func(r *quarantine.Record) { r.Body = strings.Replace(r.Body, "L1", "L2", 1) },
		"correction body": func(r *quarantine.Record) {
			r.Corrections[0].Body = strings.Replace(r.Corrections[0].Body, "L1", "L2", 1)
		},
		"correction author": func(r *quarantine.Record) { r.Corrections[1].Actor = "someone-else" },
		"correction reason": func(r *quarantine.Record) { r.Corrections[0].Reason = "" },
		"dropped":           func(r *quarantine.Record) { r.Corrections = r.Corrections[:1] },
	} {
		r := second.Clone()
		tamper(r)
		if err := quarantine.Verify(r); err == nil {
			t.Errorf("tampering with the %s after a correction is not detected", name)
		}
	}
	// The cap bounds corrections.
	if _, err := q.Correct(ctx, id, correctReq(fixed("12345-678-92"))); err != nil {
		t.Fatal(err)
	}
	_, err = q.Correct(ctx, id, correctReq(fixed("12345-678-93")))
	if ce := (*quarantine.CorrectionError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "bounded by the redrive cap") {
		t.Fatalf("a fourth correction with cap 3: %v", err)
	}
}

// An explicit new key is accepted and recorded.
func TestCorrectionWithANewKeyIsRecorded(t *testing.T) {
	ctx := context.Background()
	q, _, _, _ := newQ(t)
	out := quarantined(t, q, msg("m1", badNDC))
	req := correctReq([]byte(strings.Replace(string(fixed("12345-678-90")), "evt-9", "evt-9b", 1)))
	req.NewKey = true
	r, err := q.Correct(ctx, out.Record.DLQID, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Latest().NewKey != "evt-9b" || r.IdempotencyKey != "evt-9" {
		t.Fatalf("new key %q, record key %q", r.Latest().NewKey, r.IdempotencyKey)
	}
}

// A record keyed by its body's hash keeps its identity through a
// correction: replays carry the key in the key attribute, and a corrected
// replay that fails again lands on the same record, not beside it.
func TestCorrectionKeepsABodyHashKey(t *testing.T) {
	ctx := context.Background()
	src := inventorySource(t)
	src.IdempotencyPointer = "" // keyed by body hash
	q, store, _, _ := newQFor(t, src)
	noID := badNDC
	out := quarantined(t, q, msg("m1", noID))
	if out.Record.KeyOrigin != quarantine.KeyFromBodyHash {
		t.Fatalf("key origin %s", out.Record.KeyOrigin)
	}
	fixedBody := strings.Replace(noID, `"NDC?1"`, `"12345-678-90"`, 1)
	r, err := q.Correct(ctx, out.Record.DLQID, correctReq([]byte(fixedBody)))
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Latest(); c.KeyAttribute != quarantine.DefaultKeyAttribute || c.NewKey != "" {
		t.Fatalf("correction %+v: want the key carried in %s", c, quarantine.DefaultKeyAttribute)
	}
	// The corrected replay comes back with the attribute redrive gives it.
	m := msg("m2", fixedBody)
	m.Attributes = map[string]quarantine.Attribute{quarantine.DefaultKeyAttribute: {DataType: "String", StringValue: r.IdempotencyKey}}
	back := quarantined(t, q, m)
	if back.Record.DLQID != r.DLQID || back.Result != ingest.ResultAppended {
		t.Fatalf("the corrected replay made %s (%s), want an arrival on %s", back.Record.DLQID, back.Result, r.DLQID)
	}
	if _, err := store.Get(ctx, r.DLQID+"#body-"+quarantine.BodySHA256([]byte(fixedBody))[:16]); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatal("a conflict record was made for a corrected replay")
	}
}

// A correction of a tampered record is refused: a sealed field changed, or
// the body changed behind its hash.
func TestCorrectionOfATamperedRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	for name, change := range map[string]func(r *quarantine.Record){
		"field": func(r *quarantine.Record) { r.FailureClass = quarantine.ClassExhausted },
		"body":  func(r *quarantine.Record) { r.Body = fixedBody() },
	} {
		t.Run(name, func(t *testing.T) {
			q, store, _, _ := newQ(t)
			out := quarantined(t, q, msg("m1", badNDC))
			store.Tamper(out.Record.DLQID, change)
			found, _ := store.Get(ctx, out.Record.DLQID)
			if _, err := q.Correct(ctx, out.Record.DLQID, correctReq(fixed("12345-678-90"))); !quarantine.IsIntegrityFailure(err) {
				t.Fatalf("correction of a tampered record = %v", err)
			}
			if after, _ := store.Get(ctx, out.Record.DLQID); after.Seal != found.Seal || len(after.Corrections) != 0 {
				t.Fatal("the correction was stored")
			}
		})
	}
}

// FuzzQuarantine feeds arbitrary bodies and attributes through the whole
// quarantine path: it must never panic, every record it produces must
// verify, and the body must come back byte for byte.
func FuzzQuarantine(f *testing.F) {
	f.Add([]byte(validBody), "idempotency-key", "k1", []byte(nil))
	f.Add([]byte{0xff, 0x00, 0xc3}, "dlq-record-id", "x", []byte{1})
	f.Add([]byte(`{"a":1,"a":2}`), "dlq-failure-reason", "boom 42", []byte(nil))
	f.Add([]byte("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]"), "", "", []byte(nil))
	f.Add([]byte(""), "dlq-redrive-count", "-1", []byte{0xff})
	f.Fuzz(func(t *testing.T, body []byte, attrName, attrValue string, bin []byte) {
		q, store, payloads, _ := newQ(t)
		m := msg("m1", "")
		m.Body = body
		if attrName != "" {
			m.Attributes = map[string]quarantine.Attribute{attrName: {DataType: "String", StringValue: attrValue}}
			if len(bin) > 0 {
				m.Attributes[attrName+".bin"] = quarantine.Attribute{DataType: "Binary", BinaryValue: bin}
			}
		}
		ctx := context.Background()
		if _, err := q.Quarantine(ctx, m); err != nil {
			t.Fatalf("quarantine: %v", err)
		}
		all := store.All()
		if len(all) != 1 {
			t.Fatalf("%d records", len(all))
		}
		r := all[0]
		if err := quarantine.Verify(r); err != nil {
			t.Fatal(err)
		}
		got, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body not verbatim: %v", err)
		}
		if r.FailureReason == "" || r.FailureClass == "" {
			t.Fatalf("no reason or class: %+v", r)
		}
	})
}

// Two sources share one DLQ. A message SQS moved names its source
// (DeadLetterQueueSourceArn); one a consumer dead-lettered on purpose
// names none, and goes to the source it declares (AttrFailureSource) when
// that is one of the DLQ's sources, else to no source at all: it is never
// filed under a source it may not come from.
func TestSharedDLQRoutesBySourceArnElseTheDeclaredSource(t *testing.T) {
	t.Parallel()
	a, b := inventorySource(t), inventorySource(t)
	b.Name, b.ARN = "returns", "arn:aws:sqs:us-east-1:000000000000:returns"
	store, payloads := memstore.New(), memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	q := ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{a.Name: a, b.Name: b}})
	if a.DLQName == "" || a.DLQName != b.DLQName {
		t.Fatalf("the fixture's sources do not share a DLQ: %q, %q", a.DLQName, b.DLQName)
	}
	declared := func(m ingest.Message, source string) ingest.Message {
		m.Attributes = map[string]quarantine.Attribute{quarantine.AttrFailureSource: {DataType: "String", StringValue: source}}
		return m
	}
	moved := msg("m1", `{"event_id":"e1"}`)
	moved.SourceARN = b.ARN
	for _, c := range []struct {
		m    ingest.Message
		want string
	}{
		{moved, b.Name},
		{declared(msg("m2", `{"event_id":"e2"}`), a.Name), a.Name},
		{declared(msg("m3", `{"event_id":"e3"}`), b.Name), b.Name},
		{msg("m4", `{"event_id":"e4"}`), "unresolved." + a.DLQName},
		{declared(msg("m5", `{"event_id":"e5"}`), "elsewhere"), "unresolved." + a.DLQName},
	} {
		out, err := q.Quarantine(context.Background(), c.m)
		if err != nil {
			t.Fatal(err)
		}
		if out.Record.Source != c.want {
			t.Errorf("message %s filed under %q, want %q", c.m.MessageID, out.Record.Source, c.want)
		}
		// A declared source is the sender's word (anyone who may send to
		// the DLQ can declare any of its sources): the history says so.
		_, isDeclared := c.m.Attributes[quarantine.AttrFailureSource]
		note := out.Record.Attempts[len(out.Record.Attempts)-1].Note
		if isDeclared && c.want != "unresolved."+a.DLQName && !strings.Contains(note, "source declared by its sender") {
			t.Errorf("message %s: declared source not noted: %q", c.m.MessageID, note)
		}
		if c.m.SourceARN != "" && strings.Contains(note, "declared") {
			t.Errorf("message %s: moved by SQS, noted %q", c.m.MessageID, note)
		}
	}
}
