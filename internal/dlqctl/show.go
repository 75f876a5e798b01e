package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
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
	c := idCommand("show ID", "Show a record (by its id, or a unique prefix ending with … such as a table's short id) and its history; the payload only with --payload (recorded, full id only)", recordArg, func(ctx context.Context, id string) error {
		o.ID = id
		return a.Show(ctx, o)
	})
	c.Flags().BoolVar(&o.Payload, "payload", false, "print the payload and corrections (the read is recorded, who and when)")
	c.Flags().BoolVar(&o.Diff, "diff", false, "print each correction as a JSON diff (paths only; values with --payload)")
	return c
}

// shown is what show prints: the record as read (after its payload read
// was recorded), the payload and corrections when asked for, the diffs
// when asked for, and whether the seal verifies.
type shown struct {
	r           *quarantine.Record
	body        []byte
	attrs       map[string]quarantine.Attribute
	corrections []string
	diffs       []correctionDiff
	sealErr     error
	// failure is the failure detail without payload values (nil: none).
	failure *failureView
}

// Show runs dlqctl show: read the record, record a payload read before
// anything is shown, load what was asked for, then print it.
func (a *App) Show(ctx context.Context, o ShowOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if _, prefix := idPrefix(o.ID); prefix && o.Payload {
		// The read is audited against the record named: a prefix could
		// name another than the one meant.
		return &UsageError{fmt.Errorf("--payload needs the full id: %q is a prefix; show it without --payload to see its full id", o.ID)}
	}
	id, err := a.resolveID(ctx, o.ID)
	if err != nil {
		return err
	}
	store, _, _, err := a.store(ctx)
	if err != nil {
		return err
	}
	r, err := a.getRecord(ctx, store, id)
	if err != nil {
		return err
	}
	v := shown{r: r}
	if o.Payload {
		if err := a.readPayload(ctx, &v); err != nil {
			return err
		}
	}
	if o.Diff {
		if v.diffs, err = diffCorrections(v, o.Payload); err != nil {
			return err
		}
	}
	v.sealErr = quarantine.Verify(v.r)
	if !o.Payload || a.Output == "json" {
		v.failure = a.failureSummary(ctx, v.r)
	}
	if a.Output == "json" {
		return a.showJSON(v, o)
	}
	a.showText(v, o)
	return nil
}

// readPayload asks the redrive function to read v.r's payload: it records
// the read in the sealed history (one conditional write) and returns the
// version it wrote with the body, attributes and correction bodies, loaded
// under its role (from the claim check when offloaded). The operator needs
// no write permission on the table and no read permission on the payload
// bucket. A record that fails verification is held by the function.
func (a *App) readPayload(ctx context.Context, v *shown) error {
	id := v.r.DLQID
	rep, err := a.invoke(ctx, redrive.Request{Action: redrive.ActionRead, Source: v.r.Source, IDs: []string{id}, RequestedBy: a.Actor}, recordFlags(id))
	if err != nil {
		return a.heldByFunction(id, err)
	}
	if rep.Record == nil || rep.Payload == nil {
		return errors.New("the redrive function returned no payload for the read")
	}
	if rep.Record.DLQID != id {
		return fmt.Errorf("the redrive function read %s, not %s", rep.Record.DLQID, id)
	}
	v.r, v.body, v.attrs = rep.Record, rep.Payload.Body, rep.Payload.Attributes
	for _, c := range rep.Payload.Corrections {
		v.corrections = append(v.corrections, string(c))
	}
	return nil
}

// showJSON prints v as one JSON document, the record without its bodies.
func (a *App) showJSON(v shown, o ShowOptions) error {
	view := v.r.Clone()
	view.Body, view.Attributes = "", nil
	for i := range view.Corrections {
		view.Corrections[i].Body = ""
	}
	if !o.Payload {
		view.FailureDetail = "" // the validator's words may quote the payload
	}
	out := map[string]any{"record": view, "seal_verifies": v.sealErr == nil}
	if v.failure != nil {
		out["failure_detail"] = v.failure
	}
	if o.Payload {
		out["payload"] = string(v.body)
		out["attributes"] = cmpOrEmpty(v.attrs)
		out["corrections"] = append([]string{}, v.corrections...)
	}
	if o.Diff {
		out["diffs"] = append([]correctionDiff{}, v.diffs...)
	}
	return a.writeJSON(out)
}

// cmpOrEmpty is m, or an empty map for nil (-o json prints {}, never null).
func cmpOrEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// showText prints v for a person, section by section.
func (a *App) showText(v shown, o ShowOptions) {
	a.showFields(v.r, v.sealErr)
	a.showFailureDetail(v, o.Payload)
	a.showAttempts(v.r)
	a.showReads(v.r)
	a.showCorrections(v.r)
	a.showDiffs(v.diffs)
	if o.Payload {
		a.showPayload(v)
	}
}

func (a *App) showFields(r *quarantine.Record, sealErr error) {
	tw := newTable(a.Out)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("id", r.DLQID)
	row("source", r.Source)
	row("status", fmt.Sprintf("%s since %s", r.Status, r.StatusSince.UTC().Format(time.RFC3339)))
	row("class", r.FailureClass)
	row("signature", r.FailureSignature)
	if r.FailureStage != "" || r.FailureReason != "" {
		row("failure", fmt.Sprintf("%s: %s", r.FailureStage, r.FailureReason))
	}
	if r.SchemaVersion != "" {
		row("schema version", r.SchemaVersion)
	}
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
}

