package redrive_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// unchangedButHeld checks that a held item is exactly as it was found
// (every attribute), plus the hold attributes, and still fails Verify.
func unchangedButHeld(t *testing.T, id string, before map[string]ddbtypes.AttributeValue, reason string) {
	t.Helper()
	after := rawItem(t, id)
	h, ok := dynamostore.HoldOf(after)
	if !ok || h.Reason != reason {
		t.Fatalf("%s: hold %+v %v, want reason %s", id, h, ok, reason)
	}
	delete(after, dynamostore.HoldAttr)
	delete(after, dynamostore.HoldAtAttr)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: the item changed: %v → %v", id, attrKeys(before), attrKeys(after))
	}
	ra, rb := mustUnmarshal(t, after), mustUnmarshal(t, before)
	if ra.Seal != rb.Seal || ra.Version != rb.Version || ra.Body != rb.Body || ra.RedriveCap != rb.RedriveCap ||
		ra.RedriveCount != rb.RedriveCount || ra.Status != rb.Status || len(ra.Attempts) != len(rb.Attempts) || ra.PrevSeal != rb.PrevSeal {
		t.Fatalf("%s: the evidence changed:\n%+v\n%+v", id, ra, rb)
	}
	if quarantine.Verify(ra) == nil {
		t.Fatalf("%s verifies after the run: the forgery was laundered", id)
	}
}

func attrKeys(m map[string]ddbtypes.AttributeValue) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A record whose sealed field, or whose inline body, was changed in the
// table is never sent and never re-sealed: the run holds it as found, the
// report names it, the hold counter counts it once, and the next run does
// not list it, so it takes no place in max_messages and the records behind
// it are replayed.
func TestTamperedRecordIsHeldNeverSentOrResealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 6)
	field, body := ids[0], ids[1]
	tamper(t, field, func(r *quarantine.Record) { r.RedriveCap, r.FailureClass = 100, quarantine.ClassExhausted })
	tamper(t, body, func(r *quarantine.Record) { r.Body = strings.Replace(r.Body, "-5", "-500", 1) })
	before := map[string]map[string]ddbtypes.AttributeValue{field: rawItem(t, field), body: rawItem(t, body)}
	svc := e.service(nil, nil, redrive.Config{})

	// A dry run reports them and writes nothing.
	req := e.request(3)
	req.DryRun = true
	dry, err := svc.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Integrity.IDs, []string{field, body}) && !slices.Equal(dry.Integrity.IDs, []string{body, field}) {
		t.Fatalf("dry run integrity %+v", dry.Integrity)
	}
	if _, held := dynamostore.HoldOf(rawItem(t, field)); held {
		t.Fatal("a dry run held a record")
	}

	first, err := svc.Run(ctx, e.request(3))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(first.Integrity.IDs)
	want := []string{field, body}
	slices.Sort(want)
	if !slices.Equal(first.Integrity.IDs, want) || first.Redriven.Count != 1 || first.Failed.Count != 0 {
		t.Fatalf("first run: integrity %v, redriven %d, failed %d", first.Integrity.IDs, first.Redriven.Count, first.Failed.Count)
	}
	// The next run does not see them: its 3 are the 3 behind them.
	second, err := svc.Run(ctx, e.request(3))
	if err != nil {
		t.Fatal(err)
	}
	if second.Integrity.Count != 0 || second.Redriven.Count != 3 || second.Remaining != 0 || second.Stopped != redrive.StoppedDone {
		t.Fatalf("second run: %+v", second)
	}
	var sent []string
	for _, m := range e.drain(t, none) {
		sent = append(sent, m.recordID)
	}
	slices.Sort(sent)
	if !slices.Equal(sent, ids[2:]) {
		t.Fatalf("sent %v, want exactly %v", sent, ids[2:])
	}
	unchangedButHeld(t, field, before[field], "seal_mismatch")
	unchangedButHeld(t, body, before[body], "body_mismatch")
	if n := storetest.HeldCount(t, countstream.NewReader(stack), e.src.Name); n != 2 {
		t.Fatalf("held counter %d, want 2", n)
	}
	// A run that names a held record explicitly still refuses it, and
	// counts nothing twice.
	explicit := e.request(10)
	explicit.IDs = []string{field}
	rep, err := svc.Run(ctx, explicit)
	if err != nil || rep.Integrity.Count != 1 || rep.Redriven.Count != 0 {
		t.Fatalf("explicit run: %+v %v", rep, err)
	}
	if n := storetest.HeldCount(t, countstream.NewReader(stack), e.src.Name); n != 2 {
		t.Fatalf("held counter %d after a second hold, want 2", n)
	}
	var held []string
	page, err := e.lister.List(ctx, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: e.src.Name, Held: true})
	for err == nil {
		held = append(held, page.IDs...)
		if page.Cursor == "" {
			break
		}
		page, err = e.lister.List(ctx, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: e.src.Name, Held: true, Cursor: page.Cursor})
	}
	slices.Sort(held)
	if err != nil || !slices.Equal(held, want) {
		t.Fatalf("held listing %v %v", held, err)
	}
}

