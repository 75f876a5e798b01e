package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// PendingApprovalError is a high-risk request that did not run: it waits,
// as a pending approval, for a second person (docs/identity.md). It
// exits with ExitNotExecuted.
type PendingApprovalError struct{ Approval *approval.Approval }

func (e *PendingApprovalError) Error() string {
	a := e.Approval
	return fmt.Sprintf("not executed: it needs a second person's approval (%s); approval %s waits until %s for another operator to run: dlqctl approvals approve --source %s %s",
		risks(a), a.ID, a.ExpiresAt.UTC().Format("2006-01-02T15:04Z"), a.Source, a.ID)
}

// pending turns a report of a pending approval into its error.
func pending(rep *redrive.Report) error {
	if rep != nil && rep.Stopped == redrive.StoppedPendingApproval && rep.Approval != nil {
		return &PendingApprovalError{Approval: rep.Approval}
	}
	return nil
}

func risks(a *approval.Approval) string {
	s := make([]string, len(a.Risks))
	for i, r := range a.Risks {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// ApprovalsOptions are the flags of dlqctl approvals.
type ApprovalsOptions struct {
	Source string
	ID     string
	Reason string
	// All lists decided approvals too (ls).
	All bool
}

func (a *App) approvalsCmd() *cobra.Command {
	o := &ApprovalsOptions{}
	root := &cobra.Command{Use: "approvals", Short: "Four-eyes approvals of high-risk actions: list, show, approve, reject"}
	ls := &cobra.Command{Use: "ls --source S", Short: "List a source's pending approvals (--all: every approval)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.ListApprovals(cmd.Context(), *o) }}
	ls.Flags().BoolVar(&o.All, "all", false, "also approvals already decided or expired")
	show := idCommand("show ID --source S", "Show one approval: its exact plan, requester, reason, expiry and decision", "an approval id",
		func(ctx context.Context, id string) error { o.ID = id; return a.ShowApproval(ctx, *o) })
	approve := idCommand("approve ID --source S", "Approve another operator's request: its plan runs now, once, as approved", "an approval id",
		func(ctx context.Context, id string) error {
			o.ID = id
			return a.DecideApproval(ctx, *o, redrive.ActionApprove)
		})
	reject := idCommand("reject ID --source S", "Reject a request (or withdraw your own): nothing runs", "an approval id",
		func(ctx context.Context, id string) error {
			o.ID = id
			return a.DecideApproval(ctx, *o, redrive.ActionReject)
		})
	for _, c := range []*cobra.Command{ls, show, approve, reject} {
		c.Flags().StringVar(&o.Source, "source", "", "the source queue (required)")
	}
	for _, c := range []*cobra.Command{approve, reject} {
		c.Flags().StringVar(&o.Reason, "reason", "", "why: recorded with the decision")
	}
	root.AddCommand(ls, show, approve, reject)
	return root
}

func (o ApprovalsOptions) check(id bool) error {
	if strings.TrimSpace(o.Source) == "" {
		return &UsageError{errors.New("--source is required: approvals are kept per source")}
	}
	if id && !approval.ValidID(o.ID) {
		return &UsageError{fmt.Errorf("%q is not an approval id", o.ID)}
	}
	return nil
}

func (a *App) approvalStore(ctx context.Context) (*dynamostore.ApprovalStore, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	return dynamostore.NewApprovalStore(c.DynamoDB, a.Table), nil
}

// ListApprovals runs dlqctl approvals ls: read from the table (an auditor
// may), newest last.
func (a *App) ListApprovals(ctx context.Context, o ApprovalsOptions) error {
	if err := o.check(false); err != nil {
		return err
	}
	s, err := a.approvalStore(ctx)
	if err != nil {
		return err
	}
	all, err := s.List(ctx, o.Source)
	if err != nil {
		return err
	}
	now := a.Now()
	var out []*approval.Approval
	for _, ap := range all {
		if o.All || ap.State == approval.StatePending && !ap.Expired(now) {
			out = append(out, ap)
		}
	}
	if a.Output == "json" {
		if out == nil {
			out = []*approval.Approval{}
		}
		return a.writeJSON(out)
	}
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "ID\tSTATE\tACTION\tRISKS\tREQUESTED BY\tEXPIRES\tSUMMARY")
	for _, ap := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ap.ID, ap.StateAt(now), ap.Action, risks(ap), ap.RequestedBy.ARN,
			ap.ExpiresAt.UTC().Format("2006-01-02T15:04Z"), printable(ap.Summary))
	}
	return tw.Flush()
}

