package redrive_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

var operatorC = mustPrincipal("arn:aws:iam::000000000000:user/operator-c", "AIDAOPERATORC")

// parkedEnv is a source with n parked records and a service whose
// approvals live in the emulated table, as the functions keep them.
func parkedEnv(t *testing.T, n int) (*env, []string, *redrive.Service, *dynamostore.ApprovalStore) {
	t.Helper()
	e, ids := seeded(t, n)
	for _, id := range ids {
		e.change(t, id, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkManual("test@ops", "look", e.clock.Now())
		})
	}
	store := dynamostore.NewApprovalStore(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	return e, ids, e.service(nil, nil, redrive.Config{}).WithApprovals(store), store
}

func parkedReplay(e *env, approvalID string) redrive.Request {
	return redrive.Request{Source: e.src.Name, MaxMessages: 10, IncludeParked: true, Reason: "consumer fixed (CHG-12)", ApprovalID: approvalID}
}

func statuses(t *testing.T, e *env, ids []string) map[quarantine.Status]int {
	t.Helper()
	out := map[quarantine.Status]int{}
	for _, id := range ids {
		out[e.get(t, id).Status]++
	}
	return out
}

// A high-risk replay through the operator endpoint waits for a second
// person: the requester's own approval is refused with nothing written,
// another principal's runs the plan once, as the requester under the
// approval, and the same approval sent again (its answer lost) runs
// nothing more. The approval's versions are transitions the ledger's
// check accepts.
func TestAHighRiskReplayRunsOnceOnASecondPersonsApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids, svc, store := parkedEnv(t, 3)
	rep, err := redrive.RunVerified(ctx, svc, parkedReplay(e, "chg-12-parked"), operatorA)
	if err != nil || rep.Stopped != redrive.StoppedPendingApproval || rep.Approval == nil || rep.Approval.State != approval.StatePending {
		t.Fatalf("request: %+v %v", rep, err)
	}
	pending := rep.Approval
	if got := statuses(t, e, ids); got[quarantine.StatusParked] != 3 {
		t.Fatalf("a pending approval changed records: %v", got)
	}
	// Sent again after a lost answer: the same approval, not a second one.
	again, err := redrive.RunVerified(ctx, svc, parkedReplay(e, "chg-12-parked"), operatorA)
	if err != nil || again.Approval.ID != pending.ID || again.Approval.Seal != pending.Seal {
		t.Fatalf("the request sent again: %+v %v", again, err)
	}
	other := parkedReplay(e, "chg-12-parked")
	other.MaxMessages = 500
	if _, err := redrive.RunVerified(ctx, svc, other, operatorA); err == nil || !strings.Contains(err.Error(), "another request's approval") {
		t.Fatalf("another plan under the same id: %v", err)
	}
	approve := redrive.Request{Action: redrive.ActionApprove, Source: e.src.Name, ApprovalID: pending.ID, Reason: "checked the fix"}
	var fe *redrive.ForbiddenError
	if _, err := redrive.RunVerified(ctx, svc, approve, operatorA); !errors.As(err, &fe) || !strings.Contains(err.Error(), "second, different principal") {
		t.Fatalf("self-approval: %v", err)
	}
	if a, err := store.Get(ctx, e.src.Name, pending.ID); err != nil || a.Version != 1 || a.State != approval.StatePending {
		t.Fatalf("a refused self-approval wrote: %+v %v", a, err)
	}
	done, err := redrive.RunVerified(ctx, svc, approve, operatorB)
	if err != nil || done.Redriven.Count != 3 || done.Approval == nil || done.Approval.State != approval.StateExecuted ||
		done.Approval.DecidedBy.ARN != operatorB.ARN || done.Approval.Outcome == nil || !strings.Contains(done.Approval.Outcome.Summary, "redriven 3") {
		t.Fatalf("approve: %+v %v", done, err)
	}
	for _, id := range ids {
		r := e.get(t, id)
		claim := r.Attempts[len(r.Attempts)-2]
		if r.Status != quarantine.StatusRedriven || claim.Actor != operatorA.ARN || claim.Approval != pending.ID || r.RedrivenBy != operatorA.ARN {
			t.Fatalf("%s after the approved run: %s, claim %+v", id, r.Status, claim)
		}
	}
	if n := len(e.drain(t, none)); n != 3 {
		t.Fatalf("%d sent, want 3", n)
	}
	// The approval call sent again after its answer was lost runs nothing.
	retry, err := redrive.RunVerified(ctx, svc, approve, operatorB)
	if err != nil || !retry.AlreadyDecided || retry.Redriven.Count != 0 || retry.Approval.State != approval.StateExecuted {
		t.Fatalf("approve again: %+v %v", retry, err)
	}
	if _, err := redrive.RunVerified(ctx, svc, approve, operatorC); !errors.As(err, &fe) || !strings.Contains(err.Error(), "executed already") {
		t.Fatalf("a third person's approval of a used approval: %v", err)
	}
	if n := len(e.drain(t, none)); n != 0 {
		t.Fatalf("%d more sent after the approval was used", n)
	}
	// Every version is one the ledger's check accepts.
	final, err := store.Get(ctx, e.src.Name, pending.ID)
	if err != nil || final.Version != 3 {
		t.Fatalf("final approval: %+v %v", final, err)
	}
}

