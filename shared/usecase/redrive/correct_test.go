package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

func correctRequest(e *env, id, reason, payload string) string {
	return fmt.Sprintf(`{"action":"correct","source":%q,"ids":[%q],"requested_by":"fixer@ops","reason":%q,"payload":%q}`, e.src.Name, id, reason, payload)
}

// malformed quarantines record i with an NDC the schema refuses (ndc in
// place of 12345-678-90), and returns its id and body.
func (e *env) malformed(t *testing.T, i int, ndc string) (string, string) {
	t.Helper()
	bad := strings.Replace(body(i, true), "12345-678-90", ndc, 1)
	out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: fmt.Sprintf("dlq-%d", i), Body: []byte(bad), SourceARN: e.src.ARN, ReceiveCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	return out.Record.DLQID, bad
}

// A malformed record: a correction that still fails the schema is refused
// and changes nothing; a valid one is stored beside the original, which
// stays byte-identical and sealed; the replay sends the correction, marked
// as corrected, and when it comes back it lands on the same record.
func TestCorrectionIsValidatedStoredAndReplayed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	id, bad := e.malformed(t, 1, "NDC?12345")
	svc := e.service(nil, nil, redrive.Config{})
	before := e.get(t, id)
	_, err := viaApproval(ctx, svc, []byte(correctRequest(e, id, "NDC typo", strings.Replace(bad, "NDC?12345", "12-3", 1))))
	var ce *quarantine.CorrectionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "fails the current schema: schema /ndc pattern") {
		t.Fatalf("an invalid correction: %v", err)
	}
	if strings.Contains(err.Error(), "12-3") || strings.Contains(err.Error(), id) {
		t.Fatalf("the function error, which the runtime logs, quotes the payload or the record id: %v", err)
	}
	if r := e.get(t, id); r.Version != before.Version || r.Seal != before.Seal {
		t.Fatal("a refused correction changed the record")
	}
	// Before the fix the gate holds it.
	if rr, err := svc.Run(ctx, redrive.Request{Source: e.src.Name, IDs: []string{id}, RequestedBy: "fixer@ops"}); err != nil || rr.Held.Count != 1 {
		t.Fatalf("redrive before the fix: %+v %v", rr, err)
	}
	good := body(1, true)
	rep, err := viaApproval(ctx, svc, []byte(correctRequest(e, id, "NDC typo", good)))
	if err != nil || rep.Corrected.Count != 1 || rep.Correction == nil || rep.Correction.Body != "" || rep.Correction.Actor != operatorA.ARN || rep.Correction.Approval == "" || rep.Approval == nil || rep.Approval.ID != rep.Correction.Approval {
		t.Fatalf("correct: %+v %v", rep, err)
	}
	r := e.get(t, id)
	if r.Body != bad || r.BodySHA256 != before.BodySHA256 || r.FailureClass != quarantine.ClassExhausted || len(r.Corrections) != 1 {
		t.Fatalf("after the correction: body kept %v, class %s, %d corrections", r.Body == bad, r.FailureClass, len(r.Corrections))
	}
	if orig, err := quarantine.LoadBody(ctx, e.payloads, r); err != nil || string(orig) != bad {
		t.Fatal("the original is not byte-identical")
	}

	rr, err := svc.Run(ctx, redrive.Request{Source: e.src.Name, IDs: []string{id}, RequestedBy: "fixer@ops"})
	if err != nil || rr.Redriven.Count != 1 {
		t.Fatalf("redrive: %+v %v", rr, err)
	}
	msgs := e.receive(t)
	if len(msgs) != 1 {
		t.Fatalf("receive: %d messages", len(msgs))
	}
	m := msgs[0]
	if aws.ToString(m.Body) != good {
		t.Fatalf("the replay sent %q, want the correction", aws.ToString(m.Body))
	}
	if v := m.MessageAttributes[quarantine.AttrCorrected]; aws.ToString(v.StringValue) != "1" {
		t.Fatalf("%s = %q, want 1", quarantine.AttrCorrected, aws.ToString(v.StringValue))
	}
	// The consumer fails it again: it comes back to the same record.
	if err := e.failMessage(m); err != nil {
		t.Fatal(err)
	}
	e.drain(t, func(string) bool { return true })
	if n := e.ingestDLQ(t); n != 1 {
		t.Fatalf("%d came back", n)
	}
	r = e.get(t, id)
	if r.Status != quarantine.StatusQuarantined || r.Attempts[len(r.Attempts)-1].BodySHA256 != quarantine.BodySHA256([]byte(good)) {
		t.Fatalf("the corrected replay did not come back to its record: %s", r.Status)
	}
	if _, err := e.store.Get(ctx, id+"#body-"+quarantine.BodySHA256([]byte(good))[:16]); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatalf("a corrected replay made a conflict record: %v", err)
	}
	// A second correction chains to the first and is what the next round sends.
	better := strings.Replace(good, `"lot":"LOT-0001"`, `"lot":"LOT-0001A"`, 1)
	if _, err := viaApproval(ctx, svc, []byte(correctRequest(e, id, "lot suffix", better))); err != nil {
		t.Fatal(err)
	}
	if rr, err := svc.Run(ctx, redrive.Request{Source: e.src.Name, IDs: []string{id}, RequestedBy: "fixer@ops"}); err != nil || rr.Redriven.Count != 1 {
		t.Fatalf("second redrive: %+v %v", rr, err)
	}
	msgs = e.receive(t)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != better ||
		aws.ToString(msgs[0].MessageAttributes[quarantine.AttrCorrected].StringValue) != "2" {
		t.Fatal("the second round did not send correction 2")
	}
	r = e.get(t, id)
	if r.RedriveCount != 2 || len(r.Corrections) != 2 || r.Corrections[1].FromSHA256 != r.Corrections[0].BodySHA256 || r.Body != bad {
		t.Fatalf("after two corrections: count %d, %d corrections", r.RedriveCount, len(r.Corrections))
	}
}

