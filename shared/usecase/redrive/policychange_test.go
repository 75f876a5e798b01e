package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// addRequest is a policy_add of a narrow policy of e's source (policy_id
// "" lets the function choose it).
func addRequest(e *env, id, note string) []byte {
	pid := ""
	if id != "" {
		pid = fmt.Sprintf(`"policy_id":%q,`, id)
	}
	return fmt.Appendf(nil, `{"action":"policy_add","source":%q,%s"requested_by":"lead@ops","policy":{"signatures":["consumer|downstream 503|v1"],"max_per_run":5,"expires_at":%q,"note":%q}}`,
		e.src.Name, pid, e.clock.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), note)
}

func changeRequest(e *env, action, id, reason string) []byte {
	return fmt.Appendf(nil, `{"action":%q,"source":%q,"policy_id":%q,"reason":%q,"requested_by":"cso@ops"}`, action, e.src.Name, id, reason)
}

// The policy actions create, revoke and resume a policy under the
// function's role: validated as the domain validates, the requester in the
// sealed history, the version written in the report; a refused change
// writes nothing and says why whole.
func TestPolicyActionsThroughTheFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	svc, ps, _ := e.policies(t, nil)
	rep, err := viaApproval(ctx, svc, addRequest(e, "", "INC-7"))
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Policy
	got, err := ps.Get(ctx, e.src.Name, p.ID)
	if err != nil || got.Seal != p.Seal || got.Version != 1 || got.CreatedBy != operatorA.ARN || got.History[0].Approval != rep.Approval.ID || got.State != policy.StateActive ||
		got.MaxPerRun != 5 || got.History[0].Note != "INC-7" || rep.Action != redrive.ActionPolicyAdd {
		t.Fatalf("created %+v, stored %+v %v", p, got, err)
	}
	// The domain's validation, whole: a poison policy, an unbounded one.
	bad := strings.Replace(string(addRequest(e, "", "x")), `"signatures":["consumer|downstream 503|v1"],`, `"classes":["poison"],`, 1)
	_, err = viaApproval(ctx, svc, []byte(bad))
	var pe *policy.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "exhausted records only") || !strings.Contains(err.Error(), "must be narrow") {
		t.Fatalf("a poison, unbounded policy: %v", err)
	}
	if pols, _ := ps.List(ctx, e.src.Name); len(pols) != 1 {
		t.Fatalf("%d policies after a refused add", len(pols))
	}

	// Resume of an active policy is refused; of one the breaker suspended
	// it starts the breaker afresh.
	if _, err := viaApproval(ctx, svc, changeRequest(e, "policy_resume", p.ID, "again")); !errors.As(err, &pe) || !strings.Contains(err.Error(), "only a suspended policy can be resumed; it is active") {
		t.Fatalf("resume of an active policy: %v", err)
	}
	susp, err := got.Suspend(redrive.ActorBreaker, "9 of 10 came back", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Replace(ctx, susp, got.Version); err != nil {
		t.Fatal(err)
	}
	rep, err = viaApproval(ctx, svc, changeRequest(e, "policy_resume", p.ID, "consumer fixed"))
	if err != nil || rep.Policy.State != policy.StateActive || rep.Policy.Version != 3 || rep.Policy.PrevSeal != susp.Seal {
		t.Fatalf("resume: %+v %v", rep, err)
	}
	rep, err = svc.LambdaHandler(ctx, changeRequest(e, "policy_revoke", p.ID, "outage over"))
	if err != nil || rep.Policy.State != policy.StateRevoked {
		t.Fatalf("revoke: %+v %v", rep, err)
	}
	got, _ = ps.Get(ctx, e.src.Name, p.ID)
	last := got.History[len(got.History)-1]
	if got.Seal != rep.Policy.Seal || got.Version != 4 || last.Actor != "unverified:cso@ops" || last.Action != "revoked" || last.Note != "outage over" || got.Verify() != nil {
		t.Fatalf("after revoke: %+v", got)
	}
	if _, err := svc.LambdaHandler(ctx, changeRequest(e, "policy_revoke", p.ID, "twice")); !errors.As(err, &pe) || !strings.Contains(err.Error(), "already revoked") {
		t.Fatalf("revoke of a revoked policy: %v", err)
	}
	var re *redrive.RequestError
	if _, err := svc.LambdaHandler(ctx, changeRequest(e, "policy_revoke", "pol-000000000000", "r")); !errors.As(err, &re) || !strings.Contains(err.Error(), "policy_id names no policy of this source") {
		t.Fatalf("revoke of no policy: %v", err)
	}
	if _, err := svc.LambdaHandler(ctx, []byte(`{"action":"policy_revoke","source":"nope","policy_id":"pol-000000000000","reason":"r","requested_by":"a"}`)); !errors.As(err, &re) || !strings.Contains(err.Error(), `source "nope": source is not configured`) {
		t.Fatalf("a source the function does not configure: %v", err)
	}
	if _, err := viaApproval(ctx, e.service(nil, nil, redrive.Config{}), addRequest(e, "", "x")); !errors.As(err, &re) || !strings.Contains(err.Error(), "standing policies are not configured") {
		t.Fatalf("without policies: %v", err)
	}
}

