package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/sigv4front"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// Invocation as from the console and the AWS CLI: the real bootstrap runs
// against kumo's Runtime API and is invoked through the Lambda Invoke API
// with each redrive file from events/ (its source renamed to this stack's).
func TestBootstrapServesEveryRedriveSample(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	source := st.Names["SourceQueue"]
	// Seed the records the samples name, as ingest would.
	_, store, q, srcs := seeder(t, st)
	for i, id := range []string{"inv-000101", "inv-000102", "inv-000103"} {
		body := `{"event_id":"` + id + `","ndc":"00409-4888-02","lot":"LOT-1","quantity_delta":-1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
		if _, err := q.Quarantine(ctx, ingest.Message{MessageID: id, Body: []byte(body), SourceARN: srcs[source].ARN}); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // inv-000102 is parked as poison
			r, _ := store.Get(ctx, source+"#"+id)
			r.RedriveCount = r.RedriveCap // as if replayed cap times (re-sealed: a transition refuses a record that does not verify)
			if err := quarantine.SealRecord(r); err != nil {
				t.Fatal(err)
			}
			p, err := r.ParkPoison("test", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Replace(ctx, r, p); err != nil {
				t.Fatal(err)
			}
		}
	}

	// inv-000104 failed the schema (an O for a zero in its NDC): the
	// correct sample fixes it.
	malformed := `{"event_id":"inv-000104","ndc":"OO409-4888-02","lot":"LOT-1","quantity_delta":-1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	if _, err := q.Quarantine(ctx, ingest.Message{MessageID: "inv-000104", Body: []byte(malformed), SourceARN: srcs[source].ARN}); err != nil {
		t.Fatal(err)
	}

	f := lambdatest.ForTest(t, st, "redrive", "RedriveFunction", 60*time.Second)
	// The high-risk samples are what dlqctl sends to the operator endpoint:
	// operator-a asks, operator-b approves (the operator function, behind a
	// local SigV4 check). Sent to the redrive function directly, each runs
	// dry or is refused.
	_, ep := lambdatest.OperatorForTest(t, st, "RedriveFunction", 60*time.Second)
	asker, _ := ep.Client(st, "operator-a")
	approver, _ := ep.Client(st, "operator-b")
	highRisk := map[string]bool{"redrive-parked-approved.json": true, "redrive-correct.json": true, "redrive-unpark.json": true, "redrive-policy-add.json": true, "redrive-policy-resume.json": true}
	files, _ := filepath.Glob("../../events/redrive-*.json")
	if len(files) < 5 {
		t.Fatalf("only %d redrive samples", len(files))
	}
	want := map[string]func(*redrive.Report) bool{
		"redrive-dry-run.json":           func(r *redrive.Report) bool { return r.DryRun && r.Redriven.Count == 2 },
		"redrive-ids.json":               func(r *redrive.Report) bool { return r.Redriven.Count == 2 },
		"redrive-parked-approved.json":   func(r *redrive.Report) bool { return r.Redriven.Count == 1 },
		"redrive-cleared-exhausted.json": func(r *redrive.Report) bool { return r.Redriven.Count == 0 }, // all in flight by then
		"redrive-settle.json":            func(r *redrive.Report) bool { return r.Action == "settle" },
		"redrive-correct.json": func(r *redrive.Report) bool {
			return r.Corrected.Count == 1 && r.Correction != nil && r.Correction.Actor == asker.Identity.ARN && r.Correction.Approval == r.Approval.ID
		},
		// One standing policy, for the corrected record's signature: it
		// replays that record as its own actor.
		"redrive-policies.json": func(r *redrive.Report) bool {
			return len(r.Policies) == 1 && r.Policies[0].Outcome == "ran" && r.Policies[0].Redriven == 1
		},
		// The operator actions, on a record of their own (inv-000106 in
		// place of the walk's 102): parked, returned, its payload read.
		"redrive-park.json": func(r *redrive.Report) bool {
			return r.Record != nil && r.Record.Status == quarantine.StatusParked && r.Record.Body == ""
		},
		"redrive-unpark.json": func(r *redrive.Report) bool {
			return r.Record != nil && r.Record.Status == quarantine.StatusQuarantined
		},
		"redrive-read.json": func(r *redrive.Report) bool {
			return r.Payload != nil && string(r.Payload.Body) == operatorBody && r.Record.ReadCount == 1 && r.Record.Reads[0].Actor == "unverified:auditor@example.com"
		},
		// A standing policy created, resumed once its breaker suspended it
		// (set up below), revoked: each the version the function wrote.
		"redrive-policy-add.json": func(r *redrive.Report) bool {
			p := r.Policy
			return p != nil && p.ID == samplePolicy && p.State == policy.StateActive && p.CreatedBy == asker.Identity.ARN && p.History[0].Approval == r.Approval.ID && p.Version == 1 &&
				p.ExpiresAt.Sub(p.CreatedAt.Time) == 72*time.Hour && p.Verify() == nil
		},
		"redrive-policy-resume.json": func(r *redrive.Report) bool {
			p := r.Policy
			return p != nil && p.State == policy.StateActive && p.Version == 3 && p.History[2].Action == "resumed" && p.Verify() == nil
		},
		"redrive-policy-revoke.json": func(r *redrive.Report) bool {
			p := r.Policy
			return p != nil && p.State == policy.StateRevoked && p.Version == 4 && p.History[3].Note == "INC-4711 closed" && p.Verify() == nil
		},
	}
	order := []string{"redrive-dry-run.json", "redrive-ids.json", "redrive-parked-approved.json", "redrive-cleared-exhausted.json", "redrive-settle.json",
		"redrive-correct.json", "redrive-policies.json", "redrive-park.json", "redrive-unpark.json", "redrive-read.json",
		"redrive-policy-add.json", "redrive-policy-resume.json", "redrive-policy-revoke.json"}
	if len(files) != len(order) {
		t.Fatalf("%d redrive samples, %d checked", len(files), len(order))
	}
	for _, name := range order {
		if name == "redrive-policies.json" {
			p, err := policy.New(policy.Spec{Source: source, Signatures: []string{quarantine.Signature(quarantine.StageCorrection, quarantine.ReasonCorrection, srcs[source].SchemaVersion)},
				MaxPerRun: 10, ExpiresAt: time.Now().Add(time.Hour)}, "lead@example.com", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := dynamostore.NewPolicyStore(st.Clients.DynamoDB, st.Names["QuarantineTable"]).Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if name == "redrive-policy-resume.json" { // its breaker suspended it
			ps := dynamostore.NewPolicyStore(st.Clients.DynamoDB, st.Names["QuarantineTable"])
			p, err := ps.Get(ctx, source, samplePolicy)
			if err != nil {
				t.Fatal(err)
			}
			susp, err := p.Suspend(quarantine.ActorBreaker, "9 of 10 replays came back", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Replace(ctx, susp, p.Version); err != nil {
				t.Fatal(err)
			}
		}
		if name == "redrive-park.json" {
			if _, err := q.Quarantine(ctx, ingest.Message{MessageID: "inv-000106", Body: []byte(operatorBody), SourceARN: srcs[source].ARN}); err != nil {
				t.Fatal(err)
			}
		}
		payload := strings.ReplaceAll(string(lambdatest.Sample(t, name)), "dlqq-source", source)
		if name == "redrive-park.json" || name == "redrive-unpark.json" || name == "redrive-read.json" {
			payload = strings.ReplaceAll(payload, "inv-000102", "inv-000106")
		}
		var answer []byte
		if highRisk[name] {
			direct := strings.Replace(payload, "{", `{"requested_by":"mallory",`, 1)
			if out, err := f.Invoke(ctx, []byte(direct)); err != nil || out.FunctionError == nil && !strings.Contains(string(out.Payload), `"dry_run":true`) {
				t.Fatalf("%s sent directly ran: %s %v", name, out.Payload, err)
			}
			answer = approved(t, asker, approver, source, payload)
		} else {
			answer = f.MustInvoke(t, []byte(payload))
		}
		var rep redrive.Report
		if err := json.Unmarshal(answer, &rep); err != nil {
			t.Fatalf("%s: %s", name, answer)
		}
		if !want[name](&rep) {
			t.Fatalf("%s: unexpected report %s", name, answer)
		}
	}
	// A bad request is a function error with a clear message, not a partial run.
	out, err := f.Invoke(ctx, []byte(`{"source":"`+source+`","requested_by":"me","batch_size":51}`))
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError == nil || !strings.Contains(string(out.Payload), "batch_size 51 is outside 1..50") {
		t.Fatalf("batch_size 51: %s", out.Payload)
	}
	// Its logs name no payload value: not the lot, the NDC, nor the event ids
	// (which are the records' idempotency keys), also after the read
	// returned a payload.
	for _, v := range []string{"LOT-1", "00409-4888-02", "OO409", "inv-000101", "inv-000102", "inv-000103", "inv-000104", "inv-000106", "invoice"} {
		if strings.Contains(f.Output(), v) {
			t.Fatalf("payload value %q in the redrive function's logs:\n%s", v, f.Output())
		}
	}
	if !strings.Contains(f.Output(), "redrive run finished") {
		t.Fatalf("no outcome log line:\n%s", f.Output())
	}
	r, err := store.Get(ctx, source+"#inv-000102")
	if err != nil || r.Status != quarantine.StatusRedriven || r.RedriveCap != r.RedriveCount || !strings.Contains(r.Attempts[len(r.Attempts)-2].Reason, "cap raised") || r.Attempts[len(r.Attempts)-1].Actor != asker.Identity.ARN {
		t.Fatalf("approved parked replay: %+v %v", r, err)
	}
}

// approved sends body to the operator endpoint as asker; the pending
// approval it becomes is approved by approver, whose answer (the plan's
// run's report) it returns.
func approved(t *testing.T, asker, approver sigv4front.Client, source, body string) []byte {
	t.Helper()
	ctx := context.Background()
	status, answer, err := asker.Post(ctx, []byte(body))
	var rep redrive.Report
	if err != nil || status != http.StatusOK || json.Unmarshal(answer, &rep) != nil || rep.Stopped != redrive.StoppedPendingApproval {
		t.Fatalf("asked as %s: %d %s %v", asker.Identity.Name, status, answer, err)
	}
	approve := fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":%q}`, source, rep.Approval.ID)
	status, answer, err = approver.Post(ctx, []byte(approve))
	if err != nil || status != http.StatusOK {
		t.Fatalf("approved as %s: %d %s %v", approver.Identity.Name, status, answer, err)
	}
	return answer
}

// operatorBody is the record the operator samples act on.
const operatorBody = `{"event_id":"inv-000106","ndc":"00409-4888-02","lot":"LOT-1","quantity_delta":-1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`

// samplePolicy is the policy the policy samples create and change.
const samplePolicy = "pol-5a17c0de0001"

// During the ledger upgrade (the stack deployed with
// LedgerMappingEnabled=false, so the template gives the function
// COUNTERS_LIVE=false), the policies schedule's event sends nothing: the
// function answers, without a function error, with a report that says
// why, although a policy matches a quarantined record.
func TestBootstrapSendsNoPolicyReplayDuringTheLedgerUpgrade(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"LedgerMappingEnabled": "false"}})
	getenv, store, q, srcs := seeder(t, st)
	if live := getenv("COUNTERS_LIVE"); live != "false" {
		t.Fatalf("COUNTERS_LIVE=%q with the ledger's mapping off", live)
	}
	source := st.Names["SourceQueue"]
	stored, err := q.Quarantine(ctx, ingest.Message{MessageID: "inv-000106", Body: []byte(operatorBody), SourceARN: srcs[source].ARN})
	if err != nil {
		t.Fatal(err)
	}
	// A policy for exactly this record's failure.
	p, err := policy.New(policy.Spec{Source: source, Signatures: []string{stored.Record.FailureSignature}, MaxPerRun: 10, ExpiresAt: time.Now().Add(time.Hour)},
		"lead@example.com", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.NewPolicyStore(st.Clients.DynamoDB, st.Names["QuarantineTable"]).Create(ctx, p); err != nil {
		t.Fatal(err)
	}

	f := lambdatest.ForTest(t, st, "redrive", "RedriveFunction", 60*time.Second)
	answer := f.MustInvoke(t, []byte(strings.ReplaceAll(string(lambdatest.Sample(t, "redrive-policies.json")), "dlqq-source", source)))
	var rep redrive.Report
	if err := json.Unmarshal(answer, &rep); err != nil {
		t.Fatalf("%s", answer)
	}
	if rep.PoliciesSkipped != redrive.PoliciesCountersOff || len(rep.Policies) != 0 || rep.Redriven.Count != 0 {
		t.Fatalf("policies during the upgrade: %s", answer)
	}
	out, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("the source queue holds %d messages (%v)", len(out.Messages), err)
	}
	if r, err := store.Get(ctx, source+"#inv-000106"); err != nil || r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 {
		t.Fatalf("the record changed: %+v %v", r, err)
	}
	if !strings.Contains(f.Output(), "standing policies not applied: breaker counters are not live") {
		t.Fatalf("no log line says why:\n%s", f.Output())
	}
	// The same event, counters live: the policy replays the record.
	live := lambdatest.ForTest(t, st, "redrive", "RedriveFunction", 60*time.Second, "COUNTERS_LIVE=true")
	answer = live.MustInvoke(t, []byte(strings.ReplaceAll(string(lambdatest.Sample(t, "redrive-policies.json")), "dlqq-source", source)))
	rep = redrive.Report{}
	if err := json.Unmarshal(answer, &rep); err != nil || rep.PoliciesSkipped != "" || len(rep.Policies) != 1 || rep.Policies[0].Redriven != 1 {
		t.Fatalf("policies with the counters live: %s", answer)
	}
}

// seeder is what a test needs to store records as ingest would, for the
// sources the redrive function configures: its environment, the table's
// store, a quarantiner and the sources.
func seeder(t *testing.T, st *embedded.Stack) (func(string) string, *dynamostore.Store, *ingest.Quarantiner, map[string]*quarantine.Source) {
	t.Helper()
	getenv := lambdatest.Getenv(t, st, "RedriveFunction")
	cfg, err := sources.Parse(getenv("SOURCES"))
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := sources.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	return getenv, store, ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: srcs}), srcs
}
