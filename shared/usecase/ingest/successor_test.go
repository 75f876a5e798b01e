package ingest_test

import (
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
	read := mustGet(t, store, base)
	r := read.Clone()
	r.FailureReason = "nothing to see here" // written straight to the table
	if err := store.Replace(ctx, read, r); err != nil {
		t.Fatal(err)
	}
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
