package demo

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Term is one count of a reconciliation line and what it counts.
type Term struct {
	N    int
	What string
}

// Identity is one line of the report's reconciliation: Whole is the sum of
// Parts. On a check line the whole and each part are measured on their own
// (the generator, the consumer, ingest, SQS, the table, the redrive and
// sweeper reports), so a line that does not add up is a real discrepancy,
// and fails the run. A Breakdown line splits one count by a property of
// the same items (each record has one class): it adds up by definition,
// and the report prints it as a breakdown, not as a check.
type Identity struct {
	Whole Term
	Parts []Term
	// Note, when set, says in a few words what the line means.
	Note string
	// Breakdown marks a line that holds by construction.
	Breakdown bool
}

// Holds reports whether the parts add up to the whole.
func (id Identity) Holds() bool {
	sum := 0
	for _, p := range id.Parts {
		sum += p.N
	}
	return sum == id.Whole.N
}

// String is the line as the report prints it: a check "whole = parts", a
// breakdown "whole: parts", either "whole ≠ parts (they sum to N)" when it
// does not add up.
func (id Identity) String() string {
	parts := make([]string, len(id.Parts))
	sum := 0
	for i, p := range id.Parts {
		parts[i] = term(p)
		sum += p.N
	}
	sep := " = "
	if id.Breakdown {
		sep = ": "
	}
	out := term(id.Whole) + sep + strings.Join(parts, " + ")
	if !id.Holds() {
		out = fmt.Sprintf("%s ≠ %s (they sum to %d)", term(id.Whole), strings.Join(parts, " + "), sum)
	}
	if id.Note != "" {
		out += "  — " + id.Note
	}
	return out
}

func term(t Term) string {
	if t.What == "" {
		return fmt.Sprint(t.N)
	}
	return fmt.Sprintf("%d %s", t.N, t.What)
}

// identities are the report's reconciliation lines, by section;
// BySignature holds one breakdown per class, in the order of the classes'
// names.
type identities struct {
	Queue, Ingest, Classes, BySignature, Replays, Final, Ledger []Identity
}

// all lists every line.
func (ids identities) all() []Identity {
	return slices.Concat(ids.Queue, ids.Ingest, ids.Classes, ids.BySignature, ids.Replays, ids.Final, ids.Ledger)
}

// Identities are the reconciliation lines the report prints: every count of
// the report as the sum of its parts, checks and breakdowns.
func (r *Report) Identities() []Identity { return r.identities().all() }

// Unreconciled lists what does not add up: each reconciliation line that
// prints ≠, and each checked metric that disagrees with the counts or was
// not published. Any of them fails the run (see OK).
func (r *Report) Unreconciled() []string {
	var out []string
	for _, id := range r.Identities() {
		if !id.Holds() {
			out = append(out, id.String())
		}
	}
	for _, m := range r.MetricChecks() {
		if m.Unchecked {
			continue
		}
		unit := metricUnit(m.Name, r.MetricUnits[m.Name])
		switch got, ok := r.Metrics[m.Name]; {
		case !ok:
			out = append(out, fmt.Sprintf("metric %s not published, want %s: %s", m.Name, formatMetric(m.Want, unit), m.Why))
		case !m.Agrees(got):
			out = append(out, fmt.Sprintf("metric %s %s ≠ %s, %s", m.Name, formatMetric(got, unit), formatMetric(m.Want, unit), m.Why))
		}
	}
	return out
}

