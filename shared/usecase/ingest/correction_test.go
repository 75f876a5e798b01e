package ingest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

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