// showFailureDetail prints the failure detail: without payload the
// value-free summary (each failing location and what the schema wants
// there) or that it is withheld; with payload (the read recorded) the
// validator's own words, which may quote the payload.
func (a *App) showFailureDetail(v shown, payload bool) {
	r := v.r
	if strings.TrimSpace(r.FailureDetail) == "" {
		return
	}
	if payload {
		fmt.Fprintln(a.Out, "\nfailure detail (the validator's words; the read is recorded):")
		for _, line := range strings.Split(strings.TrimRight(r.FailureDetail, "\n"), "\n") {
			fmt.Fprintf(a.Out, "  %s\n", line)
		}
		return
	}
	if v.failure == nil || v.failure.Withheld != "" {
		why := ""
		if v.failure != nil && v.failure.Why != "" {
			why = " (" + v.failure.Why + ")"
		}
		fmt.Fprintf(a.Out, "\nfailure %s%s\n", Withheld, why)
		return
	}
	fmt.Fprintln(a.Out, "\nfailure detail:")
	for _, l := range v.failure.Summary {
		fmt.Fprintf(a.Out, "  %s\n", l)
	}
	fmt.Fprintln(a.Out, "  (from the schema, without payload values; --payload shows the validator's words, audited)")
}

func (a *App) showAttempts(r *quarantine.Record) {
	fmt.Fprintf(a.Out, "\nhistory (%d entries, %d kept: the first arrival and the newest):\n", r.AttemptCount, len(r.Attempts))
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "  AT\tSTAGE\tACTOR\tREASON")
	for _, at := range r.Attempts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", at.At.UTC().Format(time.RFC3339), at.Stage, at.Actor, at.Reason)
	}
	tw.Flush()
}

func (a *App) showReads(r *quarantine.Record) {
	if r.ReadCount == 0 {
		return
	}
	fmt.Fprintf(a.Out, "\npayload reads (%d, newest %d kept):\n", r.ReadCount, len(r.Reads))
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "  AT\tACTOR")
	for _, rd := range r.Reads {
		fmt.Fprintf(tw, "  %s\t%s\n", rd.At.UTC().Format(time.RFC3339), rd.Actor)
	}
	tw.Flush()
}

func (a *App) showCorrections(r *quarantine.Record) {
	if len(r.Corrections) == 0 {
		return
	}
	fmt.Fprintf(a.Out, "\noriginal body kept verbatim (sha256 %s); %d correction(s), replays send the latest:\n", r.BodySHA256, len(r.Corrections))
	tw := newTable(a.Out)
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

func (a *App) showDiffs(diffs []correctionDiff) {
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
}

func (a *App) showPayload(v shown) {
	reader := a.Actor
	if v.r != nil && len(v.r.Reads) > 0 {
		reader = v.r.Reads[len(v.r.Reads)-1].Actor // as the function recorded it
	}
	fmt.Fprintf(a.Out, "\npayload (read recorded as %s):\n%s\n", reader, v.body)
	for k, at := range v.attrs {
		fmt.Fprintf(a.Out, "attribute %s (%s): %s%x\n", k, at.DataType, at.StringValue, at.BinaryValue)
	}
	for i, c := range v.corrections {
		fmt.Fprintf(a.Out, "correction %d:\n%s\n", i+1, c)
	}
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

// diffCorrections diffs each correction of v.r against the body it
// corrects. With withValues the bodies are those the function's read
// returned (v.body, v.corrections) and values are shown; without, only
// bodies kept in the item are diffed (dlqctl reads no claim-check object:
// such a diff is unavailable, --payload shows it) and values are left out.
func diffCorrections(v shown, withValues bool) ([]correctionDiff, error) {
	r := v.r
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
	bodyOf := func(i int) ([]byte, error) { // -1: the original
		switch {
		case withValues && i < 0:
			return v.body, nil
		case withValues && i < len(v.corrections):
			return []byte(v.corrections[i]), nil
		case withValues:
			return nil, fmt.Errorf("the read returned %d correction bodies, the record has %d", len(v.corrections), len(r.Corrections))
		case i < 0 && r.BodyRef != nil, i >= 0 && r.Corrections[i].BodyRef != nil:
			return nil, errClaimChecked
		case i < 0:
			return quarantine.LoadBody(context.Background(), nil, r)
		}
		return quarantine.CorrectionBody(context.Background(), nil, r, &r.Corrections[i])
	}
	prev, prevErr := bodyOf(-1)
	from := "the original"
	for i := range r.Corrections {
		c := &r.Corrections[i]
		body, err := bodyOf(i)
		for _, e := range []error{prevErr, err} {
			if e != nil && !errors.Is(e, errClaimChecked) {
				return nil, e
			}
		}
		if prevErr != nil || err != nil {
			out = append(out, correctionDiff{N: c.N, From: from, Ops: []diffOp{}, Unavailable: "a body it compares is claim-checked in S3, which dlqctl does not read; --payload shows the diff (the read is recorded); diff sha256 " + c.DiffSHA256})
			prev, prevErr, from = body, err, fmt.Sprintf("correction %d", c.N)
			continue
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
		prev, prevErr, from = body, nil, fmt.Sprintf("correction %d", c.N)
	}
	return out, nil
}

// errClaimChecked: a body is in the claim check, which dlqctl reads not.
var errClaimChecked = errors.New("claim-checked body")
