package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

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
	if rep, err := svc.LambdaHandler(ctx, []byte(req)); err != nil || rep.Corrected.Count != 1 {
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
