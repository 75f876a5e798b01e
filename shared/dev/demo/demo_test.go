package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/dev/demo"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// holds fails t unless a scenario ran (err is nil) and its report, as
// print writes it, says that every invariant held; it returns the report.
func holds(t *testing.T, rep interface{ OK() bool }, err error, print func(io.Writer)) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	print(&out)
	if !rep.OK() {
		t.Fatalf("invariants violated:\n%s", out.String())
	}
	return out.String()
}

// checkSources fails t unless the report triages each of the local
// stack's sources apart, under its own name, every failing event of each
// with its record under that source: the example source and the existing
// queue that share the stack's DLQ (routed by DeadLetterQueueSourceArn),
// and the attached FIFO source with its FIFO DLQ.
func checkSources(t *testing.T, st *embedded.Stack, rep *demo.Report, out string) {
	t.Helper()
	name := func(s string) string { return st.Env.StackName + "-" + s }
	want := []struct{ source, dlq string }{
		{st.Names["SourceQueue"], st.Names["DeadLetterQueue"]},
		{name(embedded.FIFOSource), name(embedded.FIFODLQ)},
		{name(embedded.SharedSource), st.Names["DeadLetterQueue"]},
	}
	if len(rep.Sources) != len(want) {
		t.Fatalf("%d sources in the report, want %d:\n%s", len(rep.Sources), len(want), out)
	}
	_, triage, ok := strings.Cut(out, "triage per source (3 sources;")
	if !ok {
		t.Fatalf("the report has no triage per source:\n%s", out)
	}
	for i, w := range want {
		s := rep.Sources[i]
		if s.Name != w.source || s.DLQ != w.dlq {
			t.Errorf("source %d is %s on %s, want %s on %s", i, s.Name, s.DLQ, w.source, w.dlq)
		}
		// Each source failed both ways and was replayed: its records are
		// its failing events, none lost, misrouted or left over.
		if !s.OK() || s.Records != s.Failing || s.DLQMessages < s.Failing || s.ByClass["exhausted"] == 0 || s.ByClass["validation"] == 0 ||
			s.Replayed == 0 || s.Final["RESOLVED"] == 0 || s.Final["QUARANTINED"] == 0 {
			t.Errorf("source %s: %+v", s.Name, *s)
		}
		if !strings.Contains(triage, "  "+s.Name+"  ") || !strings.Contains(triage, "  "+s.Name+": ") {
			t.Errorf("the triage per source does not show %s:\n%s", s.Name, triage)
		}
	}
	if !strings.Contains(triage, st.Names["DeadLetterQueue"]+" (shared by 2)") {
		t.Errorf("the triage does not show the shared DLQ:\n%s", triage)
	}
}

