package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

// ShowOptions are the flags of dlqctl show.
type ShowOptions struct {
	ID string
	// Payload prints the body and attributes; the read is recorded in the
	// record's sealed history first.
	Payload bool
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
	c.Flags().BoolVar(&o.Payload, "payload", false, "print the payload (the read is recorded, who and when)")
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
		for attempt := 0; ; attempt++ {
			next, err := r.NotePayloadRead(a.Actor, a.Now())
			if err != nil {
				return err
			}
			err = store.Replace(ctx, next, r.Version)
			if err == nil {
				r = next
				break
			}
			if !errors.Is(err, quarantine.ErrVersionConflict) || attempt > 5 {
				return fmt.Errorf("record the payload read: %w", err)
			}
			if r, err = store.Get(ctx, o.ID); err != nil {
				return err
			}
		}
		if r.Status != quarantine.StatusArchived {
			if body, err = quarantine.LoadBody(ctx, payloads, r); err != nil {
				return err
			}
			if attrs, err = quarantine.LoadAttributes(ctx, payloads, r); err != nil {
				return err
			}
		}
	}
	sealErr := quarantine.Verify(r)
	view := *r
	view.Body, view.Attributes = "", nil
	if a.Output == "json" {
		out := map[string]any{"record": &view, "seal_verifies": sealErr == nil}
		if o.Payload {
			out["payload"] = string(body)
			out["attributes"] = attrs
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
	row("version", r.Version)
	if sealErr != nil {
		row("seal", "DOES NOT VERIFY: "+sealErr.Error())
	} else {
		row("seal", r.Seal+" (verifies)")
	}
	tw.Flush()
	fmt.Fprintf(a.Out, "\nhistory (%d attempts, newest %d kept):\n", r.AttemptCount, len(r.Attempts))
	tw = tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tSTAGE\tACTOR\tREASON")
	for _, at := range r.Attempts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", at.At.UTC().Format(time.RFC3339), at.Stage, at.Actor, at.Reason)
	}
	tw.Flush()
	if o.Payload {
		fmt.Fprintf(a.Out, "\npayload (read recorded as %s):\n%s\n", a.Actor, body)
		for k, v := range attrs {
			fmt.Fprintf(a.Out, "attribute %s (%s): %s%x\n", k, v.DataType, v.StringValue, v.BinaryValue)
		}
	}
	return nil
}