// The request of a policy action: the policy on an add, the id, a reason
// on a revoke or resume, no records selected, no dry run; policy fields
// on other actions are refused.
func TestPolicyRequestValidation(t *testing.T) {
	t.Parallel()
	spec := `"policy":{"min_age_seconds":60,"max_per_run":1,"expires_at":"2030-01-01T00:00:00Z"}`
	for raw, want := range map[string]string{
		`{"action":"policy_add","source":"s","requested_by":"a"}`:                                                                                                       "policy_add needs the policy",
		`{"action":"policy_add","source":"s","policy_id":"p1",` + spec + `,"requested_by":"a"}`:                                                                         "policy_id is not a policy id",
		`{"action":"policy_revoke","source":"s","reason":"r","requested_by":"a"}`:                                                                                       "policy_revoke needs the policy_id",
		`{"action":"policy_resume","source":"s","policy_id":"pol-0123456789ab","requested_by":"a"}`:                                                                     "policy_resume needs a reason",
		`{"action":"policy_revoke","source":"s","policy_id":"pol-0123456789ab","reason":" ","requested_by":"a"}`:                                                        "policy_revoke needs a reason",
		`{"action":"policy_revoke","source":"s","policy_id":"pol-0123456789ab#x","reason":"r","requested_by":"a"}`:                                                      "policy_id is not a policy id",
		`{"action":"policy_revoke","source":"s","policy_id":"pol-0123456789ab","reason":"r",` + spec + `,"requested_by":"a"}`:                                           "policy belongs to action policy_add",
		`{"action":"policy_add","source":"s","ids":["s#a"],` + spec + `,"requested_by":"a"}`:                                                                            "policy_add selects no records",
		`{"action":"policy_add","source":"s","dry_run":true,` + spec + `,"requested_by":"a"}`:                                                                           "policy_add has no dry run",
		`{"action":"policy_add","source":"s","policy":{"max_per_run":1,"owner":"x"},"requested_by":"a"}`:                                                                `unknown field "owner"`,
		`{"action":"policy_add","source":"s","policy":{"min_age_seconds":60,"max_per_run":1,"expires_in":"soon"},"requested_by":"a"}`:                                   `policy.expires_in "soon" is not a positive duration`,
		`{"action":"policy_add","source":"s","policy":{"min_age_seconds":60,"max_per_run":1,"expires_in":"1h","expires_at":"2030-01-01T00:00:00Z"},"requested_by":"a"}`: "policy has expires_at and expires_in: give one",
		`{"source":"s","policy_id":"pol-0123456789ab","requested_by":"a"}`:                                                                                              "policy_id and policy belong to the actions policy_add, policy_revoke and policy_resume",
	} {
		var re *redrive.RequestError
		if _, err := redrive.ParseRequest([]byte(raw)); !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	for _, raw := range []string{
		`{"action":"policy_add","source":"s",` + spec + `,"requested_by":"a"}`,
		`{"action":"policy_add","source":"s","policy_id":"pol-0123456789ab",` + spec + `,"requested_by":"a"}`,
		`{"action":"policy_revoke","source":"s","policy_id":"pol-0123456789ab","reason":"r","requested_by":"a"}`,
		`{"action":"policy_resume","source":"s","policy_id":"pol-0123456789ab","reason":"r","requested_by":"a"}`,
	} {
		if _, err := redrive.ParseRequest([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// lossyPolicies is e's service with standing policies whose store loses
// the answer of its first PutItem (the write applied; the SDK retries it).
func (e *env) lossyPolicies(t *testing.T) (*redrive.Service, *faults.LoseAnswers) {
	t.Helper()
	cfg := stack.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	lose := &faults.LoseAnswers{Base: base, Target: "DynamoDB_20120810.PutItem", N: 1}
	cfg.HTTPClient = lose
	ps := dynamostore.NewPolicyStore(awsclients.New(cfg, awsclients.Options{Local: true}).DynamoDB, stack.Names["QuarantineTable"])
	svc := e.service(nil, nil, redrive.Config{}).WithPolicies(redrive.Policies{Store: ps, Counters: e.store, Metrics: stack.Clients.CloudWatch, Namespace: embedded.RandomName("ns")})
	return svc, lose
}

// A policy write applied whose answer was lost (the SDK's retry then fails
// its condition) is recognized as this request's: the add succeeds with
// one policy, the revoke with one revocation. The same request sent again
// (the caller got no answer either) creates no second policy and makes no
// second change; another request under an existing id is refused.
func TestPolicyWriteWhoseAnswerWasLostIsNotDoneTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, id := range []string{"", "pol-00000000a0a0"} {
		t.Run("id="+id, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			_, ps, _ := e.policies(t, nil)
			svc, lose := e.lossyPolicies(t)
			add := addRequest(e, id, "INC-9")
			rep, err := viaApproval(ctx, svc, add)
			if err != nil {
				t.Fatal(err)
			}
			if lose.Lost() != 1 {
				t.Fatalf("%d answers lost, want 1", lose.Lost())
			}
			pols, err := ps.List(ctx, e.src.Name)
			if err != nil || len(pols) != 1 || pols[0].Seal != rep.Policy.Seal || (id != "" && pols[0].ID != id) {
				t.Fatalf("after a lost answer: %d policies %v, report %+v", len(pols), err, rep.Policy)
			}
			p := pols[0]
			if id != "" {
				e.clock.Advance(time.Minute) // sent again later: another creation time
				again, err := viaApproval(ctx, svc, add)
				if err != nil || again.Policy.Seal != p.Seal {
					t.Fatalf("the add sent again: %+v %v", again, err)
				}
				var re *redrive.RequestError
				if _, err := viaApproval(ctx, svc, addRequest(e, id, "another note")); !errors.As(err, &re) || !strings.Contains(err.Error(), "did not create") {
					t.Fatalf("another add under the id: %v", err)
				}
				if pols, _ := ps.List(ctx, e.src.Name); len(pols) != 1 {
					t.Fatalf("%d policies after the add was sent again", len(pols))
				}
			}

			svc, lose = e.lossyPolicies(t)
			rep, err = svc.LambdaHandler(ctx, changeRequest(e, "policy_revoke", p.ID, "outage over"))
			if err != nil || rep.Policy.State != policy.StateRevoked || lose.Lost() != 1 {
				t.Fatalf("revoke with its answer lost: %+v %v (%d lost)", rep, err, lose.Lost())
			}
			again, err := svc.LambdaHandler(ctx, changeRequest(e, "policy_revoke", p.ID, "outage over"))
			got, _ := ps.Get(ctx, e.src.Name, p.ID)
			if err != nil || again.Policy.Seal != got.Seal || got.Version != p.Version+1 || len(got.History) != len(p.History)+1 {
				t.Fatalf("the revoke sent again: %+v %v; stored v%d with %d changes", again, err, got.Version, len(got.History))
			}
		})
	}
}