// Two second persons approving at once: the plan runs once.
func TestConcurrentApprovalsRunThePlanOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, svc, _ := parkedEnv(t, 4)
	rep, err := redrive.RunVerified(ctx, svc, parkedReplay(e, ""), operatorA)
	if err != nil || rep.Approval == nil {
		t.Fatalf("request: %+v %v", rep, err)
	}
	var wg sync.WaitGroup
	reps := make([]*redrive.Report, 2)
	errs := make([]error, 2)
	for i, p := range []identity.Principal{operatorB, operatorC} {
		wg.Go(func() {
			reps[i], errs[i] = redrive.RunVerified(ctx, svc, redrive.Request{Action: redrive.ActionApprove, Source: e.src.Name, ApprovalID: rep.Approval.ID}, p)
		})
	}
	wg.Wait()
	ran := 0
	for i := range reps {
		if errs[i] == nil && reps[i].Redriven.Count > 0 {
			ran++
		}
	}
	if ran != 1 {
		t.Fatalf("the plan ran %d times: %v %v", ran, errs, reps)
	}
	if n := len(e.drain(t, none)); n != 4 {
		t.Fatalf("%d sent, want 4", n)
	}
}

// An expired or rejected approval runs nothing and cannot be approved.
func TestExpiredAndRejectedApprovalsRunNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids, svc, store := parkedEnv(t, 2)
	expiring, err := redrive.RunVerified(ctx, svc, parkedReplay(e, "expires-soon"), operatorA)
	if err != nil {
		t.Fatal(err)
	}
	rejected, err := redrive.RunVerified(ctx, svc, parkedReplay(e, "gets-rejected"), operatorA)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := redrive.RunVerified(ctx, svc, redrive.Request{Action: redrive.ActionReject, Source: e.src.Name, ApprovalID: rejected.Approval.ID, Reason: "not yet"}, operatorB); err != nil || rep.Approval.State != approval.StateRejected {
		t.Fatalf("reject: %+v %v", rep, err)
	}
	e.clock.Advance(redrive.DefaultApprovalTTL)
	var fe *redrive.ForbiddenError
	for id, want := range map[string]string{expiring.Approval.ID: "expired", rejected.Approval.ID: "rejected already"} {
		_, err := redrive.RunVerified(ctx, svc, redrive.Request{Action: redrive.ActionApprove, Source: e.src.Name, ApprovalID: id}, operatorB)
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), want) {
			t.Fatalf("approve %s: %v, want %q", id, err, want)
		}
	}
	if a, err := store.Get(ctx, e.src.Name, expiring.Approval.ID); err != nil || a.Version != 1 {
		t.Fatalf("the expired approval was written: %+v %v", a, err)
	}
	if got := statuses(t, e, ids); got[quarantine.StatusParked] != 2 {
		t.Fatalf("records changed: %v", got)
	}
}

