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

// SoakCheck is one checked row of the soak's table: N is what it counts,
// Failures what broke it (none when it held).
type SoakCheck struct {
	What     string
	N        int
	Failures []string
	// Value, when set, is printed instead of N.
	Value string
}

// OK reports whether the row held.
func (c SoakCheck) OK() bool { return len(c.Failures) == 0 }

// Soak check names the ledger's rows carry (the test asserts them).
const (
	CheckVersionsWritten  = "versions written (record changes in the stream = the records' versions summed)"
	CheckVersionsLedgered = "versions ledgered (segment entries: each change once, none missing, none extra)"
	CheckAnchoringLag     = "anchoring lag p50 / p99 / max (change → the digest that anchored it; every change anchored)"
	CheckCounted          = "counters vs the deltas of every change in the stream (exact)"
	CheckLedgerVerify     = "ledger.Verify over the table and the bucket: problems"
)

// Checks are the soak's checked rows, in the table's order. OK holds when
// every one holds.
func (r *SoakReport) Checks() []SoakCheck {
	dups := r.Duplicates
	if r.Quarantined != r.DeadLettered {
		dups = append(slices.Clone(dups), fmt.Sprintf("%d records for %d dead-lettered messages", r.Quarantined, r.DeadLettered))
	}
	ledgered := slices.Concat(r.LedgerMissing, r.LedgerDuplicates, r.LedgerExtra)
	if r.Ledgered != r.StreamChanges && len(ledgered) == 0 {
		ledgered = append(ledgered, fmt.Sprintf("%d entries for %d changes", r.Ledgered, r.StreamChanges))
	}
	lag := fmt.Sprintf("%s / %s / %s over %d changes", lagAt(r.Lags, 0.5).Round(time.Millisecond), lagAt(r.Lags, 0.99).Round(time.Millisecond),
		lagAt(r.Lags, 1).Round(time.Millisecond), len(r.Lags))
	return []SoakCheck{
		{What: "lost (dead-lettered, no record)", N: len(r.Lost), Failures: r.Lost},
		{What: "duplicate records", N: len(r.Duplicates), Failures: dups},
		{What: "seals or bodies that fail to verify", N: len(r.SealFailures), Failures: r.SealFailures},
		{What: "duplicate sends, of which not explained by a lease takeover or a possible send", N: len(r.Unexplained), Failures: r.Unexplained,
			Value: fmt.Sprintf("%d, %d", r.DuplicateSends, len(r.Unexplained))},
		{What: "events consumed more often than explained", N: len(r.Overconsumed), Failures: r.Overconsumed},
		{What: "records in the wrong final state", N: len(r.WrongState), Failures: r.WrongState},
		{What: fmt.Sprintf("bucket objects with more than one version (of %d archive objects and %d ledger objects)", r.ArchiveObjects, r.Segments+r.Digests),
			N: len(r.MultiVersion), Failures: r.MultiVersion},
		{What: "archived records that fail verification", N: len(r.BadStubs), Failures: r.BadStubs},
		{What: fmt.Sprintf("metrics counters that differ from a recount of the table (state, open; %d shards)", r.Counters), N: len(r.CounterDrift), Failures: r.CounterDrift},
		{What: CheckVersionsWritten, N: r.StreamChanges, Failures: r.VersionDrift,
			Value: fmt.Sprintf("%d (%d new versions = %d summed)", r.StreamChanges, r.VersionChanges, r.VersionsSum)},
		{What: CheckVersionsLedgered, N: r.Ledgered, Failures: ledgered,
			Value: fmt.Sprintf("%d in %d segments (%d missing, %d twice, %d extra)", r.Ledgered, r.Segments, len(r.LedgerMissing), len(r.LedgerDuplicates), len(r.LedgerExtra))},
		{What: CheckAnchoringLag, N: len(r.Lags), Failures: r.Unanchored, Value: lag},
		{What: CheckCounted, N: len(r.CountedDrift), Failures: r.CountedDrift,
			Value: fmt.Sprintf("%d (of %d counter shards)", len(r.CountedDrift), r.CountedKeys)},
		{What: CheckLedgerVerify, N: len(r.LedgerProblems), Failures: r.LedgerProblems,
			Value: fmt.Sprintf("%d (%d items, %d entries, %d digests, newest #%d)", len(r.LedgerProblems), r.Verified.Items, r.Verified.Entries, r.Verified.Digests, r.Verified.LastDigest)},
	}
}

// OK reports whether every invariant held.
func (r *SoakReport) OK() bool {
	for _, c := range r.Checks() {
		if !c.OK() {
			return false
		}
	}
	return true
}

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
	fmt.Fprintf(tw, "ledger\t%d batches delivered, %d failed and delivered again; %d digest runs: %d wrote, %d adopted a crashed run's digest\n",
		r.LedgerBatches, r.LedgerRetried, r.DigestRuns, r.DigestsWritten, r.DigestsAdopted)
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
	fmt.Fprintf(w, "\naimed crashes:\n")
	for _, p := range r.AimedCrashes {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "random crash points (first 8):\n")
	for _, p := range r.CrashPoints[:min(8, len(r.CrashPoints))] {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "\nchecks:\n")
	checks := r.Checks()
	for _, c := range checks {
		v := c.Value
		if v == "" {
			v = fmt.Sprint(c.N)
		}
		fmt.Fprintf(tw, "  [%s]\t%s\t%s\n", mark(c.OK()), c.What, v)
	}
	tw.Flush()
	for _, c := range checks {
		for _, x := range c.Failures[:min(len(c.Failures), 5)] {
			fmt.Fprintf(w, "    %s\n", x)
		}
	}
	if r.FinalDigestLag > 0 {
		fmt.Fprintf(w, "note: the last digest run reported a lag of %.1f s with every change anchored (a head's pending_since left by a crashed digest run)\n", r.FinalDigestLag)
	}
	fmt.Fprintf(w, "\nfinished in %s (%s)\n", r.Elapsed.Round(time.Millisecond), strings.Join(r.Phases, ", "))
}
