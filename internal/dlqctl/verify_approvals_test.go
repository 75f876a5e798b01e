package dlqctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// operatorCall is what the operator endpoint hands the operator function
// for a caller AWS verified (a function URL's event with its IAM
// authorizer), run by the stack's redrive code (Service.OperatorHandler,
// the operator function's entry point).
func operatorCall(t *testing.T, svc *redrive.Service, p identity.Principal, body string) map[string]any {
	t.Helper()
	ev := map[string]any{"version": "2.0", "body": body, "isBase64Encoded": false,
		"requestContext": map[string]any{"accountId": p.Account, "requestId": "r", "http": map[string]any{"method": "POST"},
			"authorizer": map[string]any{"iam": map[string]any{"userArn": p.ARN, "accountId": p.Account, "userId": p.UserID, "accessKey": p.AccessKey}}}}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := svc.OperatorHandler(context.Background(), raw)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("operator %s %s: %d %v %s", p.ARN, body, resp.StatusCode, err, resp.Body)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// operators are the two verified principals of the four-eyes tests:
// operator-a asks, operator-b approves.
func operators(t *testing.T) (a, b identity.Principal) {
	t.Helper()
	a, err := identity.FromIAM("arn:aws:iam::000000000000:user/operator-a", "000000000000", "AIDAOPERATORA", "AKIAOPERATORA")
	if err != nil {
		t.Fatal(err)
	}
	b, err = identity.FromIAM("arn:aws:iam::000000000000:user/operator-b", "000000000000", "AIDAOPERATORB", "AKIAOPERATORB")
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// Four eyes on the embedded stack, checked by dlqctl verify. A parked
// record replayed through the operator endpoint (operator-a asks,
// operator-b approves, the plan runs as operator-a under the approval,
// all written by the redrive code with its writer key) verifies with no
// problem, online and offline. Then an insider with table write access
// claims three parked records by hand: with no approval, naming an
// approval that does not exist, and naming an approval the insider wrote
// too (sealed, approved by someone else, but not by the redrive role).
// Each is named unapproved besides its missing writer proof, online and
// offline, and the approved record is not; a claim whose entry says its
// source's four_eyes left it to one person is a note.
func TestVerifyNamesUnapprovedHighRiskActions(t *testing.T) {
	l, keys := writerLedger(t)
	ctx := context.Background()
	writerKeys := strings.Join(keys, ",")
	source := l.fns.Source
	src := l.fns.IngestConfig.Sources[source]
	a, b := operators(t)

	// Five records, as ingest writes them; operator-a parks each (not a
	// high-risk action).
	run := fmt.Sprint(time.Now().UnixNano())
	ids := map[string]string{}
	var ev events.SQSEvent
	for _, name := range []string{"approved", "none", "unknown", "forged", "off"} {
		key := "fe-" + name + "-" + run
		ids[name] = quarantine.RecordID(source, key)
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m-" + key, EventSource: "aws:sqs", EventSourceARN: l.st.QueueARNs["DeadLetterQueue"],
			Body:       `{"event_id":"` + key + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": src.ARN}})
	}
	if resp, err := l.fns.Ingest.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest: %v %v", err, resp.BatchItemFailures)
	}
	for _, id := range ids {
		operatorCall(t, l.fns.Redrive, a, fmt.Sprintf(`{"action":"park","source":%q,"ids":[%q],"reason":"look at it"}`, source, id))
	}

	// The approved replay: asked by a, pending; approved by b, it runs.
	aprID := "apr-e2e-" + run
	asked := operatorCall(t, l.fns.Redrive, a, fmt.Sprintf(`{"action":"redrive","source":%q,"ids":[%q],"include_parked":true,"reason":"fixed upstream","approval_id":%q}`,
		source, ids["approved"], aprID))
	if asked["stopped"] != redrive.StoppedPendingApproval {
		t.Fatalf("the request did not wait for a second person: %v", asked)
	}
	ran := operatorCall(t, l.fns.Redrive, b, fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":%q,"reason":"ok"}`, source, aprID))
	if rec, err := l.store.Get(ctx, ids["approved"]); err != nil || !strings.HasPrefix(rec.Attempts[len(rec.Attempts)-2].Reason, "parked record claimed with approval") ||
		rec.Attempts[len(rec.Attempts)-2].Approval != aprID {
		t.Fatalf("the approved run did not claim the parked record under its approval (%v): %v", err, ran)
	}
	l.drain()
	l.digest()
	out, errOut, code := l.run(false, "verify", "--writer-keys", writerKeys)
	if code != 0 || strings.Contains(out, "unapproved") {
		t.Fatalf("verify after the approved replay (exit %d): %s%s", code, out, errOut)
	}
	if off, code := l.offline(l.export(), "--writer-keys", writerKeys); code != 0 {
		t.Fatalf("verify --offline after the approved replay (exit %d): %s", code, off)
	}

	// The insider, with table write access and no writer key.
	plain := dynamostore.New(l.st.Clients.DynamoDB, l.table)
	claim := func(name, approvalID string) {
		t.Helper()
		cur, err := plain.Get(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		next, err := cur.ClaimParked(quarantine.WithApproval(a.Actor(), approvalID), time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.Replace(ctx, cur, next); err != nil {
			t.Fatal(err)
		}
	}
	claim("none", "")
	claim("unknown", "apr-nowhere-"+run)
	forgedID := "apr-forged-" + run
	pending, err := approval.New(approval.Request{ID: forgedID, Source: source, Action: "redrive", Risks: []quarantine.Risk{quarantine.RiskParked},
		Plan:      []byte(fmt.Sprintf(`{"action":"redrive","ids":[%q],"include_parked":true,"source":%q}`, ids["forged"], source)),
		Requester: a, Reason: "needed", TTL: time.Hour}, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	approved, err := pending.Approve(b, "ok", time.Now().Add(-30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	insiderApprovals := dynamostore.NewApprovalStore(l.st.Clients.DynamoDB, l.table)
	if err := insiderApprovals.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if err := insiderApprovals.Replace(ctx, approved); err != nil {
		t.Fatal(err)
	}
	claim("forged", forgedID)
	// A claim whose entry says its source's four_eyes leaves parked out:
	// verify cannot see the functions' configuration, so it is a note.
	claim("off", quarantine.FourEyesOff)
	l.drain()
	l.digest()

	wants := []string{
		"MISMATCH " + ids["none"] + ": unapproved: claimed a parked record without an approval",
		"MISMATCH " + ids["unknown"] + ": unapproved: claimed a parked record under approval apr-nowhere-" + run + " (change ",
		"approval apr-nowhere-" + run + " is not in the ledger",
		"MISMATCH " + ids["forged"] + ": unapproved: claimed a parked record under approval " + forgedID + " (change ",
		"approval " + forgedID + " is itself named (writer-missing)",
		"MISMATCH " + ids["none"] + ": writer-missing",
		"MISMATCH " + ids["unknown"] + ": writer-missing",
		"MISMATCH " + ids["forged"] + ": writer-missing",
		"note: " + ids["off"] + ": four-eyes-off: claimed a parked record on one person's request (change ",
	}
	out, _, code = l.run(false, "verify", "--writer-keys", writerKeys)
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify after the insider's claims (exit %d): %s", code, out)
	}
	mustContain(t, out, wants...)
	if strings.Contains(out, ids["approved"]+": unapproved") || strings.Contains(out, ids["off"]+": unapproved") {
		t.Fatalf("the approved replay, or the four-eyes-off one, is named unapproved:\n%s", out)
	}
	off, code := l.offline(l.export(), "--writer-keys", writerKeys)
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify --offline after the insider's claims (exit %d): %s", code, off)
	}
	mustContain(t, off, wants...)
	if strings.Contains(off, ids["approved"]+": unapproved") {
		t.Fatalf("offline, the approved replay is named:\n%s", off)
	}
}
