package template_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
)

// asPerson returns a copy of s with a role that has only the managed
// policy policyID attached: decide then evaluates a person's calls under
// that policy, the bucket, queue and key policies included.
func asPerson(s *stack, policyID string) (*stack, string) {
	c := s.clone()
	const role = "PersonUnderTest"
	c.resources[role] = map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{
		"ManagedPolicyArns": []any{s.env.StackName + "-" + policyID}}}
	return c, role
}

// personFindings returns one finding per authorization behind the recorded
// calls (with the KMS uses they imply) that the policy does not allow.
func personFindings(s *stack, policyID string, calls []request) []string {
	c, role := asPerson(s, policyID)
	var out []string
	seen := map[string]bool{}
	for _, q0 := range calls {
		for _, q := range c.withKMS(q0) {
			ctx := map[string]string{"aws:principalarn": c.roleARN(role), "aws:principalaccount": c.env.Account, "aws:principaltype": "AssumedRole"}
			maps.Copy(ctx, q.Context)
			q.Context = ctx
			if strings.HasPrefix(q.Resource, "arn:aws:kms:") {
				q.Resource = c.key(q.Resource)
			}
			if why := c.decide(role, q); why != "" {
				if f := policyID + ": " + q.String() + ": " + why; !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// checkVerifyAsAuditor runs dlqctl verify against the stack (whose records
// TestEveryCallIsGrantedByItsRole left: claim-checked bodies, archived
// stubs, a held record) on recorded clients, and checks every call it makes
// against AuditorPolicy; the payload reads among them are what
// OperatorPolicy must not allow.
func checkVerifyAsAuditor(t *testing.T, st *embedded.Stack, stk *stack) {
	t.Helper()
	rec := &recorder{fn: "dlqctl verify", region: st.Env.Region, account: st.Env.Account}
	cfg := st.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, rec.option)
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.Now = time.Now
	a.IsTerminal = func() bool { return false }
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: awsclients.New(cfg, awsclients.Options{Local: true}), Lambda: lambda.NewFromConfig(cfg), Local: true}, nil
	}
	ledgerFn, err := st.Template.GetServerlessFunctionWithName("LedgerFunction")
	if err != nil {
		t.Fatal(err)
	}
	code := a.Main(context.Background(), []string{"--table", st.Names["QuarantineTable"], "--payload-bucket", st.Names["PayloadBucket"],
		"--ledger-bucket", st.Names["ArchiveBucket"], "--signing-key", ledgerFn.Environment.Variables["SIGNING_KEY_ID"], "verify"})
	if !strings.Contains(out.String(), "verified ") {
		t.Fatalf("dlqctl verify (exit %d): %s %s", code, out.String(), errw.String())
	}
	payload := "arn:aws:s3:::" + st.Names["PayloadBucket"] + "/"
	if !slices.ContainsFunc(rec.requests, func(q request) bool { return strings.HasPrefix(q.Resource, payload) }) {
		t.Fatalf("dlqctl verify read no claim-checked body: that path was not driven (%s)", out.String())
	}
	for _, f := range personFindings(stk, "AuditorPolicy", rec.requests) {
		t.Error(f)
	}
	actions := map[string]bool{}
	for _, q := range rec.requests {
		actions[q.Action] = true
	}
	t.Logf("dlqctl verify uses %v", slices.Sorted(maps.Keys(actions)))
	// Without its payload statement the auditor could not check the bodies.
	c := stk.clone()
	doc := props(c.resources["AuditorPolicy"])["PolicyDocument"].(map[string]any)
	doc["Statement"] = slices.DeleteFunc(doc["Statement"].([]any), func(st any) bool { return st.(map[string]any)["Sid"] == "ReadClaimCheckedBodies" })
	wantFinding(t, personFindings(c, "AuditorPolicy", rec.requests), "AuditorPolicy: s3:GetObjectVersion on "+payload, "no statement")
	// The operator reads payloads only through the redrive function.
	for _, q := range rec.requests {
		if strings.HasPrefix(q.Resource, payload) && len(personFindings(stk, "OperatorPolicy", []request{q})) == 0 {
			t.Errorf("OperatorPolicy allows dlqctl verify's payload read %s", q)
		}
	}
}
