package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ShowOptions are the flags of dlqctl show.
type ShowOptions struct {
	ID string
	// Payload prints the body and attributes; the read is recorded in the
	// record's sealed history first.
	Payload bool
	// Diff prints each correction as a structural JSON diff from the body
	// it corrects: operations and paths only, values too with Payload.
	Diff bool
}

func (a *App) showCmd() *cobra.Command {
	var o ShowOptions
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show a record and its history; the payload only with --payload (recorded)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			return a.Show(cmd.Context(), o)
		},
	}
	c.Flags().BoolVar(&o.Payload, "payload", false, "print the payload and corrections (the read is recorded, who and when)")
	c.Flags().BoolVar(&o.Diff, "diff", false, "print each correction as a JSON diff (paths only; values with --payload)")
	return c
}

// Show runs dlqctl show.
func (a *App) Show(ctx context.Context, o ShowOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	store, _, payloads, err := a.store(ctx)
	if err != nil {
		return err
	}
	r, err := store.Get(ctx, o.ID)
	if errors.Is(err, quarantine.ErrNotFound) {
		return fmt.Errorf("no record %q in table %s", o.ID, a.Table)
	}
	if err != nil {
		return describe(err, a.Table)
	}
	var body []byte
	var attrs map[string]quarantine.Attribute
	if o.Payload {
		// Record the read before showing anything.
		var failed *quarantine.Record // the version whose read cannot be recorded
		var ferr error
		next, err := store.Update(ctx, o.ID, func(cur *quarantine.Record) (*quarantine.Record, error) {
			next, err := cur.NotePayloadRead(a.Actor, a.Now())
			if err != nil {
				failed, ferr = cur, err
			}
			return next, err
		})
		switch {
		case failed != nil && quarantine.IsIntegrityFailure(ferr):
			return a.holdRecord(ctx, store, failed, ferr) // the read cannot be recorded under its seal
		case failed != nil:
			return ferr
		case err != nil:
			return fmt.Errorf("record the payload read: %w", err)
		}
		r = next
		if r.Status != quarantine.StatusArchived {
			if body, err = quarantine.LoadBody(ctx, payloads, r); quarantine.IsIntegrityFailure(err) {
				return a.holdRecord(ctx, store, r, err)
			} else if err != nil {
				return err
			}
			if attrs, err = quarantine.LoadAttributes(ctx, payloads, r); quarantine.IsIntegrityFailure(err) {
				return a.holdRecord(ctx, store, r, err)
			} else if err != nil {
				return err
			}
		}
	}
	var corrections []string
	if o.Payload && r.Status != quarantine.StatusArchived {
		for i := range r.Corrections {
			b, err := quarantine.CorrectionBody(ctx, payloads, r, &r.Corrections[i])
			if err != nil {
				return err
			}
			corrections = append(corrections, string(b))
		}
	}
	var diffs []correctionDiff
	if o.Diff {
		if diffs, err = diffCorrections(ctx, payloads, r, o.Payload); err != nil {
			return err
		}
	}
	sealErr := quarantine.Verify(r)
	view := r.Clone()
	view.Body, view.Attributes = "", nil
	for i := range view.Corrections {
		view.Corrections[i].Body = ""
	}
	if a.Output == "json" {
		out := map[string]any{"record": view, "seal_verifies": sealErr == nil}
		if o.Payload {
			out["payload"] = string(body)
			out["attributes"] = attrs
			out["corrections"] = corrections
		}
		if o.Diff {
			out["diffs"] = diffs
		}
		enc := json.NewEncoder(a.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("id", r.DLQID)
	row("source", r.Source)
	row("status", fmt.Sprintf("%s since %s", r.Status, r.StatusSince.UTC().Format(time.RFC3339)))
	row("class", r.FailureClass)
	row("signature", r.FailureSignature)
	row("key", fmt.Sprintf("from %s", r.KeyOrigin))
	row("first / last seen", r.FirstSeen.UTC().Format(time.RFC3339)+" / "+r.LastSeen.UTC().Format(time.RFC3339))
	row("redrives", fmt.Sprintf("%d of %d", r.RedriveCount, r.RedriveCap))
	row("body", fmt.Sprintf("%d bytes, sha256 %s", r.BodySize, r.BodySHA256))
	if r.Archive != nil {
		row("archive", fmt.Sprintf("s3://%s/%s (version %s) until %s", r.Archive.Bucket, r.Archive.Key, r.Archive.VersionID, r.Archive.RetainUntil))
	}
	if p := r.Predecessor; p != nil {
		row("successor of", fmt.Sprintf("%s (%s; its seal %s)", p.ID, p.Reason, p.Seal))
	}
	row("version", r.Version)
	if sealErr != nil {
		row("seal", "DOES NOT VERIFY: "+sealErr.Error())
	} else {
		row("seal", r.Seal+" (verifies)")
	}
	tw.Flush()
	fmt.Fprintf(a.Out, "\nhistory (%d entries, %d kept: the first arrival and the newest):\n", r.AttemptCount, len(r.Attempts))
	tw = tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tSTAGE\tACTOR\tREASON")
	for _, at := range r.Attempts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", at.At.UTC().Format(time.RFC3339), at.Stage, at.Actor, at.Reason)
	}
	tw.Flush()
	if r.ReadCount > 0 {
		fmt.Fprintf(a.Out, "\npayload reads (%d, newest %d kept):\n", r.ReadCount, len(r.Reads))
		tw = tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tACTOR")
		for _, rd := range r.Reads {
			fmt.Fprintf(tw, "  %s\t%s\n", rd.At.UTC().Format(time.RFC3339), rd.Actor)
		}
		tw.Flush()
	}
	if len(r.Corrections) > 0 {
		fmt.Fprintf(a.Out, "\noriginal body kept verbatim (sha256 %s); %d correction(s), replays send the latest:\n", r.BodySHA256, len(r.Corrections))
		tw = tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  N\tAT\tACTOR\tREASON\tBYTES\tSHA256\tDIFF SHA256")
		for _, c := range r.Corrections {
			reason := c.Reason
			if c.NewKey != "" {
				reason += " (new idempotency key)"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\n", c.N, c.At.UTC().Format(time.RFC3339), c.Actor, reason, c.BodySize, c.BodySHA256[:16], c.DiffSHA256[:16])
		}
		tw.Flush()
	}
	for _, d := range diffs {
		fmt.Fprintf(a.Out, "\ncorrection %d, from %s:\n", d.N, d.From)
		if d.Unavailable != "" {
			fmt.Fprintf(a.Out, "  (%s)\n", d.Unavailable)
		}
		for _, op := range d.Ops {
			if op.Value != nil {
				fmt.Fprintf(a.Out, "  %-8s %s = %s\n", op.Op, op.Path, op.Value)
			} else {
				fmt.Fprintf(a.Out, "  %-8s %s\n", op.Op, op.Path)
			}
		}
	}
	if o.Payload {
		fmt.Fprintf(a.Out, "\npayload (read recorded as %s):\n%s\n", a.Actor, body)
		for k, v := range attrs {
			fmt.Fprintf(a.Out, "attribute %s (%s): %s%x\n", k, v.DataType, v.StringValue, v.BinaryValue)
		}
		for i, c := range corrections {
			fmt.Fprintf(a.Out, "correction %d:\n%s\n", i+1, c)
		}
	}
	return nil
}

// correctionDiff is one correction as a structural diff.
type correctionDiff struct {
	N           int      `json:"n"`
	From        string   `json:"from"`
	Ops         []diffOp `json:"ops"`
	Unavailable string   `json:"unavailable,omitempty"`
}

type diffOp struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is the new value, as JSON, only when payloads may be shown.
	Value json.RawMessage `json:"value,omitempty"`
}

// diffCorrections diffs each correction against the body it corrects.
// Values are left out unless withValues.
func diffCorrections(ctx context.Context, payloads quarantine.PayloadStore, r *quarantine.Record, withValues bool) ([]correctionDiff, error) {
	var out []correctionDiff
	if len(r.Corrections) == 0 {
		return nil, nil
	}
	if r.Status == quarantine.StatusArchived {
		for _, c := range r.Corrections {
			out = append(out, correctionDiff{N: c.N, From: "archive", Unavailable: "the bodies are in the archive object; diff sha256 " + c.DiffSHA256})
		}
		return out, nil
	}
	prev, err := quarantine.LoadBody(ctx, payloads, r)
	if err != nil {
		return nil, err
	}
	from := "the original"
	for i := range r.Corrections {
		c := &r.Corrections[i]
		body, err := quarantine.CorrectionBody(ctx, payloads, r, c)
		if err != nil {
			return nil, err
		}
		ops, err := quarantine.Diff(prev, body)
		if err != nil {
			return nil, err
		}
		d := correctionDiff{N: c.N, From: from, Ops: []diffOp{}}
		for _, op := range ops {
			o := diffOp{Op: op.Type, Path: op.Path}
			if op.From != "" {
				o.Path = op.From + " -> " + op.Path
			}
			if withValues && op.Value != nil {
				o.Value, _ = json.Marshal(op.Value)
			}
			d.Ops = append(d.Ops, o)
		}
		out = append(out, d)
		prev, from = body, fmt.Sprintf("correction %d", c.N)
	}
	return out, nil
}
