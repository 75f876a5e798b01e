package dlqctl

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// DominantShare is the share at which one signature is flagged as the
// dominant cause.
const DominantShare = 0.40

// BucketsOptions are the flags of dlqctl buckets.
type BucketsOptions struct {
	Source string
}

// Bucket is one failure signature's share of the open records.
type Bucket struct {
	Signature string    `json:"signature"`
	Count     int       `json:"count"`
	Share     float64   `json:"share"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	ExampleID string    `json:"example_id"`
	Dominant  bool      `json:"dominant"`
}

func (a *App) bucketsCmd() *cobra.Command {
	var o BucketsOptions
	c := command("buckets", "Open records grouped by failure signature, ranked", func(ctx context.Context) error { return a.Buckets(ctx, o) })
	c.Flags().StringVar(&o.Source, "source", "", "source queue (all when empty)")
	return c
}

// Group ranks records into buckets: by count, then signature (a
// deterministic tie-break); the example is the smallest id.
func Group(recs []*quarantine.Record) []Bucket {
	by := map[string]*Bucket{}
	for _, r := range recs {
		b := by[r.FailureSignature]
		if b == nil {
			b = &Bucket{Signature: r.FailureSignature, FirstSeen: r.FirstSeen.Time, LastSeen: r.LastSeen.Time, ExampleID: r.DLQID}
			by[r.FailureSignature] = b
		}
		b.Count++
		if r.FirstSeen.Before(b.FirstSeen) {
			b.FirstSeen = r.FirstSeen.Time
		}
		if r.LastSeen.After(b.LastSeen) {
			b.LastSeen = r.LastSeen.Time
		}
		if r.DLQID < b.ExampleID {
			b.ExampleID = r.DLQID
		}
	}
	out := make([]Bucket, 0, len(by))
	for _, b := range by {
		b.Share = float64(b.Count) / float64(len(recs))
		b.Dominant = b.Share >= DominantShare
		out = append(out, *b)
	}
	slices.SortFunc(out, func(x, y Bucket) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Signature, y.Signature))
	})
	return out
}

// Buckets runs dlqctl buckets over the open (QUARANTINED) records.
func (a *App) Buckets(ctx context.Context, o BucketsOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if err := a.checkSource(ctx, "", o.Source, false, a.hasRecords(ctx, o.Source)); err != nil {
		return err
	}
	recs, err := a.list(ctx, []quarantine.Status{quarantine.StatusQuarantined}, quarantine.ListQuery{Source: o.Source, Limit: 1000}, 0)
	if err != nil {
		return err
	}
	buckets := Group(recs)
	if a.Output == "json" {
		return a.writeJSON(buckets)
	}
	if len(buckets) == 0 {
		fmt.Fprintln(a.Out, "no open records")
		return nil
	}
	fmt.Fprintf(a.Out, "%d open records in %d failure signatures\n\n", len(recs), len(buckets))
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "COUNT\tSHARE\tSIGNATURE\tFIRST SEEN\tLAST SEEN\tEXAMPLE")
	for _, b := range buckets {
		flag := ""
		if b.Dominant {
			flag = "  << dominant cause"
		}
		fmt.Fprintf(tw, "%d\t%.1f%%\t%s\t%s\t%s\t%s%s\n", b.Count, 100*b.Share, b.Signature,
			b.FirstSeen.UTC().Format(time.RFC3339), b.LastSeen.UTC().Format(time.RFC3339), ShortID(b.ExampleID), flag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.Out, "\n"+signatureNote)
	return nil
}
