package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Print writes the human-readable report. Its counts reconcile on the
// page: each "whole = part + part" line is an Identity (see Identities).
func (r *Report) Print(w io.Writer, sample int) {
	ids := r.identities()
	line := func(id Identity) { fmt.Fprintf(w, "  %s\n", id) }
	fmt.Fprintf(w, "\nDLQ Quarantine demo\n===================\n")
	fmt.Fprintf(w, "(a \"whole = parts\" line is a check: whole and parts are measured apart; a \"whole: parts\" line splits one count and adds up\n by definition; a line that does not add up prints ≠ and fails the run; terms at the end)\n\n")
	fmt.Fprintf(w, "source queue (the consumer, simulated, is the user's service):\n")
	for _, id := range ids.Queue {
		line(id)
	}
	fmt.Fprintf(w, "\ningest (%d invocations by the DLQ's event source mapping):\n", r.Ingest.Invocations)
	for _, id := range ids.Ingest {
		line(id)
	}
	fmt.Fprintf(w, "\nrecords sealed: %d, by failure class and signature (stage|reason|schema), as quarantined:\n", len(r.Records))
	for _, id := range ids.Classes {
		line(id)
	}
	for i, c := range slices.Sorted(maps.Keys(r.ByClass)) {
		line(ids.BySignature[i])
		in := r.classSignatures(c)
		for _, s := range sortedByCount(in) {
			fmt.Fprintf(w, "    %6d  %5.1f%%  %s\n", in[s], 100*float64(in[s])/float64(max(len(r.Records), 1)), s)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nsealed records (first %d):\n", sample)
	fmt.Fprintf(tw, "  dlq_id\tclass\tstatus\tattempts\tseal\n")
	for _, rec := range r.Records[:min(sample, len(r.Records))] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", short(rec.DLQID, 48), rec.FailureClass, rec.Status, rec.AttemptCount, short(rec.Seal, 17))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nthe outage clears; redrive with cleared reasons %v:\n", r.ClearedReasons)
	for i, rr := range r.Rounds {
		fmt.Fprintf(tw, "  %s\tredriven %d\tskipped %d\theld %d\tparked as poison %d\tfailed %d\tsettled %d\n",
			roundLabel(i, rr), rr.Redriven.Count, rr.Skipped.Count, rr.Held.Count, rr.Parked.Count, rr.Failed.Count, rr.Settled.Count)
	}
	tw.Flush()
	if len(r.Corrected) > 0 {
		fmt.Fprintf(w, "\na pharmacist corrected %d malformed NDCs (the correct action, as dlqctl fix sends it, each approved by a second operator; the originals kept and sealed);\n", len(r.Corrected))
		for _, p := range r.Policies {
			fmt.Fprintf(w, "standing policy %s (signature operator|payload corrected) replayed %d of them\n", p.ID, p.Redriven)
		}
	}
	if r.Approvals > 0 {
		fmt.Fprintf(w, "\nfour eyes: operator-a asked for %d high-risk actions through the operator endpoint (each redrive round above the approval threshold, each correction, the policy);\n", r.Approvals)
		fmt.Fprintf(w, "each waited as a pending approval until a second principal, %s, approved it; each history entry names its approval (dlqctl approvals, docs/identity.md)\n", r.Approver)
	}
	fmt.Fprintf(w, "\nreplays:\n")
	for _, id := range ids.Replays {
		line(id)
	}
	fmt.Fprintf(w, "\nfinal states of the dead-lettered events:\n")
	for _, id := range ids.Final {
		line(id)
	}
	r.printSources(w)
	if r.Sweep != nil {
		fmt.Fprintf(w, "\nsweeper: %d parked records archived into Object Lock (COMPLIANCE), %d failed; first %d:\n", len(r.Sweep.Archived), r.Sweep.Failed, min(sample, len(r.Sweep.Archived)))
		for _, a := range r.Sweep.Archived[:min(sample, len(r.Sweep.Archived))] {
			fmt.Fprintf(tw, "  s3://%s/%s\tversion %s\tretained until %s\n", a.Bucket, a.Key, a.VersionID, a.RetainUntil.Format(time.DateOnly))
		}
		tw.Flush()
	}
	if l := r.Ledger; l != nil {
		fmt.Fprintf(w, "\nledger (the table's stream, %d batches by its mapping, %d of them failed and delivered again; %d segments chaining %d %s in the Object Lock bucket):\n",
			l.Batches.Invocations, l.Batches.Failed, l.Segments, l.Shards, plural(l.Shards, "shard"))
		for _, id := range ids.Ledger {
			line(id)
		}
		fmt.Fprintf(w, "  ledger.Verify over the table and the bucket: %d %s, %d %s not yet anchored\n", len(l.Problems), plural(len(l.Problems), "problem"), l.Unanchored, plural(l.Unanchored, "change"))
	}
	if len(r.Metrics) > 0 {
		fmt.Fprintf(w, "\nDLQ health, as CloudWatch holds it (namespace DLQQuarantine), against the counts above:\n")
		want := map[string]MetricCheck{}
		for _, m := range r.MetricChecks() {
			want[m.Name] = m
		}
		for _, name := range slices.Sorted(maps.Keys(r.Metrics)) {
			v := r.Metrics[name]
			unit := metricUnit(name, r.MetricUnits[name])
			m, ok := want[name]
			switch {
			case !ok:
				fmt.Fprintf(tw, "  %s\t%s\t\n", name, formatMetric(v, unit))
			case m.Unchecked:
				fmt.Fprintf(tw, "  %s\t%s\t  %s\n", name, formatMetric(v, unit), m.Why)
			case m.Agrees(v):
				fmt.Fprintf(tw, "  %s\t%s\t= %s\n", name, formatMetric(v, unit), m.Why)
			default:
				fmt.Fprintf(tw, "  %s\t%s\t≠ %s, %s\n", name, formatMetric(v, unit), formatMetric(m.Want, unit), m.Why)
			}
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nterms:\n")
	for _, t := range legend {
		fmt.Fprintf(w, "  %s\n", t)
	}
	fmt.Fprintf(w, "\ninvariants:\n")
	check := func(ok bool, what string, n int) { fmt.Fprintf(w, "  [%s] %s (%d)\n", mark(ok), what, n) }
	check(len(r.Lost) == 0, "no dead-lettered message lost", len(r.Lost))
	check(len(r.Unexpected) == 0 && len(r.Records) == r.DeadLettered, "exactly one record per dead-lettered message", len(r.Records))
	check(len(r.SealFailures) == 0, "every seal verifies and every body is verbatim", len(r.SealFailures))
	check(len(r.Duplicated) == 0, "no event consumed twice", len(r.Duplicated))
	check(len(r.WrongState) == 0, "outage events resolved, recalled lots poison-parked at the cap, malformed never replayed", len(r.WrongState))
	check(len(r.BadStubs) == 0, "every archive object verifies (checksum, seal chain, COMPLIANCE lock)", len(r.BadStubs))
	var ledgerProblems []string
	if r.Ledger != nil {
		ledgerProblems = r.Ledger.Problems
		check(len(ledgerProblems) == 0, "the ledger verifies: every item is its newest ledgered version, versions, segments and digests chain, signatures valid", len(ledgerProblems))
	}
	if len(r.Sources) > 0 {
		bad := 0
		for _, s := range r.Sources {
			if !s.OK() {
				bad++
			}
		}
		check(bad == 0, "every source's records under that source, one per failing event, none misrouted (triage per source)", len(r.Sources))
	}
	unreconciled := r.Unreconciled()
	check(len(unreconciled) == 0, "every count reconciles and every checked metric agrees (no ≠ above)", len(unreconciled))
	for _, l := range [][]string{r.Lost, r.Unexpected, r.SealFailures, r.Duplicated, r.WrongState, r.BadStubs, ledgerProblems} {
		for _, x := range l[:min(len(l), 5)] {
			fmt.Fprintf(w, "    %s\n", x)
		}
	}
	for _, x := range unreconciled {
		fmt.Fprintf(w, "    does not reconcile: %s\n", x)
	}
	for _, s := range r.Sources {
		for _, x := range s.Problems[:min(len(s.Problems), 5)] {
			fmt.Fprintf(w, "    %s: %s\n", s.Name, x)
		}
		if s.Records != s.Failing {
			fmt.Fprintf(w, "    %s: %d records for %d failing events\n", s.Name, s.Records, s.Failing)
		}
	}
	fmt.Fprintf(w, "\nfinished in %s\n", r.Elapsed.Round(100*time.Millisecond))
}

// legend explains the report's terms, one line each.
var legend = []string{
	"exhausted: a valid event whose consumer ran out of receives (a transient failure: a replay may succeed)",
	"validation: an event that must be fixed before a replay (malformed, or declared permanent by the consumer)",
	"signature: stage|reason|schema version, the key records are triaged and replayed by",
	"re-arrival: a replay that failed again and came back through the DLQ, appended to its record (not a new one)",
	"redelivery: the same DLQ message handed to ingest again (visibility expired; SQS's receive count above 1); stored once",
	"batch item failure: a message ingest could not store, left on the DLQ to be received again",
	"delete refused: SQS refused the acknowledgement because the receipt had expired; the message comes again as a redelivery",
	"settled: RESOLVED once a replay has not come back within the settle window",
	"parked as poison: a record that failed every replay up to its redrive cap, kept for a human, then archived",
	"skipped / held: already in flight or handled / failing today's schema, not sent",
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// mark is an invariant's mark in a report: "ok  " when it held.
func mark(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

// MarshalSummary is the report as JSON, for scripts.
func (r *Report) MarshalSummary() ([]byte, error) {
	type source struct {
		Name        string                    `json:"name"`
		DLQ         string                    `json:"dlq"`
		Sent        int                       `json:"sent"`
		Records     int                       `json:"records"`
		ByClass     map[quarantine.Class]int  `json:"by_class"`
		BySignature map[string]int            `json:"by_signature"`
		Replayed    int                       `json:"replayed"`
		Final       map[quarantine.Status]int `json:"final"`
		Problems    int                       `json:"problems"`
	}
	srcs := []source{}
	for _, s := range r.Sources {
		srcs = append(srcs, source{s.Name, s.DLQ, s.Sent, s.Records, s.ByClass, s.BySignature, s.Replayed, s.Final, len(s.Problems)})
	}
	return json.Marshal(map[string]any{
		"sent": r.Sent, "consumed": r.Consumed, "dead_lettered": r.DeadLettered, "records": len(r.Records),
		"lost": len(r.Lost), "unexpected": len(r.Unexpected), "seal_failures": len(r.SealFailures), "by_class": r.ByClass,
		"sources": srcs,
	})
}

// printSources writes the triage per source: what each source sent and
// dead-lettered, its records by class and signature, what was replayed
// and where its records ended.
func (r *Report) printSources(w io.Writer) {
	if len(r.Sources) == 0 {
		return
	}
	shared := map[string]int{}
	for _, s := range r.Sources {
		shared[s.DLQ]++
	}
	fmt.Fprintf(w, "\ntriage per source (%d sources; a DLQ that several share is routed by each message's DeadLetterQueueSourceArn):\n", len(r.Sources))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  source\tDLQ\tsent\tfailed\tDLQ messages\trecords\treplayed\treplays consumed\tdeferred (FIFO order)\tfinal\t\n")
	for _, s := range r.Sources {
		dlq := s.DLQ
		if shared[s.DLQ] > 1 {
			dlq += fmt.Sprintf(" (shared by %d)", shared[s.DLQ])
		}
		var final []string
		for _, st := range slices.Sorted(maps.Keys(s.Final)) {
			final = append(final, fmt.Sprintf("%s %d", st, s.Final[st]))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t[%s]\n", s.Name, dlq, s.Sent, s.Failing, s.DLQMessages, s.Records, s.Replayed, s.Consumed,
			s.Deferred, strings.Join(final, ", "), strings.TrimSpace(mark(s.OK())))
	}
	tw.Flush()
	for _, s := range r.Sources {
		fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Setup)
		for _, c := range slices.Sorted(maps.Keys(s.ByClass)) {
			fmt.Fprintf(w, "    %-10s %5d", c, s.ByClass[c])
			var sigs []string
			for _, sig := range sortedByCount(s.ClassSignatures[c]) {
				sigs = append(sigs, fmt.Sprintf("%d %s", s.ClassSignatures[c][sig], sig))
			}
			fmt.Fprintf(w, "  %s\n", strings.Join(sigs, "; "))
		}
	}
}