func (r *Report) identities() identities {
	var ids identities
	deadLettered := Term{r.DeadLettered, "dead-lettered"}
	ids.Queue = []Identity{
		{Whole: Term{r.Sent, "events sent"}, Parts: []Term{{r.Consumed, "consumed"}, deadLettered},
			Note: "consumed: valid, not recalled, facility up; dead-lettered: distinct messages ingest took off the DLQ"},
		{Whole: deadLettered, Parts: []Term{
			{r.Kinds[Outage], "outage events (failed " + fmt.Sprint(StackParams["MaxReceiveCount"]) + " receives while " + OutageFacility + " was down)"},
			{r.Kinds[Malformed], "malformed (rejected on each receive)"},
			{r.Recalled, "recalled lots (dead-lettered on purpose by the consumer)"}}},
	}
	received := Term{r.Ingest.Received, "DLQ messages received"}
	distinct := Term{r.IngestMessages, "distinct messages"}
	ids.Ingest = []Identity{
		{Whole: received, Parts: []Term{{r.Ingest.Deleted, "stored and acknowledged"}, {r.Ingest.Failed, "reported as batch item failures"},
			{r.IngestDeletesRefused, "stored, delete refused"}}},
		{Whole: received, Parts: []Term{distinct, {r.IngestRedeliveries, "redeliveries"}}, Note: "distinct by message id; redeliveries by SQS's receive count"},
		{Whole: distinct, Parts: []Term{{len(r.Records), "first arrivals"}, {r.ReplaysDeadLettered, "re-arrivals"}},
			Note: "a new sealed record each; replays dead-lettered again, appended to their record"},
	}
	var classes []Term
	for _, c := range slices.Sorted(maps.Keys(r.ByClass)) {
		classes = append(classes, Term{r.ByClass[c], string(c)})
	}
	ids.Classes = []Identity{
		{Whole: Term{len(r.Records), "records"}, Parts: classes, Note: "by class", Breakdown: true},
		{Whole: Term{r.ByClass[quarantine.ClassExhausted], string(quarantine.ClassExhausted) + " records"}, Parts: []Term{{r.Kinds[Outage], "outage events"}}},
		{Whole: Term{r.ByClass[quarantine.ClassValidation], string(quarantine.ClassValidation) + " records"},
			Parts: []Term{{r.Kinds[Malformed], "malformed"}, {r.Recalled, "recalled lots"}}},
	}
	for _, c := range slices.Sorted(maps.Keys(r.ByClass)) {
		in := r.classSignatures(c)
		sigs := sortedByCount(in)
		id := Identity{Whole: Term{r.ByClass[c], string(c) + " records"}, Note: fmt.Sprintf("by signature, %d %s:", len(sigs), plural(len(sigs), "signature")), Breakdown: true}
		for _, s := range sigs {
			id.Parts = append(id.Parts, Term{N: in[s]})
		}
		ids.BySignature = append(ids.BySignature, id)
	}
	sent, settled, parked := 0, 0, 0
	for _, rr := range r.Rounds {
		sent += rr.Redriven.Count
		settled += rr.Settled.Count
		parked += rr.Parked.Count
	}
	byPolicy := 0
	for _, p := range r.Policies {
		byPolicy += p.Redriven
	}
	replays := Term{r.Replays, "replays sent"}
	ids.Replays = []Identity{
		{Whole: replays, Parts: []Term{{sent, "by the on-call's rounds"}, {byPolicy, "by the standing policy"}},
			Note: "replays sent: the records' redrive counts, in the table; the rest: the redrive reports"},
		{Whole: replays, Parts: []Term{{r.ReplaysConsumed, "consumed"}, {r.ReplaysDeadLettered, "dead-lettered again"}}, Note: "the recalled lots failing again: the re-arrivals above"},
	}
	var final []Term
	for _, st := range slices.Sorted(maps.Keys(r.Final)) {
		final = append(final, Term{r.Final[st], string(st)})
	}
	open := Term{r.Final[quarantine.StatusQuarantined], string(quarantine.StatusQuarantined)}
	var bySig []Term
	for _, s := range sortedByCount(r.OpenBySignature) {
		bySig = append(bySig, Term{N: r.OpenBySignature[s]})
	}
	resolved := Term{r.Final[quarantine.StatusResolved], string(quarantine.StatusResolved)}
	archived := Term{r.Final[quarantine.StatusArchived], string(quarantine.StatusArchived)}
	ids.Final = []Identity{
		{Whole: Term{len(r.Records), "records"}, Parts: final, Note: "records: as quarantined; the states: each dead-lettered event's record read back at the end"},
		{Whole: resolved, Parts: []Term{{r.Kinds[Outage], "outage events"}, {len(r.Corrected), "corrected"}}, Note: "their replay was consumed"},
		{Whole: resolved, Parts: []Term{{settled, "settled"}}, Note: "the redrive rows' settled column"},
		{Whole: archived, Parts: []Term{{parked, "parked as poison"}}, Note: "the recalled lots, at their redrive cap, then archived by the sweeper"},
	}
	if r.Sweep != nil {
		ids.Final = append(ids.Final, Identity{Whole: archived, Parts: []Term{{len(r.Sweep.Archived), "archived by the sweeper"}}, Note: "the sweeper's report"})
	}
	ids.Final = append(ids.Final,
		Identity{Whole: Term{r.Kinds[Malformed], "malformed"}, Parts: []Term{open, {len(r.Corrected), "corrected"}}, Note: "uncorrected, a malformed event is never replayed"},
		Identity{Whole: open, Parts: bySig, Note: "by signature, as dlqctl buckets lists them below", Breakdown: true})
	if r.Ledger != nil {
		ids.Ledger = r.Ledger.identities()
	}
	return ids
}

