package dlqctl_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/sigv4front"
	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// operatorRun runs dlqctl as the local identity who, against the operator
// endpoint ep.
func (v *inventory) operatorRun(t *testing.T, ep *lambdatest.Endpoint, who string, args ...string) (string, string, int) {
	t.Helper()
	cfg, err := ep.Config(v.st, who)
	if err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.IsTerminal = func() bool { return false }
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: v.st.Clients, AWS: cfg, Lambda: lambda.NewFromConfig(v.st.AWS),
			CloudFormation: cloudformation.NewFromConfig(v.st.AWS), STS: sts.NewFromConfig(v.st.AWS), Local: true}, nil
	}
	base := []string{"--table", v.st.Names["QuarantineTable"], "--operator-url", ep.URL}
	code := a.Main(context.Background(), append(base, args...))
	return out.String(), errw.String(), code
}

var waitingApproval = regexp.MustCompile(`approval ([a-z0-9-]+) waits`)

// parkedInventory is the template's source with n parked records.
func parkedInventory(t *testing.T, n int) (*inventory, []string) {
	t.Helper()
	v := newInventory(t)
	var ids []string
	for i := range n {
		body := fmt.Sprintf(`{"event_id":"pk-%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i)
		r := v.add(t, fmt.Sprintf("pk-m%d", i), body)
		parked, err := r.ParkManual("test", "poison", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := v.store.Replace(context.Background(), r, parked); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.DLQID)
		time.Sleep(time.Millisecond) // distinct first_seen (docs/emulators.md)
	}
	return v, ids
}

func (v *inventory) statuses(t *testing.T, ids []string) map[quarantine.Status]int {
	t.Helper()
	out := map[quarantine.Status]int{}
	for _, id := range ids {
		r, err := v.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[r.Status]++
	}
	return out
}

func (v *inventory) sourceDepth(t *testing.T) string {
	t.Helper()
	out, err := v.st.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(v.st.QueueURLs["SourceQueue"]),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"]
}

// signed posts body to ep as id (its secret replaced by secret when not
// empty), signed at the time given.
func signed(t *testing.T, ep *lambdatest.Endpoint, id sigv4front.Identity, secret string, at time.Time, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ep.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds := id.Credentials()
	if secret != "" {
		creds.SecretAccessKey = secret
	}
	if err := sigv4front.Sign(context.Background(), req, []byte(body), creds, "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// The operator endpoint on the embedded stack, as AWS fronts it: a
// request that is not signed by a known identity, signed wrongly or too
// long ago, or by someone without the operator policy, is refused before
// the function, and nothing is written; a high-risk replay waits for a
// second person; its requester cannot approve it; another operator's
// approval runs it once, as the requester, also when the approval is sent
// again after its answer was lost; and the history names both.
func TestTheOperatorEndpointVerifiesWhoActsAndAsksForASecondPerson(t *testing.T) {
	v, ids := parkedInventory(t, 3)
	_, ep := lambdatest.OperatorForTest(t, v.st, "RedriveFunction", 60*time.Second, "SOURCES="+v.sources)
	approvals := dynamostore.NewApprovalStore(v.st.Clients.DynamoDB, v.st.Names["QuarantineTable"])

	_, errOut, code := v.operatorRun(t, ep, "operator-a", "redrive", "--source", v.source, "--include-parked", "--yes", "--reason", "recall lifted (QA-118)")
	m := waitingApproval.FindStringSubmatch(errOut)
	if code != dlqctl.ExitNotExecuted || m == nil {
		t.Fatalf("a parked replay (exit %d): %s", code, errOut)
	}
	id := m[1]
	unchanged := func(step string) {
		t.Helper()
		a, err := approvals.Get(context.Background(), v.source, id)
		if err != nil || a.Version != 1 || a.State != approval.StatePending {
			t.Fatalf("%s: the approval changed: %+v %v", step, a, err)
		}
		if got := v.statuses(t, ids); got[quarantine.StatusParked] != 3 {
			t.Fatalf("%s: records changed: %v", step, got)
		}
		if d := v.sourceDepth(t); d != "0" {
			t.Fatalf("%s: %s messages sent", step, d)
		}
	}
	unchanged("the request")

	if _, errOut, code := v.operatorRun(t, ep, "operator-a", "approvals", "approve", "--source", v.source, id); code != 1 || !strings.Contains(errOut, "second, different principal") {
		t.Fatalf("a self-approval (exit %d): %s", code, errOut)
	}
	unchanged("a self-approval")
	if _, errOut, code := v.operatorRun(t, ep, "auditor", "approvals", "approve", "--source", v.source, id); code != 1 || !strings.Contains(errOut, "refused the request: 403") {
		t.Fatalf("the auditor's approval (exit %d): %s", code, errOut)
	}
	unchanged("the auditor's approval")

	b, err := ep.Identity("operator-b")
	if err != nil {
		t.Fatal(err)
	}
	approve := fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":%q}`, v.source, id)
	unknown := b
	unknown.AccessKeyID = "AKIAUNKNOWNKEY000000"
	for name, tc := range map[string]struct {
		id     sigv4front.Identity
		secret string
		at     time.Time
		want   string
	}{
		"a bad signature":      {b, "not-the-secret-of-operator-b-000000000000", time.Now(), "signature we calculated does not match"},
		"an unknown key":       {unknown, "", time.Now(), "security token included in the request is invalid"},
		"an expired signature": {b, "", time.Now().Add(-10 * time.Minute), "Signature expired"},
	} {
		status, body := signed(t, ep, tc.id, tc.secret, tc.at, approve)
		if status != http.StatusForbidden || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", name, status, body)
		}
		unchanged(name)
	}

	out, errOut, code := v.operatorRun(t, ep, "operator-b", "approvals", "approve", "--source", v.source, id, "--reason", "checked the fix")
	if code != 0 || !strings.Contains(out, "approval "+id+" approved") || !strings.Contains(out, "redriven 3,") {
		t.Fatalf("operator-b's approval (exit %d): %s%s", code, out, errOut)
	}
	if got := v.statuses(t, ids); got[quarantine.StatusRedriven] != 3 {
		t.Fatalf("after the approval: %v", got)
	}
	a, err := approvals.Get(context.Background(), v.source, id)
	if err != nil || a.State != approval.StateExecuted || a.DecidedBy.ARN != b.ARN || !strings.HasSuffix(a.RequestedBy.ARN, ":user/operator-a") {
		t.Fatalf("the approval after its run: %+v %v", a, err)
	}
	for _, rid := range ids {
		r, _ := v.store.Get(context.Background(), rid)
		claim := r.Attempts[len(r.Attempts)-2]
		if claim.Actor != a.RequestedBy.ARN || claim.Approval != id {
			t.Fatalf("%s's claim: %+v", rid, claim)
		}
	}
	// The approval sent again, as after a lost answer: nothing more runs.
	status, body := signed(t, ep, b, "", time.Now(), approve)
	if status != http.StatusOK || !strings.Contains(body, `"already_decided":true`) {
		t.Fatalf("the approval sent again: %d %s", status, body)
	}
	if d := v.sourceDepth(t); d != "3" {
		t.Fatalf("%s messages in the source queue, want 3: the plan ran more than once", d)
	}
	out, _, code = v.operatorRun(t, ep, "auditor", "approvals", "show", "--source", v.source, id)
	if code != 0 || !strings.Contains(out, "executed") || !strings.Contains(out, b.ARN) || !strings.Contains(out, "redriven 3") {
		t.Fatalf("approvals show (exit %d):\n%s", code, out)
	}
}

