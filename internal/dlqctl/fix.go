package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// FixOptions are the flags of dlqctl fix.
type FixOptions struct {
	ID          string
	PayloadFile string
	Reason      string
	// NewKey accepts a correction that changes the event's identity.
	NewKey bool
}

func (a *App) fixCmd() *cobra.Command {
	var o FixOptions
	c := idCommand("fix ID --payload-file F --reason TEXT", "Store a corrected payload beside the original (validated by the redrive function; redrive it after)", recordArg,
		func(ctx context.Context, id string) error {
			o.ID = id
			return a.Fix(ctx, o)
		})
	c.Flags().StringVar(&o.PayloadFile, "payload-file", "", "file holding the corrected payload, exactly as it is to be sent (required)")
	c.Flags().StringVar(&o.Reason, "reason", "", "why it was corrected (required; recorded in the sealed history)")
	c.Flags().BoolVar(&o.NewKey, "new-key", false, "accept a correction that changes the event's idempotency key (recorded)")
	return c
}

// Fix runs dlqctl fix: it asks the redrive function to correct the record,
// so the correction passes the same gate, under the function's role.
func (a *App) Fix(ctx context.Context, o FixOptions) error {
	if err := requireFlags(required{"--payload-file", o.PayloadFile == ""}, required{"--reason", strings.TrimSpace(o.Reason) == ""}); err != nil {
		return err
	}
	source, _, ok := strings.Cut(o.ID, "#")
	if !ok || source == "" {
		return &UsageError{fmt.Errorf("%q is not a record id (<source>#<key>)", o.ID)}
	}
	raw, err := os.ReadFile(o.PayloadFile)
	if err != nil {
		return fmt.Errorf("read the corrected payload: %w", err)
	}
	if !json.Valid(raw) {
		return fmt.Errorf("%s is not JSON: a correction must pass the source's schema", o.PayloadFile)
	}
	rep, err := a.invoke(ctx, redrive.Request{
		Action: redrive.ActionCorrect, Source: source, IDs: []string{o.ID}, RequestedBy: a.Actor,
		Reason: o.Reason, Payload: string(raw), NewKey: o.NewKey,
	}, fixFlags(o.ID))
	if err != nil {
		return err
	}
	if a.Output == "json" {
		return a.print(rep)
	}
	c := rep.Correction
	if c == nil {
		return errors.New("the redrive function reported no correction")
	}
	fmt.Fprintf(a.Out, "correction %d of %s stored by %s (%d bytes, sha256 %s, diff sha256 %s)\n", c.N, o.ID, c.Actor, c.BodySize, c.BodySHA256, c.DiffSHA256)
	if c.NewKey != "" {
		fmt.Fprintf(a.Out, "new idempotency key recorded: replays carry the corrected identity\n")
	}
	fmt.Fprintf(a.Out, "the original is kept; replay it with: dlqctl redrive --source %s --id %s\n", source, o.ID)
	return nil
}