// A standing policy goes through the same path: it never launders a
// tampered record, and its later runs replay the records behind it.
func TestStandingPolicyNeverLaundersATamperedRecord(t *testing.T) {
	e := newEnv(t, false)
	ids := e.seedReason(t, 0, 4, "downstream 503")
	forged := ids[0]
	tamper(t, forged, func(r *quarantine.Record) { r.RedriveCap = 50 })
	before := rawItem(t, forged)
	svc, ps, _ := e.policies(t, nil)
	p := e.addPolicy(t, ps, policy.Spec{Signatures: []string{quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)},
		MaxPerRun: 2, ExpiresAt: e.clock.Now().Add(time.Hour), MinSample: 1000})
	var sent []string
	for run, want := range []int{1, 2, 0} {
		rep := applyPolicies(t, svc, e)
		if o := outcome(rep, p.ID); o.Outcome != "ran" || o.Redriven != want {
			t.Fatalf("run %d: %+v, want %d redriven", run+1, o, want)
		}
		if (run == 0) != slices.Contains(rep.Integrity.IDs, forged) {
			t.Fatalf("run %d: integrity %v", run+1, rep.Integrity.IDs)
		}
		for _, m := range e.drain(t, none) {
			sent = append(sent, m.recordID)
		}
	}
	slices.Sort(sent)
	if !slices.Equal(sent, ids[1:]) {
		t.Fatalf("sent %v, want %v", sent, ids[1:])
	}
	unchangedButHeld(t, forged, before, "seal_mismatch")
	if n := storetest.HeldCount(t, countstream.NewReader(stack), e.src.Name); n != 1 {
		t.Fatalf("held counter %d, want 1", n)
	}
}

// A claim-checked body whose object no longer matches body_sha256 is set
// aside unclaimed, not claimed and released on every run; the same for a
// REDRIVEN record due to settle, and for a parked record at its cap.
func TestClaimCheckedBodyMismatchIsHeldNotReleased(t *testing.T) {
	ctx := context.Background()
	store, payloads := memstore.New(), memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	sch, version, err := schemas.Compile("inventory-movement.v1")
	if err != nil {
		t.Fatal(err)
	}
	src := &quarantine.Source{Name: "inv", ARN: "arn:aws:sqs:us-east-1:000000000000:inv", IdempotencyPointer: "/event_id", Schema: sch, SchemaVersion: version, RedriveCap: cap3}
	q := ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
	big := strings.Replace(body(1, true), `"occurred_at"`, `"note":"`+strings.Repeat("x", 350<<10)+`","occurred_at"`, 1)
	var ids []string
	for i, b := range []string{big, body(2, true), body(3, true)} {
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m" + string(rune('0'+i)), Body: []byte(b), SourceARN: src.ARN, ReceiveCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		clk.Advance(time.Millisecond)
	}
	r, _ := store.Get(ctx, ids[0])
	if r.BodyRef == nil {
		t.Fatal("the big body is not claim-checked")
	}
	payloads.Overwrite(r.BodyRef.Key, []byte(strings.Replace(big, "-5", "-500", 1)))
	sender := &countingSender{}
	svc := redrive.New(store, store, payloads, sender, map[string]*quarantine.Source{src.Name: src}, clk.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: 1000})
	for run := range 2 {
		rep, err := svc.Run(ctx, redrive.Request{Source: src.Name, RequestedBy: "ops", MaxMessages: 2})
		if err != nil {
			t.Fatal(err)
		}
		if wantHeld := run == 0; wantHeld != slices.Contains(rep.Integrity.IDs, ids[0]) || rep.Redriven.Count != 1 || rep.Failed.Count != 0 {
			t.Fatalf("run %d: %+v", run+1, rep)
		}
	}
	if slices.Contains(sender.entries, ids[0]) || len(sender.entries) != 2 {
		t.Fatalf("sent %v", sender.entries)
	}
	after, _ := store.Get(ctx, ids[0])
	if h, ok := store.HoldOf(ids[0]); !ok || h.Reason != "payload_mismatch" || h.Version != r.Version || after.Seal != r.Seal || after.Status != quarantine.StatusQuarantined {
		t.Fatalf("hold %+v %v; record %s v%d", h, ok, after.Status, after.Version)
	}

	// A REDRIVEN record tampered before it settles is held, not settled.
	store.Tamper(ids[1], func(r *quarantine.Record) { r.RedriveCount = 0 })
	clk.Advance(time.Hour)
	rep, err := svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: src.Name, RequestedBy: "schedule:settle"})
	if err != nil || rep.Settled.Count != 1 || !slices.Equal(rep.Integrity.IDs, ids[1:2]) {
		t.Fatalf("settle: %+v %v", rep, err)
	}
	if got, _ := store.Get(ctx, ids[1]); got.Status != quarantine.StatusRedriven || quarantine.Verify(got) == nil {
		t.Fatalf("tampered redriven record %s", got.Status)
	}
	if n := storetest.HeldCount(t, store, src.Name); n != 2 {
		t.Fatalf("held counter %d, want 2", n)
	}
}

// A correction of a tampered record is refused, and the record is held as
// found: a correction never re-seals a forgery.
func TestCorrectionOfATamperedRecordHoldsIt(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	id, _ := e.malformed(t, 1, "NDC?12345")
	tamper(t, id, func(r *quarantine.Record) { r.RedriveCap = 40 })
	before := rawItem(t, id)
	svc := e.service(nil, nil, redrive.Config{})
	_, err := viaApproval(ctx, svc, []byte(correctRequest(e, id, "NDC typo", body(1, true))))
	if !errors.Is(err, quarantine.ErrHeld) || strings.Contains(err.Error(), id) {
		t.Fatalf("correction of a tampered record: %v", err)
	}
	unchangedButHeld(t, id, before, "seal_mismatch")
}
