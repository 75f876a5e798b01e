package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
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
	c := idCommand(use, short, recordArg, func(ctx context.Context, id string) error {
		o.ID = id
		return a.ParkRecord(ctx, o)
	})
	c.Flags().StringVar(&o.Reason, "reason", "", "why (required; recorded in the sealed history)")
	return c
}

// ParkRecord runs dlqctl park or unpark: it asks the redrive function to
// make the change (one conditional write under the function's role; the
// operator needs no write permission on the table).
func (a *App) ParkRecord(ctx context.Context, o ParkOptions) error {
	if strings.TrimSpace(o.Reason) == "" {
		return &UsageError{errors.New("--reason is required: it is recorded in the sealed history")}
	}
	source, _, ok := strings.Cut(o.ID, "#")
	if !ok || source == "" {
		return &UsageError{fmt.Errorf("%q is not a record id (<source>#<key>)", o.ID)}
	}
	action := redrive.ActionUnpark
	if o.Park {
		action = redrive.ActionPark
	}
	rep, err := a.invoke(ctx, redrive.Request{Action: action, Source: source, IDs: []string{o.ID}, RequestedBy: a.Actor, Reason: o.Reason}, recordFlags(o.ID))
	if err != nil {
		return a.heldByFunction(o.ID, err)
	}
	r := rep.Record
	if r == nil {
		return fmt.Errorf("the redrive function reported no record for %s", action)
	}
	if o.Park {
		if a.Output == "json" {
			return a.writeJSON(rep) // the function's report: the record written, without payload values
		}
		fmt.Fprintf(a.Out, "%s is %s\n", o.ID, r.Status)
		return nil
	}
	n := a.unparkNotes(ctx, rep.RedriveCapBefore, r)
	if a.Output == "json" {
		// A script is told what a person is: the warnings on stderr and
		// in the document.
		for _, w := range n.warnings {
			fmt.Fprintf(a.Err, "warning: %s\n", w)
		}
		return a.writeJSON(unparkJSON{Report: rep, Warnings: n.warnings, PoliciesSelecting: n.policies})
	}
	fmt.Fprintf(a.Out, "%s is %s\n", o.ID, r.Status)
	for _, l := range n.lines {
		fmt.Fprintln(a.Out, l)
	}
	return nil
}

// unparkJSON is unpark's -o json document: the function's report, the
// warnings the table output prints and the standing policies whose next
// run replays the record.
type unparkJSON struct {
	*redrive.Report
	Warnings          []string `json:"warnings"`
	PoliciesSelecting []string `json:"policies_selecting"`
}

// unparkNotes is what unparking made possible, said after the record's
// new status.
type unparkNotes struct {
	lines    []string // the table output's lines
	warnings []string // the warnings among them, without "warning: "
	policies []string // the active standing policies that select the record
}

// unparkNotes says what unparking made possible: the record is eligible
// for replay again, by a person and by the next run of every standing
// policy that selects it (named when they can be read).
// capBefore is the cap the unpark raised (0: not raised).
func (a *App) unparkNotes(ctx context.Context, capBefore int, r *quarantine.Record) unparkNotes {
	n := unparkNotes{warnings: []string{}, policies: []string{}}
	warn := func(format string, args ...any) {
		w := fmt.Sprintf(format, args...)
		n.warnings = append(n.warnings, w)
		n.lines = append(n.lines, "warning: "+w)
	}
	if capBefore > 0 && r.RedriveCap > capBefore {
		w := fmt.Sprintf("its redrive cap was raised from %d to %d: one more replay before it is parked as poison again", capBefore, r.RedriveCap)
		n.warnings = append(n.warnings, w)
		n.lines = append(n.lines, w)
	}
	store, _, err := a.policyStore(ctx)
	var pols []*policy.Policy
	if err == nil {
		pols, err = store.List(ctx, r.Source)
	}
	if err != nil {
		warn("it is eligible for replay again, also by the next run of any standing policy of %s that selects it (the policies could not be read: %v)", r.Source, err)
		return n
	}
	var ids []string
	for _, p := range pols {
		if p.State == policy.StateActive && !p.Expired(a.Now()) && selects(p, r) {
			n.policies = append(n.policies, p.ID)
			id := p.ID
			if age := time.Duration(p.MinAgeSeconds) * time.Second; a.Now().Sub(r.FirstSeen.Time) < age {
				id += fmt.Sprintf(" (once it was first seen %s ago)", age)
			}
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		n.lines = append(n.lines, fmt.Sprintf("note: it is eligible for replay again; no active standing policy of %s selects it now (dlqctl policy ls --source %s)", r.Source, r.Source))
		return n
	}
	warn("it is eligible for replay again: standing polic%s %s select%s it, and the next scheduled run replays it (up to the policy's max per run); park it again, or revoke the policy (dlqctl policy rm), if it must not be replayed",
		map[bool]string{true: "y", false: "ies"}[len(ids) == 1], strings.Join(ids, ", "), map[bool]string{true: "s", false: ""}[len(ids) == 1])
	return n
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

// heldReason finds the hold reason in a HeldError's text: "ids[0]
// (seal_mismatch): …".
var heldReason = regexp.MustCompile(`\(([a-z_]+)\): `)

// heldByFunction turns the redrive function's refusal of a record that
// fails verification (it held the record as found, changing nothing) into
// a *MismatchError, so the command fails with the mismatch exit code; any
// other error is returned as it is.
func (a *App) heldByFunction(id string, err error) error {
	var fe *FunctionError
	if !errors.As(err, &fe) || (fe.Type != "HeldError" && !strings.Contains(fe.Message, quarantine.ErrHeld.Error())) {
		return err
	}
	reason := "integrity"
	if m := heldReason.FindStringSubmatch(fe.Message); m != nil {
		reason = m[1]
	}
	fmt.Fprintf(a.Err, "record %s fails verification (%s): held as found, not changed; see dlqctl verify and dlqctl ls --held\n", id, reason)
	return &MismatchError{Count: 1}
}