// Two concurrent corrections of one record: one wins, the other gets a
// clear conflict error, and the record holds exactly the winner.
func TestConcurrentCorrectionsOneWins(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	id, _ := e.malformed(t, 2, "NDC?")
	var barrier sync.WaitGroup
	barrier.Add(2)
	fixes := []string{body(2, true), strings.Replace(body(2, true), "12345-678-90", "54321-876-09", 1)}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, fix := range fixes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc := e.service(nil, &barrierStore{Store: e.store, wg: &barrier, skip: 1}, redrive.Config{})
			_, errs[i] = viaApproval(ctx, svc, []byte(correctRequest(e, id, fmt.Sprintf("fix %d", i), fix)))
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			winner = i
		case !errors.Is(err, quarantine.ErrCorrectionConflict) || !strings.Contains(err.Error(), "changed while it was being corrected"):
			t.Fatalf("correction %d: %v, want a clear conflict", i, err)
		}
	}
	if winner < 0 || errs[1-winner] == nil {
		t.Fatalf("errors %v: want exactly one winner", errs)
	}
	r := e.get(t, id)
	if len(r.Corrections) != 1 || r.Corrections[0].Body != fixes[winner] {
		t.Fatal("the record does not hold exactly the winning correction")
	}
}

// A correction that changes the event identity (new_key): its replay goes
// out under the new key, and each time the consumer fails it and it is
// dead-lettered again it comes back to the record it was corrected in, with
// its redrive count, so the cap holds across the key change and parks it.
// No record is ever opened under the new key, and the original never
// settles as RESOLVED while its replay keeps failing.
func TestNewKeyCorrectionComesBackToItsRecordAndTheCapHolds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	wrong := strings.Replace(body(7, true), `"ev-00007"`, `"ev-0007"`, 1)
	wrong = strings.Replace(wrong, "12345-678-90", "NDC?12345", 1)
	out, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "dlq-7", Body: []byte(wrong), SourceARN: e.src.ARN, ReceiveCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Record.DLQID
	fixed := body(7, true) // event_id corrected too: a new identity
	svc := e.service(nil, nil, redrive.Config{})
	req := fmt.Sprintf(`{"action":"correct","source":%q,"ids":[%q],"requested_by":"fixer@ops","reason":"wrong event id","payload":%q,"new_key":true}`, e.src.Name, id, fixed)
	if rep, err := viaApproval(ctx, svc, []byte(req)); err != nil || rep.Corrected.Count != 1 {
		t.Fatalf("correct: %+v %v", rep, err)
	}
	newKeyID := quarantine.RecordID(e.src.Name, "ev-00007")
	for round := 1; round <= cap3; round++ {
		rr, err := svc.Run(ctx, redrive.Request{Source: e.src.Name, IDs: []string{id}, RequestedBy: "fixer@ops"})
		if err != nil || rr.Redriven.Count != 1 {
			t.Fatalf("round %d: %+v %v", round, rr, err)
		}
		e.drain(t, func(string) bool { return true }) // the consumer fails it until it is dead-lettered
		if n := e.ingestDLQ(t); n != 1 {
			t.Fatalf("round %d: %d came back", round, n)
		}
		r := e.get(t, id)
		if r.Status != quarantine.StatusQuarantined || r.RedriveCount != round {
			t.Fatalf("round %d: the record is %s with count %d", round, r.Status, r.RedriveCount)
		}
		if last := r.Attempts[len(r.Attempts)-1]; last.Actor != quarantine.ActorIngest || last.BodySHA256 != quarantine.BodySHA256([]byte(fixed)) || strings.Contains(last.Note, "forged") {
			t.Fatalf("round %d: last attempt %+v", round, last)
		}
		if _, err := e.store.Get(ctx, newKeyID); !errors.Is(err, quarantine.ErrNotFound) {
			t.Fatalf("round %d: the comeback opened a record under the new key (%v)", round, err)
		}
		e.clock.Advance(time.Second)
	}
	// Settling finds nothing to resolve, and the next run parks it as poison.
	rr, err := svc.Run(ctx, redrive.Request{Source: e.src.Name, IDs: []string{id}, RequestedBy: "fixer@ops"})
	if err != nil || rr.Parked.Count != 1 || rr.Redriven.Count != 0 {
		t.Fatalf("at the cap: %+v %v", rr, err)
	}
	if r := e.get(t, id); r.Status != quarantine.StatusParked || r.FailureClass != quarantine.ClassPoison || r.RedriveCount != cap3 {
		t.Fatalf("at the cap: %s %s count %d", r.Status, r.FailureClass, r.RedriveCount)
	}
}
