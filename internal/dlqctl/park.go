package dlqctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ParkOptions are the flags of dlqctl park and unpark.
type ParkOptions struct {
	ID     string
	Reason string
	Park   bool
}

func (a *App) parkCmd(park bool) *cobra.Command {
	o := ParkOptions{Park: park}
	use, short := "park ID --reason TEXT", "Park a quarantined record by hand"
	if !park {
		use, short = "unpark ID --reason TEXT", "Return a parked record to quarantine"
	}
	c := idCommand(use, short, func(ctx context.Context, id string) error {
		o.ID = id
		return a.ParkRecord(ctx, o)
	})
	c.Flags().StringVar(&o.Reason, "reason", "", "why (required; recorded in the sealed history)")
	return c
}

// ParkRecord runs dlqctl park or unpark with one conditional write.
func (a *App) ParkRecord(ctx context.Context, o ParkOptions) error {
	if o.Reason == "" {
		return &UsageError{errors.New("--reason is required: it is recorded in the sealed history")}
	}
	store, _, r, err := a.openRecord(ctx, o.ID)
	if err != nil {
		return err
	}
	var next *quarantine.Record
	if o.Park {
		next, err = r.ParkManual(a.Actor, o.Reason, a.Now())
	} else {
		next, err = r.Unpark(a.Actor, o.Reason, a.Now())
	}
	if errors.Is(err, quarantine.ErrNotClaimable) {
		return fmt.Errorf("record %s is %s: cannot %s it", o.ID, r.Status, map[bool]string{true: "park", false: "unpark"}[o.Park])
	}
	if quarantine.IsIntegrityFailure(err) {
		return a.holdRecord(ctx, store, r, err)
	}
	if err != nil {
		return err
	}
	if err := store.Replace(ctx, r, next); err != nil {
		if errors.Is(err, quarantine.ErrVersionConflict) {
			return fmt.Errorf("record %s changed meanwhile; look again and retry", o.ID)
		}
		return err
	}
	fmt.Fprintf(a.Out, "%s is %s\n", o.ID, next.Status)
	return nil
}

// holdRecord sets aside r, which failed verification (cause), exactly as
// found: no operator action re-seals a forged record. It returns a
// *MismatchError, so the command fails with the mismatch exit code.
func (a *App) holdRecord(ctx context.Context, store quarantine.Store, r *quarantine.Record, cause error) error {
	reason := quarantine.HoldReason(cause)
	err := store.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: reason, At: a.Now().UTC()})
	if err != nil {
		return fmt.Errorf("record %s fails verification (%s) and could not be held: %w", r.DLQID, reason, err)
	}
	fmt.Fprintf(a.Err, "record %s fails verification (%s): held as found, not changed; see dlqctl verify and dlqctl ls --held\n", r.DLQID, reason)
	return &MismatchError{Count: 1}
}