// identities are the ledger's lines: each version the table's stream
// holds is in a segment once, each digest run that signed wrote one object
// and the newest digest's signature verifies, and the counters the ledger
// counted from the stream are the table's recount.
func (l *LedgerReport) identities() []Identity {
	ids := []Identity{
		{Whole: Term{l.RecordEntries, "record versions ledgered"}, Parts: []Term{{l.RecordVersions, "record versions written"}},
			Note: "ledgered: entries of the bucket's segments; written: the table's stream, read apart from its start"},
		{Whole: Term{l.PolicyEntries, "policy versions ledgered"}, Parts: []Term{{l.PolicyVersions, "policy versions written"}}, Note: "the standing policy's changes, likewise"},
		{Whole: Term{l.Digests, "digests in the bucket"}, Parts: []Term{{l.Signed, "digest runs that signed one"}}},
		{Whole: Term{int(l.Newest), "digests up to the newest whose signature verifies (its n)"}, Parts: []Term{{l.Digests, "in the bucket"}}, Note: "numbered from 1, no gap"},
	}
	for _, c := range l.Counters {
		ids = append(ids, Identity{Whole: Term{int(c.Counted), c.Name + " counted"}, Parts: []Term{{int(c.Recounted), "in the table"}}})
	}
	return ids
}

// classSignatures counts class c's records by signature.
func (r *Report) classSignatures(c quarantine.Class) map[string]int {
	in := map[string]int{}
	for _, rec := range r.Records {
		if rec.FailureClass == c {
			in[rec.FailureSignature]++
		}
	}
	return in
}

// sortedByCount returns m's keys, largest count first, then by name.
func sortedByCount(m map[string]int) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if d := m[b] - m[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys
}

// MetricCheck is what a published metric should read, from the report's
// own counts.
type MetricCheck struct {
	Name string
	Want float64
	Why  string
	// Unchecked metrics depend on timing: Why explains them, Want is unused.
	Unchecked bool
}

// Agrees reports whether got matches the expectation (to the precision
// the report prints).
func (m MetricCheck) Agrees(got float64) bool { return m.Unchecked || math.Abs(got-m.Want) < 0.05 }

// MetricChecks are the metrics the report's counts predict.
func (r *Report) MetricChecks() []MetricCheck {
	parked := 0
	resolved, back := r.Final[quarantine.StatusResolved], r.ReplaysDeadLettered
	for _, rr := range r.Rounds {
		parked += rr.Parked.Count
	}
	checks := []MetricCheck{
		{metrics.MetricDLQDepth, 0, "ingest drained the DLQ", false},
		{metrics.MetricPoison, float64(r.Final[quarantine.StatusParked]), "PARKED now (the parked ones are ARCHIVED)", false},
		{metrics.MetricNewPoison, float64(parked), "parked as poison that no metrics run published before (the rounds above; this run is the first)", false},
		{metrics.MetricArrivals, 0, "records' arrivals in the last whole minute (depends on when the run crossed one)", true},
		{metrics.MetricOldestAge, 0, "age of the oldest QUARANTINED record (about the run's length)", true},
	}
	if r.Sweep != nil {
		// The sweeper's metrics carry no dimension: account-wide, they
		// also hold what any other stack in the account (or in this test
		// process, whose kumo is shared) published in the hour.
		checks = append(checks, MetricCheck{sweeper.MetricArchived, float64(len(r.Sweep.Archived)), fmt.Sprintf("account-wide: every stack's sweeper (this run archived %d)", len(r.Sweep.Archived)), true},
			MetricCheck{sweeper.MetricFailures, float64(r.Sweep.Failed), fmt.Sprintf("account-wide: every stack's sweeper (this run failed %d)", r.Sweep.Failed), true})
	}
	if resolved+back > 0 {
		checks = append(checks, MetricCheck{metrics.MetricSuccessRate, 100 * float64(resolved) / float64(resolved+back),
			fmt.Sprintf("%d RESOLVED / (%d RESOLVED + %d came back)", resolved, resolved, back), false})
	}
	if open := r.Final[quarantine.StatusQuarantined]; open > 0 {
		top := sortedByCount(r.OpenBySignature)[0]
		checks = append(checks, MetricCheck{metrics.MetricDominantShare, 100 * float64(r.OpenBySignature[top]) / float64(open),
			fmt.Sprintf("%d of the %d QUARANTINED are %s", r.OpenBySignature[top], open, top), false})
	}
	return checks
}

// formatMetric prints a metric value in its unit: counts as integers,
// seconds and percentages to one decimal.
func formatMetric(v float64, unit string) string {
	switch unit {
	case "Percent":
		return fmt.Sprintf("%.1f %%", v)
	case "Seconds":
		return fmt.Sprintf("%.1f s", v)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// metricUnit is the unit of a metric the metrics or sweeper function
// publishes, when the read-back did not carry one.
func metricUnit(name, unit string) string {
	switch {
	case unit != "" && unit != "None":
		return unit
	case strings.HasSuffix(name, "Seconds"):
		return "Seconds"
	case name == metrics.MetricSuccessRate || name == metrics.MetricDominantShare:
		return "Percent"
	}
	return "Count"
}

// short shortens s to n runes, marking the cut with "…".
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

// roundLabel names a redrive row.
func roundLabel(i int, rr *redrive.Report) string {
	if rr.Action == redrive.ActionSettle {
		return "settle"
	}
	return fmt.Sprintf("round %d", i+1)
}