// A direct invoke never approves and never runs a high-risk action: a
// replay runs dry and says why, a correction or a policy is refused, an
// approve is refused; what it does run records "unverified:" and the
// name it gave.
func TestADirectInvokeNeverRunsAHighRiskAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids, svc, _ := parkedEnv(t, 2)
	rep, err := svc.Handle(ctx, fmt.Appendf(nil, `{"source":%q,"include_parked":true,"approve":true,"requested_by":"mallory"}`, e.src.Name))
	if err != nil || !rep.DryRun || !strings.Contains(rep.DryRunReason, "operator endpoint") || rep.RequestedBy != "unverified:mallory" {
		t.Fatalf("direct parked replay: %+v %v", rep, err)
	}
	var fe *redrive.ForbiddenError
	for _, raw := range []string{
		fmt.Sprintf(`{"action":"correct","source":%q,"ids":[%q],"payload":"{}","reason":"r","requested_by":"mallory"}`, e.src.Name, ids[0]),
		fmt.Sprintf(`{"action":"policy_add","source":%q,"policy":{"max_per_run":5,"expires_in":"1h"},"requested_by":"mallory"}`, e.src.Name),
		fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":"abcdefgh1234","requested_by":"mallory"}`, e.src.Name),
	} {
		if _, err := svc.LambdaHandler(ctx, []byte(raw)); !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a refusal", raw, err)
		}
	}
	if got := statuses(t, e, ids); got[quarantine.StatusParked] != 2 {
		t.Fatalf("records changed: %v", got)
	}
	if _, err := svc.LambdaHandler(ctx, fmt.Appendf(nil, `{"action":"unpark","source":%q,"ids":[%q],"reason":"r","requested_by":"mallory"}`, e.src.Name, ids[0])); !errors.As(err, &fe) {
		t.Fatalf("a direct unpark: %v, want a refusal (it makes a parked record replayable)", err)
	}
	if _, err := svc.LambdaHandler(ctx, fmt.Appendf(nil, `{"action":"read","source":%q,"ids":[%q],"requested_by":"mallory"}`, e.src.Name, ids[0])); err != nil {
		t.Fatal(err)
	}
	if reads := e.get(t, ids[0]).Reads; len(reads) != 1 || reads[0].Actor != "unverified:mallory" {
		t.Fatalf("a direct read recorded %+v", reads)
	}
}

// A source whose four_eyes leaves a risk out runs it on one verified
// request, and the history says so (four-eyes-off).
func TestFourEyesOffRunsOnOneRequestAndSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids, _, _ := parkedEnv(t, 1)
	e.src.FourEyes = map[quarantine.Risk]bool{quarantine.RiskLarge: true}
	svc := e.service(nil, nil, redrive.Config{})
	rep, err := redrive.RunVerified(ctx, svc, parkedReplay(e, ""), operatorA)
	if err != nil || rep.Redriven.Count != 1 || rep.Approval != nil {
		t.Fatalf("%+v %v", rep, err)
	}
	r := e.get(t, ids[0])
	if claim := r.Attempts[len(r.Attempts)-2]; claim.Approval != quarantine.FourEyesOff || claim.Actor != operatorA.ARN {
		t.Fatalf("claim %+v", claim)
	}
}