// An approval that expired runs nothing.
func TestAnExpiredApprovalRunsNothing(t *testing.T) {
	v, ids := parkedInventory(t, 1)
	_, ep := lambdatest.OperatorForTest(t, v.st, "RedriveFunction", 60*time.Second, "SOURCES="+v.sources, "APPROVAL_TTL_SECONDS=1")
	_, errOut, code := v.operatorRun(t, ep, "operator-a", "redrive", "--source", v.source, "--include-parked", "--yes", "--reason", "recall lifted (QA-118)")
	m := waitingApproval.FindStringSubmatch(errOut)
	if code != dlqctl.ExitNotExecuted || m == nil {
		t.Fatalf("a parked replay (exit %d): %s", code, errOut)
	}
	time.Sleep(1500 * time.Millisecond) // past the one-second expiry
	if _, errOut, code := v.operatorRun(t, ep, "operator-b", "approvals", "approve", "--source", v.source, m[1]); code != 1 || !strings.Contains(errOut, "expired") {
		t.Fatalf("approving an expired approval (exit %d): %s", code, errOut)
	}
	if got := v.statuses(t, ids); got[quarantine.StatusParked] != 1 {
		t.Fatalf("records changed: %v", got)
	}
	out, _, _ := v.operatorRun(t, ep, "operator-b", "approvals", "ls", "--source", v.source, "--all")
	if !strings.Contains(out, m[1]+"  expired") {
		t.Fatalf("approvals ls --all:\n%s", out)
	}
}
