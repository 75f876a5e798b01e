package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
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
	if !o.Park {
		a.unparkNote(ctx, r, next)
	}
	return nil
}

// unparkNote says what unparking made possible: the record is eligible for
// replay again, by a person and by the next run of every standing policy
// that selects it (named when they can be read).
func (a *App) unparkNote(ctx context.Context, was, r *quarantine.Record) {
	if r.RedriveCap > was.RedriveCap {
		fmt.Fprintf(a.Out, "its redrive cap was raised from %d to %d: one more replay before it is parked as poison again\n", was.RedriveCap, r.RedriveCap)
	}
	store, _, err := a.policyStore(ctx)
	var pols []*policy.Policy
	if err == nil {
		pols, err = store.List(ctx, r.Source)
	}
	if err != nil {
		fmt.Fprintf(a.Out, "warning: it is eligible for replay again, also by the next run of any standing policy of %s that selects it (the policies could not be read: %v)\n", r.Source, err)
		return
	}
	var ids []string
	for _, p := range pols {
		if p.State == policy.StateActive && !p.Expired(a.Now()) && selects(p, r) {
			id := p.ID
			if age := time.Duration(p.MinAgeSeconds) * time.Second; a.Now().Sub(r.FirstSeen.Time) < age {
				id += fmt.Sprintf(" (once it was first seen %s ago)", age)
			}
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		fmt.Fprintf(a.Out, "note: it is eligible for replay again; no active standing policy of %s selects it now (dlqctl policy ls --source %s)\n", r.Source, r.Source)
		return
	}
	fmt.Fprintf(a.Out, "warning: it is eligible for replay again: standing polic%s %s select%s it, and the next scheduled run replays it (up to the policy's max per run); park it again, or revoke the policy (dlqctl policy rm), if it must not be replayed\n",
		map[bool]string{true: "y", false: "ies"}[len(ids) == 1], strings.Join(ids, ", "), map[bool]string{true: "s", false: ""}[len(ids) == 1])
}

// selects reports whether policy p selects record r as the redrive
// function's policy runs select: by its signatures, classes and first-seen
// window (its minimum age is the caller's to say).
func selects(p *policy.Policy, r *quarantine.Record) bool {
	q := quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: p.Source, Classes: p.Classes, Signatures: p.Signatures}
	if p.FirstSeenFrom != nil {
		q.FirstSeenFrom = p.FirstSeenFrom.Time
	}
	if p.FirstSeenTo != nil {
		q.FirstSeenTo = p.FirstSeenTo.Time
	}
	return q.Matches(r)
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
