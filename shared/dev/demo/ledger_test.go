package demo

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// unequal matches a reconciliation line or metric that does not add up.
var unequal = regexp.MustCompile(`\S\s+≠ \d`)

func TestIdentityHoldsOnlyWhenThePartsAddUp(t *testing.T) {
	ok := Identity{Whole: Term{10, "sent"}, Parts: []Term{{7, "consumed"}, {3, "dead-lettered"}}, Note: "why"}
	if !ok.Holds() || ok.String() != "10 sent = 7 consumed + 3 dead-lettered  — why" {
		t.Fatalf("holds %v, %q", ok.Holds(), ok.String())
	}
	bad := Identity{Whole: Term{10, "sent"}, Parts: []Term{{7, "consumed"}, {2, ""}}}
	if bad.Holds() || bad.String() != "10 sent ≠ 7 consumed + 2 (they sum to 9)" {
		t.Fatalf("holds %v, %q", bad.Holds(), bad.String())
	}
}

func TestShortMarksTheCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdef", 4, "abc…"},
		{"ab", 4, "ab"},
		{"ééééé", 3, "éé…"},
	} {
		if got := short(c.in, c.n); got != c.want {
			t.Errorf("short(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestFormatMetricByUnit(t *testing.T) {
	for _, c := range []struct {
		name, unit string
		v          float64
		want       string
	}{
		{"OldestQuarantinedAgeSeconds", "Seconds", 23.756089545000002, "23.8 s"},
		{"OldestQuarantinedAgeSeconds", "", 41.772458755, "41.8 s"},
		{"RedriveSuccessRate", "Percent", 91.65613147914033, "91.7 %"},
		{"DominantSignatureShare", "None", 36.31578947368421, "36.3 %"},
		{"DLQDepth", "Count", 22, "22"},
		{"ArrivalsPerMinute", "", 0, "0"},
		{"Odd", "Count", 2.25, "2.2"},
	} {
		if got := formatMetric(c.v, metricUnit(c.name, c.unit)); got != c.want {
			t.Errorf("%s %v %s: %q, want %q", c.name, c.v, c.unit, got, c.want)
		}
	}
}

// fakeReport is a small report whose every count reconciles.
func fakeReport() *Report {
	recs := []*quarantine.Record{
		{DLQID: "src#" + strings.Repeat("a", 64), FailureClass: quarantine.ClassExhausted, FailureSignature: "consumer|retries exhausted|v#", Seal: strings.Repeat("b", 64), Status: quarantine.StatusQuarantined},
		{DLQID: "src#2", FailureClass: quarantine.ClassValidation, FailureSignature: "gate|body is not json|v#", Seal: strings.Repeat("c", 64)},
		{DLQID: "src#3", FailureClass: quarantine.ClassValidation, FailureSignature: "allocation|lot under recall|v#", Seal: strings.Repeat("d", 64)},
	}
	return &Report{
		Sent: 10, Consumed: 7, DeadLettered: 3, Recalled: 1,
		Kinds:   map[Kind]int{Good: 7, Outage: 1, Malformed: 1, Recalled: 1},
		Records: recs,
		ByClass: map[quarantine.Class]int{quarantine.ClassExhausted: 1, quarantine.ClassValidation: 2},
		BySignature: map[string]int{"consumer|retries exhausted|v#": 1, "gate|body is not json|v#": 1,
			"allocation|lot under recall|v#": 1},
		Ingest:              localrunner.Stats{Invocations: 2, Received: 5, Deleted: 5},
		IngestMessages:      5,
		IngestRedeliveries:  0,
		Replays:             3,
		ReplaysConsumed:     1,
		ReplaysDeadLettered: 2,
		Rounds: []*redrive.Report{
			{Redriven: redrive.Outcome{Count: 2}},
			{Redriven: redrive.Outcome{Count: 1}, Settled: redrive.Outcome{Count: 1}},
			{Parked: redrive.Outcome{Count: 1}},
		},
		Final:           map[quarantine.Status]int{quarantine.StatusResolved: 1, quarantine.StatusArchived: 1, quarantine.StatusQuarantined: 1},
		OpenBySignature: map[string]int{"gate|body is not json|v#": 1},
		Corrected:       map[string]bool{},
		Sweep:           &sweeper.Report{Archived: make([]sweeper.Archived, 1)},
		Metrics: map[string]float64{"RedriveSuccessRate": 100.0 / 3, "DLQDepth": 0, "OldestQuarantinedAgeSeconds": 23.756089545000002,
			"PoisonRecords": 0, "NewPoisonRecords": 1, "ArchivedRecords": 1, "ArchiveFailures": 0, "DominantSignatureShare": 100},
		MetricUnits: map[string]string{"RedriveSuccessRate": "Percent", "DLQDepth": "Count", "OldestQuarantinedAgeSeconds": "Seconds"},
	}
}

func TestReportReconciles(t *testing.T) {
	r := fakeReport()
	var out bytes.Buffer
	r.Print(&out, 3)
	for _, id := range r.Identities() {
		if !id.Holds() {
			t.Errorf("does not hold: %s", id)
		}
		if !strings.Contains(out.String(), id.String()) {
			t.Errorf("report lacks %q", id.String())
		}
	}
	for _, want := range []string{
		"10 events sent = 7 consumed + 3 dead-lettered  — consumed: valid, not recalled, facility up",
		"5 DLQ messages received = 5 stored and acknowledged + 0 reported as batch item failures + 0 stored, delete refused",
		"5 distinct messages = 3 first arrivals + 2 re-arrivals",
		"2 validation records: 1 + 1  — by signature, 2 signatures:",
		"3 replays sent = 3 by the on-call's rounds + 0 by the standing policy",
		"src#aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…", "bbbbbbbbbbbbbbbb…",
		"23.8 s", "33.3 %   = 1 RESOLVED / (1 RESOLVED + 2 came back)",
		"re-arrival: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if unequal.MatchString(out.String()) || !r.OK() || len(r.Unreconciled()) != 0 {
		t.Errorf("a line does not add up (OK %v, %q):\n%s", r.OK(), r.Unreconciled(), out.String())
	}
	for _, want := range []string{
		"3 records: 1 exhausted + 2 validation  — by class",
		"1 exhausted records = 1 outage events", "2 validation records = 1 malformed + 1 recalled lots",
		"5 DLQ messages received = 5 distinct messages + 0 redeliveries",
		"3 replays sent = 3 by the on-call's rounds + 0 by the standing policy",
		"1 ARCHIVED = 1 archived by the sweeper",
		"[ok  ] every count reconciles and every checked metric agrees (no ≠ above) (0)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The redeliveries are measured apart from the distinct messages (by SQS's
// receive count, not as the difference), so "received = distinct +
// redeliveries" fails when they disagree: here SQS hands message a again
// with a receive count of 1. Each source is counted apart: a message of
// the shared DLQ counts for the source its DeadLetterQueueSourceArn names,
// one without it for the DLQ's own source.
func TestIngestTapCountsRedeliveriesApart(t *testing.T) {
	const dlq, other = "arn:aws:sqs:us-east-1:000000000000:dlq", "arn:aws:sqs:us-east-1:000000000000:returns"
	tap := newIngestTap(map[string]string{dlq: "source"})
	h := tap.wrap(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	msg := func(id, n string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, EventSourceARN: dlq, Attributes: map[string]string{"ApproximateReceiveCount": n}}
	}
	fromOther := msg("c", "2")
	fromOther.Attributes["DeadLetterQueueSourceArn"] = other
	for _, batch := range [][]events.SQSMessage{{msg("a", "1"), msg("b", "1"), fromOther}, {msg("a", "2")}, {msg("a", "1")}} {
		if _, err := h(context.Background(), events.SQSEvent{Records: batch}); err != nil {
			t.Fatal(err)
		}
	}
	if tap.count("source") != 2 || tap.redeliveries("source") != 1 || tap.count("returns") != 1 || tap.redeliveries("returns") != 1 {
		t.Fatalf("source: %d distinct, %d redeliveries; want 2 and 1; returns: %d and %d, want 1 and 1",
			tap.count("source"), tap.redeliveries("source"), tap.count("returns"), tap.redeliveries("returns"))
	}
	r := fakeReport()
	r.Ingest.Received, r.IngestMessages, r.IngestRedeliveries = 4, tap.count("source"), tap.redeliveries("source")
	var out bytes.Buffer
	r.Print(&out, 3)
	if r.OK() || !strings.Contains(out.String(), "4 DLQ messages received ≠ 2 distinct messages + 1 redeliveries (they sum to 3)") {
		t.Fatalf("OK %v:\n%s", r.OK(), out.String())
	}
}

// A count that does not reconcile shows on the page, and in Identities.
func TestReportShowsWhatDoesNotAddUp(t *testing.T) {
	r := fakeReport()
	r.ReplaysDeadLettered = 1 // the consumer saw one replay fewer fail than ingest re-received
	r.Metrics["RedriveSuccessRate"] = 90
	var out bytes.Buffer
	r.Print(&out, 3)
	broken := 0
	for _, id := range r.Identities() {
		if !id.Holds() {
			broken++
		}
	}
	if broken != 2 {
		t.Errorf("%d identities broken, want 2 (ingest's distinct messages, the replays)", broken)
	}
	// Any ≠ fails the run: the report is not OK, and its invariants say
	// which lines do not add up.
	if r.OK() || len(r.Unreconciled()) != 3 {
		t.Errorf("OK %v with unreconciled %q: want false, the two lines and the metric", r.OK(), r.Unreconciled())
	}
	if !unequal.MatchString(out.String()) {
		t.Errorf("unequal does not find the lines that do not add up")
	}
	for _, want := range []string{"5 distinct messages ≠ 3 first arrivals + 1 re-arrivals (they sum to 4)", "3 replays sent ≠ 1 consumed + 1 dead-lettered again (they sum to 2)",
		"RedriveSuccessRate           90.0 %   ≠ 50.0 %",
		"[FAIL] every count reconciles and every checked metric agrees (no ≠ above) (3)",
		"    does not reconcile: 5 distinct messages ≠ 3 first arrivals + 1 re-arrivals (they sum to 4)",
		"    does not reconcile: metric RedriveSuccessRate 90.0 % ≠ 50.0 %"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The ledger's lines reconcile what the bucket holds with the table's
// stream and the counters with the recount; a version missing from the
// segments, a counter off by one or a problem of the verification fails
// the run.
func TestLedgerLinesReconcile(t *testing.T) {
	r := fakeReport()
	r.Ledger = &LedgerReport{RecordVersions: 9, PolicyVersions: 2, RecordEntries: 9, PolicyEntries: 2, Segments: 3, Shards: 1, Digests: 2, Signed: 2, Newest: 2,
		Counters: []CounterCheck{{Name: "QUARANTINED/exhausted", Counted: 1, Recounted: 1}}, Batches: localrunner.StreamStats{Invocations: 4, Failed: 1}}
	var out bytes.Buffer
	r.Print(&out, 3)
	for _, want := range []string{
		"ledger (the table's stream, 4 batches by its mapping, 1 of them failed and delivered again; 3 segments chaining 1 shard in the Object Lock bucket):",
		"9 record versions ledgered = 9 record versions written  — ledgered: entries of the bucket's segments",
		"2 policy versions ledgered = 2 policy versions written",
		"2 digests in the bucket = 2 digest runs that signed one",
		"2 digests up to the newest whose signature verifies (its n) = 2 in the bucket",
		"1 QUARANTINED/exhausted counted = 1 in the table",
		"ledger.Verify over the table and the bucket: 0 problems, 0 changes not yet anchored",
		"[ok  ] the ledger verifies",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if !r.OK() || unequal.MatchString(out.String()) {
		t.Fatalf("OK %v, unreconciled %q:\n%s", r.OK(), r.Unreconciled(), out.String())
	}
	r.Ledger.RecordEntries = 8
	r.Ledger.Counters[0].Counted = 2
	r.Ledger.Problems = []string{"rewritten src#2: not the ledgered version"}
	out.Reset()
	r.Print(&out, 3)
	if r.OK() || len(r.Unreconciled()) != 2 {
		t.Fatalf("OK %v with unreconciled %q: want false, two lines", r.OK(), r.Unreconciled())
	}
	for _, want := range []string{
		"8 record versions ledgered ≠ 9 record versions written (they sum to 9)",
		"2 QUARANTINED/exhausted counted ≠ 1 in the table (they sum to 1)",
		"[FAIL] the ledger verifies", "    rewritten src#2: not the ledgered version",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The triage per source shows each source, and a source whose record
// landed under another source (a shared DLQ's message routed wrong)
// fails the run, named on the page.
func TestTriagePerSourceNamesAMisroutedRecord(t *testing.T) {
	source := func(name, dlq string) *SourceReport {
		return &SourceReport{Name: name, Setup: "test", DLQ: dlq, Sent: 5, Failing: 2, DLQMessages: 2, Records: 2, Replayed: 1, Consumed: 1,
			ByClass:         map[quarantine.Class]int{quarantine.ClassExhausted: 1, quarantine.ClassValidation: 1},
			BySignature:     map[string]int{"consumer|retries exhausted|v#": 1, "gate|body is not json|v#": 1},
			ClassSignatures: map[quarantine.Class]map[string]int{quarantine.ClassExhausted: {"consumer|retries exhausted|v#": 1}, quarantine.ClassValidation: {"gate|body is not json|v#": 1}},
			Final:           map[quarantine.Status]int{quarantine.StatusResolved: 1, quarantine.StatusQuarantined: 1}}
	}
	r := fakeReport()
	r.Sources = []*SourceReport{source("inventory", "dlq"), source("returns", "dlq"), source("ledger.fifo", "ledger-dlq.fifo")}
	var out bytes.Buffer
	r.Print(&out, 3)
	if !r.OK() {
		t.Fatalf("a report whose sources all hold is not OK:\n%s", out.String())
	}
	for _, want := range []string{"triage per source (3 sources;", "dlq (shared by 2)", "ledger-dlq.fifo  ", "  returns: test\n",
		"    exhausted      1  1 consumer|retries exhausted|v#\n", "none misrouted (triage per source) (3)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	r.Sources[1].Records--
	r.Sources[1].Problems = []string{"ret-000007: no record (misrouted under inventory)"}
	out.Reset()
	r.Print(&out, 3)
	if r.OK() || !strings.Contains(out.String(), "[FAIL]\n") || !strings.Contains(out.String(), "    returns: ret-000007: no record (misrouted under inventory)\n") ||
		!strings.Contains(out.String(), "    returns: 1 records for 2 failing events\n") {
		t.Fatalf("OK %v with a misrouted record:\n%s", r.OK(), out.String())
	}
}