// The demo scenario at a smaller size, asserting the same invariants.
func TestDemoScenarioHoldsInvariants(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.WithLocalSources(embedded.Options{Params: demo.StackParams}))
	var logs, progress bytes.Buffer
	rep, err := demo.Run(ctx, st, demo.Options{Seed: 7, Events: 400, Log: &logs, Progress: &progress})
	out := holds(t, rep, err, func(w io.Writer) { rep.Print(w, 3) })
	checkSources(t, st, rep, out)
	// Every count of the report reconciles, on the page: on each check line
	// the whole is the sum of its parts, measured apart (generator,
	// consumer, ingest, SQS, table, redrive, sweeper), and the metrics agree
	// with the counts. (holds has asserted OK, which requires it too.)
	ids := rep.Identities()
	checks := 0
	for _, id := range ids {
		if !id.Breakdown {
			checks++
		}
	}
	if checks < 15 || rep.ReplaysDeadLettered == 0 || rep.IngestMessages <= len(rep.Records) || rep.Replays == 0 {
		t.Fatalf("%d checks, %d replays dead-lettered again, %d DLQ messages for %d records, %d replays: the reconciliation has nothing to reconcile",
			checks, rep.ReplaysDeadLettered, rep.IngestMessages, len(rep.Records), rep.Replays)
	}
	if u := rep.Unreconciled(); len(u) > 0 {
		t.Errorf("does not reconcile: %q", u)
	}
	for _, id := range ids {
		if !id.Holds() {
			t.Errorf("the report does not reconcile: %s", id)
		}
		if !strings.Contains(out, id.String()) {
			t.Errorf("the report does not print %q", id.String())
		}
	}
	metricsChecked := 0
	for _, m := range rep.MetricChecks() {
		if m.Unchecked {
			continue
		}
		metricsChecked++
		if got, ok := rep.Metrics[m.Name]; !ok || !m.Agrees(got) {
			t.Errorf("metric %s reads %v (published %v), want %v: %s", m.Name, got, ok, m.Want, m.Why)
		}
	}
	// DLQ depth, poison, success rate and dominant share; the sweeper's
	// metrics are account-wide and not checked (other stacks publish them too).
	if metricsChecked < 4 || regexp.MustCompile(`\S\s+≠ \d`).MatchString(out) {
		t.Errorf("%d metrics checked; report:\n%s", metricsChecked, out)
	}
	for _, want := range []string{"redrive round 1 of", "the sweeper archives"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	if rep.DeadLettered == 0 || rep.ByClass["validation"] == 0 || rep.ByClass["exhausted"] == 0 || rep.Recalled == 0 ||
		rep.Final["RESOLVED"] == 0 || rep.Final["ARCHIVED"] == 0 || rep.Final["QUARANTINED"] == 0 || len(rep.Sweep.Archived) != rep.Final["ARCHIVED"] {
		t.Fatalf("the scenario did not exercise every path:\n%s", out)
	}
	// The ledger ran through the demo: every version in a segment, two
	// digests (one while it ran, one at the end) that verify, the counters
	// it counted equal to a recount, nothing left unanchored.
	if l := rep.Ledger; l == nil || l.RecordVersions <= len(rep.Records) || l.PolicyVersions == 0 || l.Signed != 2 || l.Newest != 2 || l.Segments == 0 ||
		len(l.Counters) < 3 || len(l.Problems) != 0 || l.Unanchored != 0 || l.Batches.Invocations == 0 {
		t.Fatalf("ledger %+v:\n%s", rep.Ledger, out)
	}
	if !strings.Contains(out, "ledger.Verify over the table and the bucket: 0 problems") {
		t.Errorf("the report does not show the ledger's verification:\n%s", out)
	}
	t.Logf("report:\n%s", out)
	if len(rep.Corrected) == 0 || len(rep.Policies) != 1 || rep.Policies[0].Redriven != len(rep.Corrected) {
		t.Fatalf("corrections %d, policies %+v: want every corrected record replayed by the policy", len(rep.Corrected), rep.Policies)
	}
	if rep.Sent != rep.Consumed+rep.DeadLettered {
		t.Fatalf("sent %d != consumed %d + dead-lettered %d", rep.Sent, rep.Consumed, rep.DeadLettered)
	}
	// Every function ran over events whose values are recognizable: none
	// may appear in a log line, an EMF metric line, or a CloudWatch metric's
	// name or dimensions.
	var published strings.Builder
	p := cloudwatch.NewListMetricsPaginator(st.Clients.CloudWatch, &cloudwatch.ListMetricsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Metrics {
			fmt.Fprintf(&published, "%s %s", aws.ToString(m.Namespace), aws.ToString(m.MetricName))
			for _, d := range m.Dimensions {
				fmt.Fprintf(&published, " %s=%s", aws.ToString(d.Name), aws.ToString(d.Value))
			}
			published.WriteString("\n")
		}
	}
	if !strings.Contains(published.String(), "DLQDepth") || !strings.Contains(logs.String(), "_aws") {
		t.Fatalf("no metrics to check:\n%s", published.String())
	}
	checked := 0
	for _, g := range demo.Generate(7, 400) {
		var e demo.Event
		if json.Unmarshal([]byte(g.Body), &e) != nil {
			continue
		}
		for _, v := range []string{e.EventID, e.NDC, e.Lot, e.Facility} {
			if len(v) < 5 {
				continue
			}
			checked++
			if strings.Contains(logs.String(), v) || strings.Contains(published.String(), v) {
				t.Fatalf("payload value %q in the functions' logs or metrics", v)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d payload values checked", checked)
	}
}
