package redrive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

func operatorRequest(e *env, action, id, reason string) []byte {
	r := ""
	if reason != "" {
		r = fmt.Sprintf(`,"reason":%q`, reason)
	}
	return fmt.Appendf(nil, `{"action":%q,"source":%q,"ids":[%q],"requested_by":"alice@ops"%s}`, action, e.src.Name, id, r)
}

// loggedService is e's service with its log lines in the returned buffer.
func (e *env) loggedService(store quarantine.Store) (*redrive.Service, *bytes.Buffer) {
	var logs bytes.Buffer
	if store == nil {
		store = e.store
	}
	return redrive.New(store, e.lister, e.payloads, stack.Clients.SQS, map[string]*quarantine.Source{e.src.Name: e.src}, e.clock.Now,
		slog.New(slog.NewJSONHandler(&logs, nil)), redrive.Config{}).WithApprovals(memstore.NewApprovals()), &logs
}

// Park and unpark through the function: one sealed version each, the
// operator and reason in the history, the report's record without payload
// values; a park of a parked record is refused by its status and changes
// nothing; a missing record is named by position only.
func TestParkAndUnparkThroughTheFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 1)
	id := ids[0]
	svc, logs := e.loggedService(nil)
	before := e.get(t, id)
	rep, err := svc.LambdaHandler(ctx, operatorRequest(e, "park", id, "needs a human"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.get(t, id)
	last := r.Attempts[len(r.Attempts)-1]
	if r.Status != quarantine.StatusParked || r.Version != before.Version+1 || last.Actor != "unverified:alice@ops" || !strings.Contains(last.Reason, "needs a human") {
		t.Fatalf("after park: %s v%d, last %+v", r.Status, r.Version, last)
	}
	if rep.Record == nil || rep.Record.Status != quarantine.StatusParked || rep.Record.Body != "" || rep.Record.Seal != r.Seal || rep.Payload != nil {
		t.Fatalf("park report: %+v", rep.Record)
	}
	_, err = svc.LambdaHandler(ctx, operatorRequest(e, "park", id, "again"))
	var re *redrive.RequestError
	if !errors.As(err, &re) || err.Error() != "invalid redrive request: ids[0] is PARKED: cannot park it" {
		t.Fatalf("park twice: %v", err)
	}
	if e.get(t, id).Version != r.Version {
		t.Fatal("a refused park changed the record")
	}
	// Unparking is high-risk (a parked record becomes replayable): asked
	// and approved through the operator endpoint.
	rep, err = viaApproval(ctx, svc, operatorRequest(e, "unpark", id, "fixed upstream"))
	if err != nil || rep.Record.Status != quarantine.StatusQuarantined || rep.RedriveCapBefore != 0 {
		t.Fatalf("unpark: %+v %v", rep, err)
	}
	if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || !strings.Contains(r.Attempts[len(r.Attempts)-1].Reason, "fixed upstream") {
		t.Fatalf("after unpark: %s", r.Status)
	}
	if _, err := viaApproval(ctx, svc, operatorRequest(e, "unpark", id, "twice")); err == nil || !strings.Contains(err.Error(), "ids[0] is QUARANTINED: cannot unpark it") {
		t.Fatalf("unpark of a quarantined record: %v", err)
	}
	if _, err := svc.LambdaHandler(ctx, operatorRequest(e, "park", e.src.Name+"#nope", "r")); !errors.As(err, &re) || !strings.Contains(err.Error(), "ids[0] names no record") {
		t.Fatalf("park of no record: %v", err)
	}
	if strings.Contains(logs.String(), id) || strings.Contains(logs.String(), "ev-0") || !strings.Contains(logs.String(), `"action":"park"`) {
		t.Fatalf("the log names the record or lacks the action:\n%s", logs)
	}
}

// The request of an operator action: exactly one id, a reason for park
// and unpark, no dry run, no payload or new key, and no reason on a read.
func TestOperatorRequestValidation(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"action":"park","source":"s","ids":["s#a","s#b"],"reason":"r","requested_by":"a"}`:            "park needs exactly one id in ids",
		`{"action":"read","source":"s","requested_by":"a"}`:                                             "read needs exactly one id in ids",
		`{"action":"park","source":"s","ids":["s#a"],"requested_by":"a"}`:                               "park needs a reason",
		`{"action":"unpark","source":"s","ids":["s#a"],"reason":" ","requested_by":"a"}`:                "unpark needs a reason",
		`{"action":"park","source":"s","ids":["s#a"],"reason":"r","dry_run":true,"requested_by":"a"}`:   "park has no dry run",
		`{"action":"read","source":"s","ids":["s#a"],"reason":"r","requested_by":"a"}`:                  "reason to correct, redrive, park, unpark",
		`{"action":"unpark","source":"s","ids":["s#a"],"reason":"r","payload":"{}","requested_by":"a"}`: "payload and new_key belong to action correct",
		`{"action":"read","source":"s","ids":["s#a"]}`:                                                  "requested_by is required",
		`{"action":"peek","source":"s","ids":["s#a"],"requested_by":"a"}`:                               `action "peek" is not redrive, settle, correct, policies, park, unpark, read, policy_add, policy_revoke, policy_resume, approve or reject`,
	} {
		var re *redrive.RequestError
		if _, err := redrive.ParseRequest([]byte(raw)); !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	for _, raw := range []string{
		`{"action":"park","source":"s","ids":["s#a"],"reason":"r","requested_by":"a"}`,
		`{"action":"unpark","source":"s","ids":["s#a"],"reason":"r","requested_by":"a"}`,
		`{"action":"read","source":"s","ids":["s#a"],"requested_by":"a"}`,
	} {
		if _, err := redrive.ParseRequest([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// A park, unpark or read of a record changed behind its seal holds it as
// found and is refused: nothing is re-sealed, no read is recorded.
func TestOperatorActionsHoldATamperedRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, action := range []string{"park", "unpark", "read"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			e, ids := seeded(t, 1)
			id := ids[0]
			if action == "unpark" {
				e.change(t, id, func(r *quarantine.Record) (*quarantine.Record, error) {
					return r.ParkManual("test", "look", e.clock.Now())
				})
			}
			tamper(t, id, func(r *quarantine.Record) { r.RedriveCap = 100 })
			before := rawItem(t, id)
			svc, logs := e.loggedService(nil)
			reason := "look"
			if action == "read" {
				reason = ""
			}
			var rep *redrive.Report
			var err error
			if action == "unpark" {
				rep, err = viaApproval(ctx, svc, operatorRequest(e, action, id, reason))
			} else {
				rep, err = svc.LambdaHandler(ctx, operatorRequest(e, action, id, reason))
			}
			var he *redrive.HeldError
			if !errors.As(err, &he) || he.Reason != "seal_mismatch" || !errors.Is(err, quarantine.ErrHeld) || rep != nil {
				t.Fatalf("%s of a tampered record: %+v %v", action, rep, err)
			}
			unchangedButHeld(t, id, before, "seal_mismatch")
			if strings.Contains(logs.String(), "ev-0") {
				t.Fatalf("the log carries the payload:\n%s", logs)
			}
		})
	}
}

// A read records exactly one read and returns the payload of the version
// written (body, attributes, correction bodies), the claim-checked body
// loaded from S3; no log line carries a payload value.
func TestReadRecordsTheReadAndReturnsThePayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	q := ingest.NewQuarantiner(e.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{e.src.Name: e.src}, BodyInlineMax: 64})
	secret := strings.Replace(body(3, true), "LOT-0003", "LOT-SECRET-77", 1)
	out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m1", Body: []byte(secret), SourceARN: e.src.ARN, ReceiveCount: 2,
		Attributes: map[string]quarantine.Attribute{"tenant": {DataType: "String", StringValue: "TENANT-SECRET"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Record.DLQID
	if out.Record.BodyRef == nil {
		t.Fatal("the test needs a claim-checked body")
	}
	svc, logs := e.loggedService(nil)
	rep, err := svc.LambdaHandler(ctx, operatorRequest(e, "read", id, ""))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Payload == nil || string(rep.Payload.Body) != secret || rep.Payload.Attributes["tenant"].StringValue != "TENANT-SECRET" {
		t.Fatalf("read payload: %+v", rep.Payload)
	}
	r := e.get(t, id)
	if r.ReadCount != 1 || len(r.Reads) != 1 || r.Reads[0].Actor != "unverified:alice@ops" || rep.Record.Seal != r.Seal || quarantine.Verify(rep.Record) != nil {
		t.Fatalf("the read is not recorded once, or the report's record is not the version written: %d %+v", r.ReadCount, r.Reads)
	}
	for _, v := range []string{"LOT-SECRET-77", "TENANT-SECRET", id} {
		if strings.Contains(logs.String(), v) {
			t.Fatalf("a log line carries %q:\n%s", v, logs)
		}
	}
}

// The write that records a read is applied and its answer lost: the
// store recognizes its own write, and the record holds exactly one read.
func TestReadWhoseWriteAnswerWasLostRecordsOneRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 1)
	// The record write is one of these operations (a transaction until
	// the ledger made it a plain conditional put): lose the first answer
	// of whichever it is.
	cfg := stack.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	put := &faults.LoseAnswers{Base: base, Target: "DynamoDB_20120810.PutItem", N: 1}
	tx := &faults.LoseAnswers{Base: put, Target: "DynamoDB_20120810.TransactWriteItems", N: 1}
	cfg.HTTPClient = tx
	store := dynamostore.New(awsclients.New(cfg, awsclients.Options{Local: true}).DynamoDB, stack.Names["QuarantineTable"])
	svc, _ := e.loggedService(store)
	rep, err := svc.LambdaHandler(ctx, operatorRequest(e, "read", ids[0], ""))
	if err != nil {
		t.Fatal(err)
	}
	if n := put.Lost() + tx.Lost(); n != 1 {
		t.Fatalf("%d answers lost, want 1", n)
	}
	r := e.get(t, ids[0])
	if r.ReadCount != 1 || len(r.Reads) != 1 || rep.Record.Version != r.Version || string(rep.Payload.Body) != body(0, true) {
		t.Fatalf("after a lost answer: %d reads (%d listed), report v%d, stored v%d", r.ReadCount, len(r.Reads), rep.Record.Version, r.Version)
	}
}

// A payload that does not fit in a synchronous Lambda response is refused
// with its size: before any write when its sealed sizes already say so,
// and after the read was recorded when only the loaded payload says so;
// never a cut-short answer.
func TestReadOfAnOversizedPayloadErrorsClearly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	q := ingest.NewQuarantiner(e.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{e.src.Name: e.src}})
	add := func(msgID string, n int, attrs map[string]quarantine.Attribute) string {
		big := `{"event_id":"` + msgID + `","pad":"` + strings.Repeat("x", n) + `"}`
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: msgID, Body: []byte(big), SourceARN: e.src.ARN, ReceiveCount: 2, Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return out.Record.DLQID
	}
	svc, _ := e.loggedService(nil)
	// 5 MB: 6.7 MB in base64.
	id := add("big", 5<<20, nil)
	rep, err := svc.LambdaHandler(ctx, operatorRequest(e, "read", id, ""))
	var te *redrive.TooLargeError
	if !errors.As(err, &te) || te.Recorded || te.Bytes <= redrive.MaxResponseBytes || rep != nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("needs %d bytes", te.Bytes)) || !strings.Contains(err.Error(), "nothing was recorded") {
		t.Fatalf("read of 5 MB: %+v %v", rep, err)
	}
	if r := e.get(t, id); r.ReadCount != 0 {
		t.Fatalf("a refused read was recorded: %d", r.ReadCount)
	}
	// 4.6 MB fits by its sealed size; with a 300 KB attribute it does not.
	id = add("edge", 4600<<10, map[string]quarantine.Attribute{"blob": {DataType: "Binary", BinaryValue: bytes.Repeat([]byte{7}, 300<<10)}})
	_, err = svc.LambdaHandler(ctx, operatorRequest(e, "read", id, ""))
	if !errors.As(err, &te) || !te.Recorded || te.Bytes <= redrive.MaxResponseBytes || !strings.Contains(err.Error(), "the read was recorded, nothing was returned") {
		t.Fatalf("read of 4.6 MB and a 300 KB attribute: %v", err)
	}
}

// An unpark of a poison record at its cap raises the cap by one and says
// from what: one more replay before it is parked again.
func TestUnparkAtTheCapReportsTheRaise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 1)
	id := ids[0]
	r := e.get(t, id)
	r.RedriveCount = r.RedriveCap // as if replayed cap times (re-sealed in place: a transition refuses a record that does not verify)
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	p, err := r.ParkPoison("test", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(ctx, r, p); err != nil {
		t.Fatal(err)
	}
	svc, _ := e.loggedService(nil)
	rep, err := viaApproval(ctx, svc, operatorRequest(e, "unpark", id, "one more try"))
	if err != nil || rep.RedriveCapBefore != cap3 || rep.Record.RedriveCap != cap3+1 || rep.Record.FailureClass != quarantine.ClassExhausted {
		t.Fatalf("unpark at the cap: %+v %v", rep, err)
	}
}