// urlEvent is the function URL event AWS delivers for p's request.
func urlEvent(t *testing.T, p *identity.Principal, body string) json.RawMessage {
	t.Helper()
	ev := events.LambdaFunctionURLRequest{Version: "2.0", Body: base64.StdEncoding.EncodeToString([]byte(body)), IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{AccountID: "000000000000", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost}}}
	if p != nil {
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			AccessKey: p.AccessKey, AccountID: p.Account, CallerID: p.UserID, UserARN: p.ARN, UserID: p.UserID}}
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The operator entry point trusts only an IAM authorizer of its own
// account, takes the requester from it, and answers HTTP.
func TestOperatorHandlerTakesTheRequesterFromTheAuthorizer(t *testing.T) {
	t.Parallel()
	e, ids, svc, _ := parkedEnv(t, 1)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{InvokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:s-operator"})
	unpark := fmt.Sprintf(`{"action":"read","source":%q,"ids":[%q]}`, e.src.Name, ids[0])
	stranger := mustPrincipal("arn:aws:iam::000000000000:user/x", "AIDAX")
	stranger.Account, stranger.ARN = "111111111111", "arn:aws:iam::111111111111:user/x"
	for name, tc := range map[string]struct {
		ev     json.RawMessage
		status int
		want   string
	}{
		"no authorizer":    {urlEvent(t, nil, unpark), http.StatusForbidden, "no IAM authorizer"},
		"another account":  {urlEvent(t, &stranger, unpark), http.StatusForbidden, "serves account 000000000000 only"},
		"a direct request": {json.RawMessage(unpark), http.StatusForbidden, "no IAM authorizer"},
		"requested_by set": {urlEvent(t, &operatorA, strings.Replace(unpark, `"ids"`, `"requested_by":"bob","ids"`, 1)), http.StatusBadRequest, "leave it out"},
		"a bad request":    {urlEvent(t, &operatorA, `{"source":1}`), http.StatusBadRequest, "malformed request"},
		"unknown approval": {urlEvent(t, &operatorB, fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":"nosuchapproval"}`, e.src.Name)), http.StatusNotFound, "names no approval"},
	} {
		resp, err := svc.OperatorHandler(ctx, tc.ev)
		if err != nil || resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.want) {
			t.Errorf("%s: %d %s %v, want %d with %q", name, resp.StatusCode, resp.Body, err, tc.status, tc.want)
		}
	}
	if r := e.get(t, ids[0]); r.ReadCount != 0 {
		t.Fatalf("a refused request changed the record: %d reads", r.ReadCount)
	}
	resp, err := svc.OperatorHandler(ctx, urlEvent(t, &operatorA, unpark))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var rep redrive.Report
	if err := json.Unmarshal([]byte(resp.Body), &rep); err != nil || rep.RequestedBy != operatorA.ARN {
		t.Fatalf("report %s %v", resp.Body, err)
	}
	if r := e.get(t, ids[0]); len(r.Reads) != 1 || r.Reads[0].Actor != operatorA.ARN {
		t.Fatalf("the read recorded %+v", r.Reads)
	}
}

// lostAnswerApprovals applies the first Replace and then answers it as a
// failed condition, as the SDK's retry of a write whose answer was lost
// does.
type lostAnswerApprovals struct {
	redrive.ApprovalStore
	lost atomic.Bool
}

func (s *lostAnswerApprovals) Replace(ctx context.Context, a *approval.Approval) error {
	if err := s.ApprovalStore.Replace(ctx, a); err != nil {
		return err
	}
	if s.lost.CompareAndSwap(false, true) {
		return approval.ErrConflict
	}
	return nil
}

// An approval whose write was applied and its answer lost still runs its
// plan, once (review finding: it once reported "already decided" and ran
// nothing, the approval spent).
func TestAnApprovalWhoseAnswerWasLostRunsThePlanOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids, _, store := parkedEnv(t, 2)
	svc := e.service(nil, nil, redrive.Config{}).WithApprovals(&lostAnswerApprovals{ApprovalStore: store})
	// The source named by its ARN: the approval keeps its name.
	req := parkedReplay(e, "")
	req.Source = e.src.ARN
	rep, err := redrive.RunVerified(ctx, svc, req, operatorA)
	if err != nil || rep.Approval == nil {
		t.Fatalf("request: %+v %v", rep, err)
	}
	done, err := redrive.RunVerified(ctx, svc, redrive.Request{Action: redrive.ActionApprove, Source: e.src.Name, ApprovalID: rep.Approval.ID}, operatorB)
	if err != nil || done.AlreadyDecided || done.Redriven.Count != 2 || done.Approval.State != approval.StateExecuted {
		t.Fatalf("approve whose answer was lost: %+v %v", done, err)
	}
	if got := statuses(t, e, ids); got[quarantine.StatusRedriven] != 2 {
		t.Fatalf("after the approval: %v", got)
	}
	if n := len(e.drain(t, none)); n != 2 {
		t.Fatalf("%d sent, want 2", n)
	}
}

// What a second person reads holds no control or format character; an
// invalid policy is refused before it waits; the same approval_id of an
// executed approval asks again under a new id.
func TestRequestsTheApproverCannotBeMisledBy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, svc, _ := parkedEnv(t, 1)
	for _, reason := range []string{"fix\r\x1b[2A\x1b[2K  summary    redrive on x", "ok\u202etxt.exe", "zero\u200bwidth"} {
		req := parkedReplay(e, "")
		req.Reason = reason
		if _, err := redrive.RunVerified(ctx, svc, req, operatorA); err == nil || !strings.Contains(err.Error(), "control or format character") {
			t.Errorf("reason %q: %v", reason, err)
		}
	}
	bad := redrive.Request{Action: redrive.ActionPolicyAdd, Source: e.src.Name, Reason: "r", Policy: &redrive.PolicySpec{Signatures: []string{"a|b|v1"}, MaxPerRun: -5, ExpiresIn: "72h"}}
	if rep, err := redrive.RunVerified(ctx, svc, bad, operatorA); err == nil {
		t.Fatalf("an invalid policy waits for approval: %+v", rep.Approval)
	}
	if _, err := runApproved(ctx, svc, parkedReplay(e, "chg-once-only")); err != nil {
		t.Fatal(err)
	}
	if _, err := redrive.RunVerified(ctx, svc, parkedReplay(e, "chg-once-only"), operatorA); err == nil || !strings.Contains(err.Error(), "executed already") {
		t.Fatalf("the request again under a used approval_id: %v", err)
	}
}
