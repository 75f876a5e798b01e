package demo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/faults"
)

// Print writes the soak's table.
func (r *SoakReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nDLQ Quarantine soak\n===================\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "messages sent\t%d\n", r.Sent)
	fmt.Fprintf(tw, "dead-lettered\t%d\n", r.DeadLettered)
	fmt.Fprintf(tw, "records quarantined\t%d\n", r.Quarantined)
	fmt.Fprintf(tw, "ingest\t%d invocations, %d received, %d stored, %d batch item failures\n", r.Ingest.Invocations, r.Ingest.Received, r.Ingest.Deleted, r.Ingest.Failed)
	for _, st := range slices.Sorted(maps.Keys(r.Final)) {
		fmt.Fprintf(tw, "final %s\t%d\n", st, r.Final[st])
	}
	tw.Flush()
	fmt.Fprintf(w, "\nfaults injected:\n")
	kinds := slices.Collect(maps.Keys(r.Faults))
	for _, k := range faults.LostKinds { // listed even when none happened
		if _, ok := r.Faults[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(tw, "  %s\t%d\n", k, r.Faults[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Invocations)) {
		fmt.Fprintf(tw, "  %s processes\t%d, %d crashed, %d failed without crashing\n", k, r.Invocations[k], r.Crashes[k], r.Errors[k])
	}
	fmt.Fprintf(tw, "  metrics runs retried\t%d\n", r.MetricsRetries)
	tw.Flush()
	fmt.Fprintf(w, "AWS requests by the functions:")
	for _, k := range slices.Sorted(maps.Keys(r.Calls)) {
		fmt.Fprintf(w, " %s %d", k, r.Calls[k])
	}
	fmt.Fprintf(w, "\ncrash points (first 8):\n")
	for _, p := range r.CrashPoints[:min(8, len(r.CrashPoints))] {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "\nchecks:\n")
	row := func(ok bool, what string, n int) { fmt.Fprintf(tw, "  [%s]\t%s\t%d\n", mark(ok), what, n) }
	row(len(r.Lost) == 0, "lost (dead-lettered, no record)", len(r.Lost))
	row(len(r.Duplicates) == 0 && r.Quarantined == r.DeadLettered, "duplicate records", len(r.Duplicates))
	row(len(r.SealFailures) == 0, "seals or bodies that fail to verify", len(r.SealFailures))
	row(len(r.Unexplained) == 0, "duplicate sends", r.DuplicateSends)
	row(len(r.Unexplained) == 0, "  of which not explained by a lease takeover or a possible send", len(r.Unexplained))
	row(len(r.Overconsumed) == 0, "events consumed more often than explained", len(r.Overconsumed))
	row(len(r.WrongState) == 0, "records in the wrong final state", len(r.WrongState))
	row(len(r.MultiVersion) == 0, fmt.Sprintf("archive objects with more than one version (of %d)", r.ArchiveObjects), len(r.MultiVersion))
	row(len(r.BadStubs) == 0, "archived records that fail verification", len(r.BadStubs))
	row(len(r.CounterDrift) == 0, "metrics counters that differ from a recount", len(r.CounterDrift))
	tw.Flush()
	for _, l := range [][]string{r.Lost, r.Duplicates, r.SealFailures, r.Unexplained, r.Overconsumed, r.WrongState, r.MultiVersion, r.BadStubs, r.CounterDrift} {
		for _, x := range l[:min(len(l), 5)] {
			fmt.Fprintf(w, "    %s\n", x)
		}
	}
	fmt.Fprintf(w, "\nfinished in %s (%s)\n", r.Elapsed.Round(time.Millisecond), strings.Join(r.Phases, ", "))
}
