package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// seedReason quarantines n records whose consumer failed them with reason,
// and returns their ids.
func (e *env) seedReason(t *testing.T, from, n int, reason string) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		out, err := e.q.Quarantine(context.Background(), ingest.Message{
			MessageID: fmt.Sprintf("dlq-%d", i), Body: []byte(body(i, true)), SourceARN: e.src.ARN, ReceiveCount: 2,
			Attributes: map[string]quarantine.Attribute{
				quarantine.AttrFailureStage:  {DataType: "String", StringValue: "consumer"},
				quarantine.AttrFailureReason: {DataType: "String", StringValue: reason},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(time.Second)
	return ids
}

// policies is a service with standing policies over store (nil: the
// env's), their policy store and their metrics' namespace.
func (e *env) policies(t *testing.T, store quarantine.Store) (*redrive.Service, *dynamostore.PolicyStore, string) {
	ns := embedded.RandomName("ns")
	ps := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	svc := e.service(nil, store, redrive.Config{}).WithPolicies(redrive.Policies{Store: ps, Counters: countstream.NewReader(stack), Metrics: stack.Clients.CloudWatch, Namespace: ns})
	return svc, ps, ns
}

func (e *env) addPolicy(t *testing.T, ps *dynamostore.PolicyStore, spec policy.Spec) *policy.Policy {
	t.Helper()
	spec.Source = e.src.Name
	p, err := policy.New(spec, "lead@ops", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func applyPolicies(t *testing.T, svc *redrive.Service, e *env) *redrive.Report {
	t.Helper()
	rep, err := svc.Handle(context.Background(), []byte(`{"action":"policies","source":"`+e.src.Name+`","requested_by":"schedule:policies"}`))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func outcome(rep *redrive.Report, id string) redrive.PolicyOutcome {
	for _, o := range rep.Policies {
		if o.ID == id {
			return o
		}
	}
	return redrive.PolicyOutcome{}
}

// A policy replays only the records it matches, at most max_per_run per
// run, as its own actor, and nothing once it has expired.
func TestPolicyReplaysWhatItMatchesWithinItsLimits(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	outage := e.seedReason(t, 0, 20, "downstream 503")
	other := e.seedReason(t, 100, 6, "ledger locked")
	svc, ps, _ := e.policies(t, nil)
	sig := quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)
	p := e.addPolicy(t, ps, policy.Spec{Signatures: []string{sig}, MaxPerRun: 8, ExpiresAt: e.clock.Now().Add(time.Hour), MinSample: 1000})
	short := e.addPolicy(t, ps, policy.Spec{Signatures: []string{quarantine.Signature("consumer", "ledger locked", e.src.SchemaVersion)},
		MaxPerRun: 8, ExpiresAt: e.clock.Now().Add(10 * time.Minute), MinSample: 1000})
	e.clock.Advance(11 * time.Minute) // the second policy has expired

	var sent []string
	for run, want := range []int{8, 8, 4, 0} {
		rep := applyPolicies(t, svc, e)
		if o := outcome(rep, p.ID); o.Outcome != "ran" || o.Redriven != want {
			t.Fatalf("run %d: %+v, want %d redriven", run+1, o, want)
		}
		if o := outcome(rep, short.ID); o.Outcome != "expired" || o.Redriven != 0 {
			t.Fatalf("run %d: the expired policy %+v", run+1, o)
		}
		for _, m := range e.drain(t, none) {
			sent = append(sent, m.recordID)
		}
	}
	slices.Sort(sent)
	want := slices.Clone(outage)
	slices.Sort(want)
	if !slices.Equal(sent, want) {
		t.Fatalf("sent %d records, want exactly the %d matching ones", len(sent), len(want))
	}
	for _, id := range other {
		if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 {
			t.Fatalf("%s was replayed by an expired policy", id)
		}
	}
	r := e.get(t, outage[0])
	if r.RedrivenBy != p.Actor() || r.Attempts[len(r.Attempts)-1].Actor != p.Actor() {
		t.Fatalf("history actor %q, want %q", r.RedrivenBy, p.Actor())
	}
	if n, _, err := policy.Counts(ctx, countstream.NewReader(stack), e.src.Name, p.ID); err != nil || n != 20 {
		t.Fatalf("policy sent counter %d, %v; want 20", n, err)
	}
}

// A source whose consumer still fails: the breaker suspends the policy once
// the share that came back passes the threshold over the minimum sample;
// then nothing more is sent, the alarm metric says so, and only an operator
// resumes it.
func TestBreakerSuspendsAPolicyWhoseReplaysComeBack(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	e.seedReason(t, 0, 12, "downstream 503")
	svc, ps, ns := e.policies(t, nil)
	sig := quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)
	p := e.addPolicy(t, ps, policy.Spec{Signatures: []string{sig}, MaxPerRun: 5, MinSample: 5, ExpiresAt: e.clock.Now().Add(24 * time.Hour)})

	if o := outcome(applyPolicies(t, svc, e), p.ID); o.Outcome != "ran" || o.Redriven != 5 {
		t.Fatalf("first run: %+v", o)
	}
	// The consumer still fails: every replay comes back to the DLQ.
	e.drain(t, func(string) bool { return true })
	if n := e.ingestDLQ(t); n != 5 {
		t.Fatalf("%d came back, want 5", n)
	}
	rep := applyPolicies(t, svc, e)
	if o := outcome(rep, p.ID); o.Outcome != "tripped" || o.Sent != 5 || o.CameBack != 5 || o.Redriven != 0 {
		t.Fatalf("second run: %+v, want the breaker tripped on 5 of 5", o)
	}
	for range 2 {
		if o := outcome(applyPolicies(t, svc, e), p.ID); o.Outcome != "suspended" || o.Redriven != 0 {
			t.Fatalf("a suspended policy ran: %+v", o)
		}
	}
	if got := e.drain(t, none); len(got) != 0 {
		t.Fatalf("%d messages sent after the breaker tripped", len(got))
	}
	stored, err := ps.Get(ctx, e.src.Name, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := stored.History[len(stored.History)-1]
	if stored.State != policy.StateSuspended || last.Actor != redrive.ActorBreaker || !strings.Contains(last.Note, "5 of 5 replays came back") {
		t.Fatalf("stored policy %s, last change %+v", stored.State, last)
	}
	// The alarm's metric, read back from CloudWatch.
	for _, m := range []struct {
		name string
		dims []cwtypes.Dimension
	}{
		{redrive.MetricPolicies, []cwtypes.Dimension{{Name: aws.String("Source"), Value: aws.String(e.src.Name)}}},
		{redrive.MetricPolicySuspended, []cwtypes.Dimension{{Name: aws.String("Source"), Value: aws.String(e.src.Name)}, {Name: aws.String("Policy"), Value: aws.String(p.ID)}}},
	} {
		out, err := stack.Clients.CloudWatch.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
			Namespace: aws.String(ns), MetricName: aws.String(m.name), Dimensions: m.dims,
			StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
			Period: aws.Int32(3600), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
		})
		if err != nil || len(out.Datapoints) == 0 || aws.ToFloat64(out.Datapoints[0].Maximum) != 1 {
			t.Fatalf("%s: %+v %v, want a maximum of 1", m.name, out, err)
		}
	}
	// An operator resumes it: the breaker judges only what follows.
	sent, back, err := policy.Counts(ctx, countstream.NewReader(stack), e.src.Name, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := stored.Resume("lead@ops", "consumer fixed", sent, back, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Replace(ctx, resumed, stored.Version); err != nil {
		t.Fatal(err)
	}
	if o := outcome(applyPolicies(t, svc, e), p.ID); o.Outcome != "ran" || o.Redriven != 5 || o.Sent != 0 {
		t.Fatalf("after resume: %+v", o)
	}
}

// A revoked policy sends nothing; every change is in the policy's sealed
// history; nobody else may act as a policy.
func TestRevokedPolicySendsNothingAndChangesAreAudited(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	ids := e.seedReason(t, 0, 4, "downstream 503")
	svc, ps, _ := e.policies(t, nil)
	p := e.addPolicy(t, ps, policy.Spec{MinAge: time.Second, MaxPerRun: 10, ExpiresAt: e.clock.Now().Add(time.Hour), Note: "outage INC-7"})
	revoked, err := p.Revoke("cso@ops", "outage over", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Replace(ctx, revoked, p.Version); err != nil {
		t.Fatal(err)
	}
	if err := ps.Replace(ctx, revoked, p.Version); !errors.Is(err, policy.ErrConflict) {
		t.Fatalf("a stale change: %v, want a conflict", err)
	}
	if o := outcome(applyPolicies(t, svc, e), p.ID); o.Outcome != "revoked" || o.Redriven != 0 {
		t.Fatalf("revoked policy: %+v", o)
	}
	for _, id := range ids {
		if r := e.get(t, id); r.RedriveCount != 0 {
			t.Fatal("a revoked policy replayed a record")
		}
	}
	got, err := ps.Get(ctx, e.src.Name, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 2 || got.History[0].Action != "created" || got.History[0].Actor != "lead@ops" || got.History[0].Note != "outage INC-7" ||
		got.History[1].Action != "revoked" || got.History[1].Actor != "cso@ops" || got.PrevSeal != p.Seal || got.Verify() != nil {
		t.Fatalf("history %+v", got.History)
	}
	got.History[0].Actor = "someone-else"
	if got.Verify() == nil {
		t.Fatal("an edited policy history verifies")
	}
	_, err = svc.Handle(ctx, []byte(`{"source":"`+e.src.Name+`","requested_by":"policy:`+p.ID+`"}`))
	var re *redrive.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("a manual run acting as a policy: %v", err)
	}
	// Poison, parked and over-broad policies are refused.
	for _, spec := range []policy.Spec{
		{Source: e.src.Name, Classes: []quarantine.Class{quarantine.ClassPoison}, MinAge: time.Minute, MaxPerRun: 1, ExpiresAt: e.clock.Now().Add(time.Hour)},
		{Source: e.src.Name, MaxPerRun: 1, ExpiresAt: e.clock.Now().Add(time.Hour)},
		{Source: e.src.Name, MinAge: time.Minute, MaxPerRun: 5000, ExpiresAt: e.clock.Now().Add(time.Hour)},
		{Source: e.src.Name, MinAge: time.Minute, MaxPerRun: 1, ExpiresAt: e.clock.Now().Add(-time.Hour)},
	} {
		var pe *policy.Error
		if _, err := policy.New(spec, "lead@ops", e.clock.Now()); !errors.As(err, &pe) {
			t.Fatalf("policy %+v accepted", spec)
		}
	}
}

// Records whose cause is not cleared never fill a run's max_messages: the
// cleared ones behind them are reached.
func TestClearedReasonsDoNotStarveBehindOthers(t *testing.T) {
	e := newEnv(t, false)
	e.seedReason(t, 0, 8, "ledger locked") // older, not cleared
	cleared := e.seedReason(t, 100, 3, "downstream 503")
	svc := e.service(nil, nil, redrive.Config{})
	rep, err := svc.Run(context.Background(), redrive.Request{Source: e.src.Name, RequestedBy: "ops", MaxMessages: 5,
		ClearedReasons: []string{quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redriven.Count != 3 || rep.Remaining != 0 {
		t.Fatalf("redriven %d, remaining %d: want the 3 cleared records and nothing left", rep.Redriven.Count, rep.Remaining)
	}
	got := slices.Clone(rep.Redriven.IDs)
	slices.Sort(got)
	want := slices.Clone(cleared)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("redriven %v, want %v", got, want)
	}
	// Signatures and cleared reasons that do not meet select nothing.
	rep, err = svc.Run(context.Background(), redrive.Request{Source: e.src.Name, RequestedBy: "ops", MaxMessages: 5,
		Signatures:     []string{quarantine.Signature("consumer", "ledger locked", e.src.SchemaVersion)},
		ClearedReasons: []string{quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)}})
	if err != nil || rep.Redriven.Count+rep.Skipped.Count+rep.Remaining != 0 {
		t.Fatalf("disjoint filters: %+v %v", rep, err)
	}
}

// countedPolicies seeds n records failed with reasons[0] and a standing
// policy for each reason, on a service whose settle listings are counted.
func countedPolicies(t *testing.T, n int, reasons ...string) (*env, []string, *countingLister, *redrive.Service, []*policy.Policy) {
	t.Helper()
	e := newEnv(t, false)
	ids := e.seedReason(t, 0, n, reasons[0])
	lister := &countingLister{Lister: e.lister}
	ps := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	svc := redrive.New(e.store, lister, e.payloads, stack.Clients.SQS, map[string]*quarantine.Source{e.src.Name: e.src}, e.clock.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: 10000, MaxBackoff: 20 * time.Millisecond}).
		WithPolicies(redrive.Policies{Store: ps, Counters: countstream.NewReader(stack), Metrics: stack.Clients.CloudWatch, Namespace: embedded.RandomName("ns")})
	var pols []*policy.Policy
	for _, reason := range reasons {
		pols = append(pols, e.addPolicy(t, ps, policy.Spec{Signatures: []string{quarantine.Signature("consumer", reason, e.src.SchemaVersion)},
			MaxPerRun: 8, ExpiresAt: e.clock.Now().Add(time.Hour), MinSample: 1000}))
	}
	return e, ids, lister, svc, pols
}

// A policies tick settles once, however many policies run in it: not once
// per policy.
func TestPoliciesTickSettlesOnce(t *testing.T) {
	e, ids, lister, svc, pols := countedPolicies(t, 3, "downstream 503", "ledger locked", "timeout")
	tick := func(round int) *redrive.Report {
		t.Helper()
		before := lister.redriven.Load()
		rep := applyPolicies(t, svc, e)
		for _, p := range pols {
			if o := outcome(rep, p.ID); o.Outcome != "ran" {
				t.Fatalf("tick %d: policy %+v did not run", round, o)
			}
		}
		if n := lister.redriven.Load() - before; n != 1 {
			t.Fatalf("tick %d of %d running policies settled %d times, want once", round, len(pols), n)
		}
		return rep
	}
	if rep := tick(1); rep.Redriven.Count != len(ids) || rep.Settled.Count != 0 {
		t.Fatalf("tick 1: redriven %d, settled %d; want %d and 0", rep.Redriven.Count, rep.Settled.Count, len(ids))
	}
	e.drain(t, none)
	e.clock.Advance(16 * time.Minute) // past the settle window
	if rep := tick(2); rep.Redriven.Count != 0 || rep.Settled.Count != len(ids) {
		t.Fatalf("tick 2: redriven %d, settled %d; want 0 and %d", rep.Redriven.Count, rep.Settled.Count, len(ids))
	}
	for _, id := range ids {
		if r := e.get(t, id); r.Status != quarantine.StatusResolved {
			t.Fatalf("%s is %s, want RESOLVED", id, r.Status)
		}
	}
}

// A settle that fails in a policies tick is tried again by the tick's next
// policy: the tick settles once, not at most once.
func TestPoliciesTickSettlesAgainAfterAFailedSettle(t *testing.T) {
	e, ids, lister, svc, _ := countedPolicies(t, 2, "downstream 503", "ledger locked")
	if rep := applyPolicies(t, svc, e); rep.Redriven.Count != len(ids) {
		t.Fatalf("tick 1 redrove %d, want %d", rep.Redriven.Count, len(ids))
	}
	e.drain(t, none)
	e.clock.Advance(16 * time.Minute) // past the settle window
	lister.failNext.Store(true)
	before := lister.redriven.Load()
	rep := applyPolicies(t, svc, e)
	if n := lister.redriven.Load() - before; n != 2 {
		t.Fatalf("a tick whose first settle failed settled %d times, want the failed try and one more", n)
	}
	if rep.Settled.Count != len(ids) {
		t.Fatalf("tick 2 settled %d, want %d: %+v", rep.Settled.Count, len(ids), rep.Policies)
	}
	for _, id := range ids {
		if r := e.get(t, id); r.Status != quarantine.StatusResolved {
			t.Fatalf("%s is %s after the tick, want RESOLVED", id, r.Status)
		}
	}
}

// A policy whose run fails for one of its records fails, with the error
// kind in its outcome, and what the run did still counts: the records it
// redrove and the one that failed are in the tick's totals.
func TestFailedPolicyRunKeepsWhatItDid(t *testing.T) {
	e := newEnv(t, false)
	ids := e.seedReason(t, 0, 3, "downstream 503")
	down := &failingStore{Store: e.store, fail: func(r *quarantine.Record) bool {
		return r.DLQID == ids[0] && r.Status == quarantine.StatusRedriving
	}}
	svc, ps, _ := e.policies(t, down)
	p := e.addPolicy(t, ps, policy.Spec{Signatures: []string{quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)},
		MaxPerRun: 8, ExpiresAt: e.clock.Now().Add(time.Hour), MinSample: 1000})
	rep := applyPolicies(t, svc, e)
	if o := outcome(rep, p.ID); o.Outcome != "failed" || o.Error == "" || o.Redriven != 2 || o.RunID == "" {
		t.Fatalf("policy outcome %+v, want failed with its error and 2 redriven", o)
	}
	if rep.Redriven.Count != 2 || rep.Failed.Count != 1 || rep.Failed.IDs[0] != ids[0] {
		t.Fatalf("tick: redriven %v failed %v; want the 2 others redriven and %s failed", rep.Redriven.IDs, rep.Failed.IDs, ids[0])
	}
}

// While the breakers' counters are not live (the ledger's stream mapping
// is off, COUNTERS_LIVE=false), a policies run sends nothing, touches no
// policy and says why; it is not an error (a scheduled run's error pages
// as a failed invocation). The same policy runs once the counters are
// live again.
func TestPoliciesSendNothingWhileTheCountersAreNotLive(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	ids := e.seedReason(t, 0, 6, "downstream 503")
	ps := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	sig := quarantine.Signature("consumer", "downstream 503", e.src.SchemaVersion)
	p := e.addPolicy(t, ps, policy.Spec{Signatures: []string{sig}, MaxPerRun: 10, ExpiresAt: e.clock.Now().Add(time.Hour), MinSample: 1000})
	withCounters := func(off bool) *redrive.Service {
		return e.service(nil, nil, redrive.Config{CountersOff: off}).WithPolicies(redrive.Policies{Store: ps, Counters: countstream.NewReader(stack),
			Metrics: stack.Clients.CloudWatch, Namespace: embedded.RandomName("ns")})
	}

	rep := applyPolicies(t, withCounters(true), e)
	if rep.PoliciesSkipped != redrive.PoliciesCountersOff || len(rep.Policies) != 0 || rep.Redriven.Count != 0 || rep.Settled.Count != 0 {
		t.Fatalf("counters not live: report %+v", rep)
	}
	if !strings.Contains(rep.PoliciesSkipped, "LedgerMappingEnabled") {
		t.Errorf("the report does not say what to do: %q", rep.PoliciesSkipped)
	}
	if got := e.drain(t, none); len(got) != 0 {
		t.Fatalf("%d messages sent while the counters are not live", len(got))
	}
	for _, id := range ids {
		if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 {
			t.Fatalf("%s changed while the counters are not live: %s", id, r.Status)
		}
	}
	if stored, err := ps.Get(ctx, e.src.Name, p.ID); err != nil || stored.Version != p.Version {
		t.Fatalf("the policy changed: %+v %v", stored, err)
	}

	rep = applyPolicies(t, withCounters(false), e)
	if o := outcome(rep, p.ID); rep.PoliciesSkipped != "" || o.Outcome != "ran" || o.Redriven != len(ids) {
		t.Fatalf("counters live again: %+v, skipped %q", o, rep.PoliciesSkipped)
	}
	if got := e.drain(t, none); len(got) != len(ids) {
		t.Fatalf("%d messages sent, want %d", len(got), len(ids))
	}
}

// COUNTERS_LIVE is "true" (or unset) or "false"; anything else fails the
// function's init, named.
func TestCountersLiveFromTheEnvironment(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]struct {
		off bool
		err bool
	}{"": {false, false}, "true": {false, false}, "false": {true, false}, "no": {false, true}, "FALSE": {false, true}} {
		cfg, err := redrive.ConfigFromEnv(func(k string) string {
			return map[string]string{"TABLE_NAME": "t", "COUNTERS_LIVE": v,
				"SOURCES": `{"src":{"arn":"arn:aws:sqs:us-east-1:000000000000:src","dlq":"src-dlq","idempotency_pointer":"/event_id","schema":"inventory-movement.v1","redrive_cap":3}}`}[k]
		})
		if (err != nil) != want.err || (err != nil && !strings.Contains(err.Error(), "COUNTERS_LIVE")) || (err == nil && cfg.Service.CountersOff != want.off) {
			t.Errorf("COUNTERS_LIVE=%q: counters off %v, %v; want %+v", v, cfg.Service.CountersOff, err, want)
		}
	}
}