// ShowApproval runs dlqctl approvals show.
func (a *App) ShowApproval(ctx context.Context, o ApprovalsOptions) error {
	if err := o.check(true); err != nil {
		return err
	}
	s, err := a.approvalStore(ctx)
	if err != nil {
		return err
	}
	ap, err := s.Get(ctx, o.Source, o.ID)
	if errors.Is(err, approval.ErrNotFound) {
		return fmt.Errorf("no approval %s of source %s", o.ID, o.Source)
	}
	if err != nil {
		return err
	}
	if a.Output == "json" {
		return a.writeJSON(ap)
	}
	now := a.Now()
	st := ap.State
	if ap.Expired(now) {
		st = "expired (pending past its expiry: it can no longer be approved)"
	}
	fmt.Fprintf(a.Out, "approval %s of %s: %s\n", ap.ID, ap.Source, st)
	fmt.Fprintf(a.Out, "  action     %s (%s)\n  summary    %s\n", ap.Action, risks(ap), printable(ap.Summary))
	var plan struct {
		Target string `json:"target"`
	}
	if json.Unmarshal([]byte(ap.Plan), &plan) == nil && plan.Target != "" {
		fmt.Fprintf(a.Out, "  target     %s: the records are replayed into this queue, not their own source's\n", printable(plan.Target))
	}
	fmt.Fprintf(a.Out, "  requested  %s by %s (account %s, key %s)\n", ap.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), ap.RequestedBy.ARN, ap.RequestedBy.Account, ap.RequestedBy.AccessKey)
	fmt.Fprintf(a.Out, "  reason     %s\n  expires    %s\n", printable(ap.Reason), ap.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
	if ap.DecidedBy != nil {
		fmt.Fprintf(a.Out, "  decided    %s at %s by %s", ap.State, ap.DecidedAt.UTC().Format("2006-01-02T15:04:05Z"), ap.DecidedBy.ARN)
		if ap.DecisionNote != "" {
			fmt.Fprintf(a.Out, ": %s", printable(ap.DecisionNote))
		}
		fmt.Fprintln(a.Out)
	}
	switch {
	case ap.Outcome != nil:
		fmt.Fprintf(a.Out, "  outcome    run %s: %s", ap.Outcome.RunID, ap.Outcome.Summary)
		if ap.Outcome.ErrorKind != "" {
			fmt.Fprintf(a.Out, " (ended with %s)", ap.Outcome.ErrorKind)
		}
		fmt.Fprintln(a.Out)
	case ap.State == approval.StateApproved:
		fmt.Fprintln(a.Out, "  outcome    none recorded: the run was interrupted or is still running; the records' histories name this approval")
	}
	fmt.Fprintf(a.Out, "  plan       sha256 %s (%d bytes; -o json shows it whole)\n", ap.PlanSHA256, len(ap.Plan))
	return nil
}

// DecideApproval runs dlqctl approvals approve or reject, through the
// operator endpoint: AWS verifies who decides.
func (a *App) DecideApproval(ctx context.Context, o ApprovalsOptions, action string) error {
	if err := o.check(true); err != nil {
		return err
	}
	if _, err := a.connect(ctx); err != nil {
		return err
	}
	if a.OperatorURL == "" {
		return &UsageError{errors.New("approvals are decided through the operator endpoint, where AWS verifies who decides: set --operator-url (DLQQ_OPERATOR_URL) or --stack")}
	}
	rep, err := a.invoke(ctx, redrive.Request{Action: action, Source: o.Source, ApprovalID: o.ID, Reason: o.Reason}, nil)
	if err != nil {
		return err
	}
	if a.Output == "json" {
		return a.writeJSON(rep)
	}
	ap := rep.Approval
	switch {
	case rep.AlreadyDecided:
		fmt.Fprintf(a.Out, "approval %s was already %s by you: nothing ran this time\n", ap.ID, ap.State)
	case action == redrive.ActionReject:
		fmt.Fprintf(a.Out, "approval %s rejected: nothing runs\n", ap.ID)
	default:
		fmt.Fprintf(a.Out, "approval %s approved; its plan ran as %s\n", ap.ID, ap.RequestedBy.ARN)
		return a.print(rep)
	}
	return nil
}

// printable is s with its control and format characters escaped: a text a
// requester wrote never moves the approver's cursor.
func printable(s string) string {
	if !approval.Unprintable(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
