package dlqctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LsOptions are the flags of dlqctl ls.
type LsOptions struct {
	Status    string
	Class     string
	Source    string
	Signature string
	OlderThan time.Duration
	Limit     int
	// Held lists the records under an integrity hold instead (every
	// status unless --status is given); other listings leave them out.
	Held bool
}

func (a *App) lsCmd() *cobra.Command {
	var o LsOptions
	var c *cobra.Command
	c = command("ls", "List records (no payloads)", func(ctx context.Context) error {
		if o.Held && !c.Flags().Changed("status") {
			o.Status = "all"
		}
		return a.Ls(ctx, o)
	})
	f := c.Flags()
	f.StringVar(&o.Status, "status", "QUARANTINED", "status, comma-separated statuses, or all")
	f.StringVar(&o.Class, "class", "", "failure class(es): validation, exhausted, poison")
	f.StringVar(&o.Source, "source", "", "source queue")
	f.StringVar(&o.Signature, "signature", "", "failure signature")
	f.DurationVar(&o.OlderThan, "older-than", 0, "only records first seen at least this long ago")
	f.IntVar(&o.Limit, "limit", 50, "most records to show (0: all)")
	f.BoolVar(&o.Held, "held", false, "list the records set aside because they failed verification (every status unless --status)")
	return c
}

// Ls runs dlqctl ls.
func (a *App) Ls(ctx context.Context, o LsOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	sts, err := statuses(o.Status)
	if err != nil {
		return err
	}
	cls, err := classes(o.Class)
	if err != nil {
		return err
	}
	if o.Limit < 0 || o.OlderThan < 0 {
		return &UsageError{fmt.Errorf("--limit and --older-than must not be negative")}
	}
	q := quarantine.ListQuery{Source: o.Source, Classes: cls, Limit: 500, Held: o.Held}
	if o.Signature != "" {
		q.Signatures = []string{o.Signature}
	}
	if o.OlderThan > 0 {
		q.FirstSeenTo = a.Now().Add(-o.OlderThan)
	}
	if err := a.checkSource(ctx, "", o.Source, false, a.hasRecords(ctx, o.Source)); err != nil {
		return err
	}
	recs, err := a.list(ctx, sts, q, o.Limit)
	if err != nil {
		return err
	}
	out := make([]Summary, 0, len(recs))
	for _, r := range recs {
		out = append(out, summarize(r))
	}
	if a.Output == "json" {
		return a.writeJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(a.Out, "no records match")
		return nil
	}
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "ID\tSTATUS\tCLASS\tFAILURES\tREPLAYS\tREDRIVES\tFIRST SEEN\tSIGNATURE")
	trimmed := false
	for _, s := range out {
		more := ""
		if s.HistoryTrimmed {
			more, trimmed = "+", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d%s\t%s\t%d/%d\t%s\t%s\n", ShortID(s.ID), s.Status, s.Class, s.Failures, more, replaysCell(s),
			s.RedriveCount, s.RedriveCap, s.FirstSeen.UTC().Format(time.RFC3339), s.Signature)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.Out, "\nFAILURES: arrivals from the DLQ (the first and each return after a replay); REPLAYS: redrive sends, N (M?) when M of them got no answer from SQS (possibly sent: counted toward the cap, perhaps enqueued); REDRIVES: rounds/cap")
	if trimmed {
		fmt.Fprintln(a.Out, "N+: older entries of the attempt history were dropped; at least N")
	}
	fmt.Fprintln(a.Out, signatureNote)
	return nil
}

// signatureNote explains the SIGNATURE column under the tables that show it.
const signatureNote = "SIGNATURE: stage|reason|schema version, digits shown as # (v# is any version v1, v2, …); --signature and --cleared take it as shown"

// replaysCell is ls's REPLAYS cell: the replays, N+ when older entries of
// the history were dropped, and (M?) when M of them got no answer from
// SQS (possibly sent).
func replaysCell(s Summary) string {
	c := fmt.Sprint(s.Replays)
	if s.HistoryTrimmed {
		c += "+"
	}
	if s.PossiblySent > 0 {
		c += fmt.Sprintf(" (%d?)", s.PossiblySent)
	}
	return c
}
