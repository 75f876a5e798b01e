package dlqctl

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// RedriveOptions are the flags of dlqctl redrive.
type RedriveOptions struct {
	Source         string
	Classes        string
	Signatures     []string
	ClearedReasons []string
	Since, Until   string
	IDs            []string
	Max            int
	BatchSize      int
	Rate           float64
	IncludeParked  bool
	// Target names a registered source whose queue the records are
	// replayed into instead of their own (high-risk: retarget).
	Target string
	Yes    bool
	// Reason says why; a high-risk run's second person reads it.
	Reason string
}

func (a *App) redriveCmd() *cobra.Command {
	var o RedriveOptions
	c := command("redrive", "Replay records through the deployed redrive function (a dry run unless --yes)", func(ctx context.Context) error { return a.Redrive(ctx, o) })
	f := c.Flags()
	f.StringVar(&o.Source, "source", "", "source queue name or ARN (required)")
	f.StringVar(&o.Classes, "class", "", "failure class(es)")
	f.StringSliceVar(&o.Signatures, "signature", nil, "failure signature(s)")
	f.StringSliceVar(&o.ClearedReasons, "cleared", nil, "signature(s) whose root cause is fixed: only these are replayed")
	f.StringVar(&o.Since, "since", "", "first seen at or after (RFC 3339, or a duration ago like 2h)")
	f.StringVar(&o.Until, "until", "", "first seen at or before (RFC 3339, or a duration ago)")
	f.StringSliceVar(&o.IDs, "id", nil, "record id(s)")
	f.IntVar(&o.Max, "max", 100, "most records in all")
	f.IntVar(&o.BatchSize, "batch-size", 50, "records per batch (at most 50)")
	f.Float64Var(&o.Rate, "rate", 0, "sends per second (0: no limit)")
	f.BoolVar(&o.IncludeParked, "include-parked", false, "also replay PARKED records (high-risk: a second operator approves it)")
	f.StringVar(&o.Target, "target", "", "replay into this registered source's queue instead of each record's own (same kind: FIFO to FIFO; high-risk: a second operator approves it)")
	f.StringVar(&o.Reason, "reason", "", "why: required for a high-risk run (--include-parked, --target, or --max above the approval threshold), whose second operator reads it")
	f.BoolVar(&o.Yes, "yes", false, "execute (required when not on a terminal)")
	return c
}

// Request builds the redrive request from the flags; now anchors relative
// windows. It checks the flags as the function will.
func (o RedriveOptions) Request(actor string, now time.Time) (redrive.Request, error) {
	cls, err := classes(o.Classes)
	if err != nil {
		return redrive.Request{}, err
	}
	req := redrive.Request{
		Source: o.Source, Classes: cls, Signatures: o.Signatures, ClearedReasons: o.ClearedReasons, IDs: o.IDs,
		MaxMessages: o.Max, BatchSize: o.BatchSize, RatePerSecond: o.Rate, IncludeParked: o.IncludeParked, RequestedBy: actor,
		Reason: o.Reason, Target: o.Target,
	}
	if req.FirstSeenFrom, req.FirstSeenTo, err = parseWindow(o.Since, o.Until, now); err != nil {
		return redrive.Request{}, err
	}
	// An explicit 0 would be left out of the request (and take the
	// function's default): refuse it as the function refuses an explicit 0.
	var zero []string
	if o.BatchSize == 0 {
		zero = append(zero, fmt.Sprintf("--batch-size 0 is outside 1..%d", redrive.MaxBatchSize))
	}
	if o.Max == 0 {
		zero = append(zero, fmt.Sprintf("--max 0 is outside 1..%d", redrive.MaxMaxMessages))
	}
	raw, _ := json.Marshal(req)
	if _, err := redrive.ParseRequest(raw); err != nil || len(zero) > 0 {
		if err != nil {
			err = mapRequestError(err, redriveFlags(o.IDs))
			zero = append(zero, err.Error())
		}
		return redrive.Request{}, &UsageError{errors.New(strings.Join(zero, "; "))}
	}
	return req, nil
}

// parseWindow reads --since and --until (either may be empty).
func parseWindow(since, until string, now time.Time) (from, to *time.Time, err error) {
	for _, w := range []struct {
		flag, v string
		dst     **time.Time
	}{{"--since", since, &from}, {"--until", until, &to}} {
		if w.v == "" {
			continue
		}
		t, err := ParseWhen(w.v, now)
		if err != nil {
			return nil, nil, &UsageError{fmt.Errorf("%s: %w", w.flag, err)}
		}
		*w.dst = &t
	}
	return from, to, nil
}

// ParseWhen reads an RFC 3339 time or a duration before now ("90m", "2h").
func ParseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", v)
	}
	return now.Add(-d).UTC(), nil
}

// Redrive runs dlqctl redrive: the plan as a dry run, then, with --yes (or a
// yes at the terminal), the real run, repeated while the function says
// records remain, up to --max.
func (a *App) Redrive(ctx context.Context, o RedriveOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	// The flags are checked first, with a stand-in for an actor still to
	// be asked of STS (actor.go), which then replaces it.
	req, err := o.Request(cmp.Or(a.Actor, actorPending), a.Now())
	if err != nil {
		return err
	}
	if err := a.checkSource(ctx, "", o.Source, true, nil); err != nil {
		return err
	}
	if err := a.checkSource(ctx, "", o.Target, true, nil); err != nil {
		return err
	}
	if req.RequestedBy, err = a.actor(ctx); err != nil {
		return err
	}
	plan := req
	plan.DryRun = true
	flags := redriveFlags(o.IDs)
	rep, err := a.invoke(ctx, plan, flags)
	if err != nil {
		return err
	}
	into := ""
	if rep.Target != "" {
		into = " into " + rep.Target + " (not their own source)"
	}
	fmt.Fprintf(a.Err, "plan (dry run): would redrive %d%s, hold %d, park %d as poison, skip %d; %d more match beyond --max\n",
		rep.Redriven.Count, into, rep.Held.Count, rep.Parked.Count, rep.Skipped.Count, rep.Remaining)
	if rep.Integrity.Count > 0 {
		fmt.Fprintf(a.Err, "%d records fail verification: they will be held as found, never sent (see dlqctl verify)\n", rep.Integrity.Count)
	}
	if rep.Redriven.Count+rep.Parked.Count+rep.Held.Count+rep.Integrity.Count == 0 {
		fmt.Fprintln(a.Err, "nothing to redrive")
		return a.print(rep)
	}
	if !o.Yes {
		// Not confirmed: the plan (the dry run's report) is the output,
		// and the exit code says nothing was done.
		if !a.IsTerminal() {
			return errors.Join(a.print(rep), &NotExecutedError{Why: "pass --yes to execute when not on a terminal"})
		}
		fmt.Fprint(a.Err, "execute? [y/N] ")
		line, _ := bufio.NewReader(a.In).ReadString('\n')
		if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
			return errors.Join(a.print(rep), &NotExecutedError{Why: "not confirmed at the prompt"})
		}
	}
	req.Approve = true // the operator confirmed the plan above
	// The bar counts against the plan: what the dry run would redrive or
	// park, not --max.
	planned := rep.Redriven.Count + rep.Parked.Count
	total := &redrive.Report{Action: rep.Action, Source: rep.Source, Target: rep.Target, RequestedBy: rep.RequestedBy}
	var runs []string
	stalled := 0 // invocations in a row that finished no record
	for done := 0; done < o.Max; {
		req.MaxMessages = min(o.Max-done, redrive.MaxMaxMessages)
		rep, err := a.invoke(ctx, req, flags)
		var waits *PendingApprovalError
		if errors.As(err, &waits) && len(runs) == 0 {
			return err // nothing ran: it waits for a second person
		}
		if err != nil {
			// The earlier invocations, and the failed one itself, may
			// have sent messages: the totals so far are printed (even
			// when the first invocation failed), with the caveat, and
			// the failure ends the command.
			return errors.Join(a.stoppedRedrive(total, runs, err), err)
		}
		merge(total, rep)
		runs = append(runs, rep.RunID)
		// Finished: records the request no longer covers (a held record
		// fails the schema and stays, so it is no progress: at the head
		// of a FIFO group it holds the group back run after run). The
		// failed and the deferred are still the request's: the function
		// counts them as remaining, and the next invocation takes them
		// up.
		finished := rep.Redriven.Count + rep.Parked.Count + rep.Integrity.Count
		done += finished + rep.Held.Count + rep.Skipped.Count + rep.Unknown.Count
		a.progress(planned, total)
		total.Remaining = rep.Remaining
		if rep.Unknown.Count > 0 {
			// SQS may have enqueued them: the command stops rather than
			// send anything of the request again at once.
			return errors.Join(a.stoppedPossiblySent(total, runs), &PossiblySentError{Count: total.Unknown.Count, Remaining: rep.Remaining})
		}
		if rep.Remaining == 0 {
			break
		}
		if stalled = stalled + 1; finished > 0 {
			stalled = 0
		}
		if stalled >= MaxStalledInvocations {
			return errors.Join(a.stoppedWithRecordsLeft(total, runs, StoppedStalled, (&StalledError{Invocations: stalled, Remaining: rep.Remaining}).Error()),
				&StalledError{Invocations: stalled, Remaining: rep.Remaining})
		}
	}
	if a.IsTerminal() {
		fmt.Fprintln(a.Err) // end the bar's line before the summary
	}
	if len(runs) == 1 {
		total.RunID = runs[0]
	}
	if a.Output == "json" {
		return a.writeJSON(redriveResult{Report: total, RunIDs: runs})
	}
	return a.print(total)
}

// MaxStalledInvocations bounds the invocations in a row that finish no
// record (every one failed, held, deferred or skipped) before
// dlqctl redrive stops although records remain.
const MaxStalledInvocations = 3

// StoppedStalled is redrive's "stopped" in -o json when
// MaxStalledInvocations invocations in a row finished no record.
const StoppedStalled = "stalled"

// StalledError says dlqctl redrive stopped with records left because its
// last invocations finished none of them.
type StalledError struct{ Invocations, Remaining int }

func (e *StalledError) Error() string {
	return fmt.Sprintf("stopped: %d invocations in a row finished no record; %s still to replay (failed, deferred or not reached: the records' histories and the redrive function's logs say why)",
		e.Invocations, plural(e.Remaining, "record", "records"))
}

// StoppedPossiblySent is redrive's "stopped" in -o json when an
// invocation could not learn whether SQS enqueued some replays.
const StoppedPossiblySent = "possibly_sent"

// PossiblySentError says dlqctl redrive stopped because SQS gave no answer
// for some replays: they may be in the source queue, and the command does
// not send anything of the request again at once.
type PossiblySentError struct{ Count, Remaining int }

func (e *PossiblySentError) Error() string {
	return fmt.Sprintf("stopped: SQS gave no answer for %s (possibly sent: QUARANTINED again, counted toward the cap); not sent again by this command; %s still to replay: check the consumer, then run redrive again",
		plural(e.Count, "replay", "replays"), plural(e.Remaining, "record", "records"))
}

func (a *App) stoppedPossiblySent(total *redrive.Report, runs []string) error {
	return a.stoppedWithRecordsLeft(total, runs, StoppedPossiblySent, (&PossiblySentError{Count: total.Unknown.Count, Remaining: total.Remaining}).Error())
}

// stoppedWithRecordsLeft prints the totals of a redrive that stopped
// (stalled, possibly sent) with records left, and why.
func (a *App) stoppedWithRecordsLeft(total *redrive.Report, runs []string, stopped, why string) error {
	if a.IsTerminal() {
		fmt.Fprintln(a.Err) // end the bar's line before the summary
	}
	total.Stopped = stopped
	if len(runs) == 1 {
		total.RunID = runs[0]
	}
	if a.Output == "json" {
		return a.writeJSON(redriveResult{Report: total, RunIDs: runs, Error: why})
	}
	return a.print(total)
}

// StoppedInvocationError is redrive's "stopped" in -o json when an
// invocation of the redrive function failed: the command stopped there.
// It is the CLI's own value, next to the function's redrive.Stopped*
// ones (which say why one invocation ended).
const StoppedInvocationError = "invocation_error"

// redriveResult is redrive's -o json after a run: the invocations'
// reports added up, and each one's run id (run_id too when there was one).
// Error is why an invocation failed (stopped: StoppedInvocationError):
// the totals are what the earlier ones reported, and Unreported says
// that the failed one may itself have sent messages.
type redriveResult struct {
	*redrive.Report
	RunIDs     []string `json:"run_ids"`
	Error      string   `json:"error,omitempty"`
	Unreported string   `json:"unreported,omitempty"`
}

// stoppedRedrive prints the totals of a run whose invocation failed
// (cause) after runs (maybe none) had run: they may have sent messages,
// and so may the failed one, whose report Lambda does not return (a
// handler error answers with the error payload only).
func (a *App) stoppedRedrive(total *redrive.Report, runs []string, cause error) error {
	if a.IsTerminal() && len(runs) > 0 {
		fmt.Fprintln(a.Err) // end the bar's line before the summary
	}
	total.Stopped = StoppedInvocationError
	if len(runs) == 1 {
		total.RunID = runs[0]
	}
	n := len(runs) + 1
	caveat := fmt.Sprintf("invocation %d may itself have sent messages before it failed (its report is lost): its log line in the redrive function's logs and the records' histories (dlqctl show ID) say which", n)
	fmt.Fprintf(a.Err, "stopped: invocation %d failed; the totals are what the %d before it reported\n", n, len(runs))
	fmt.Fprintf(a.Err, "warning: %s\n", caveat)
	if a.Output == "json" {
		if runs == nil {
			runs = []string{}
		}
		return a.writeJSON(redriveResult{Report: total, RunIDs: runs, Error: cause.Error(), Unreported: caveat})
	}
	return a.print(total)
}

// invoke sends req to the redrive function; a request error it returns
// has its problems rewritten by flags to name the flags the user typed.
func (a *App) invoke(ctx context.Context, req redrive.Request, flags flagMapper) (*redrive.Report, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	if a.OperatorURL != "" {
		return a.invokeOperator(ctx, c, req, flags)
	}
	if req.RequestedBy == "" {
		if req.RequestedBy, err = a.actor(ctx); err != nil {
			return nil, err
		}
	}
	payload, _ := json.Marshal(req)
	out, err := a.invokeWhenFree(ctx, c, payload)
	if err != nil {
		var code interface{ ErrorCode() string }
		if errors.As(err, &code) && code.ErrorCode() == "ResourceNotFoundException" {
			return nil, fmt.Errorf("redrive function %q not found (set --function or DLQQ_REDRIVE_FUNCTION): %w", a.Function, err)
		}
		return nil, fmt.Errorf("invoke %s: %w", a.Function, err)
	}
	if out.FunctionError != nil {
		var fe struct {
			ErrorMessage string `json:"errorMessage"`
			ErrorType    string `json:"errorType"`
		}
		_ = json.Unmarshal(out.Payload, &fe)
		return nil, &FunctionError{Type: fe.ErrorType, Message: mapFunctionError(cmpOr(fe.ErrorMessage, string(out.Payload)), flags)}
	}
	var rep redrive.Report
	if err := json.Unmarshal(out.Payload, &rep); err != nil {
		return nil, fmt.Errorf("redrive report: %w", err)
	}
	return &rep, nil
}

// invokeWhenFree invokes the redrive function, and while Lambda refuses
// the invocation because the function's one concurrent slot is taken (a
// run in progress: TooManyRequestsException, the request was not run),
// says so once and tries again every few seconds, for up to BusyWait.
func (a *App) invokeWhenFree(ctx context.Context, c *Clients, payload []byte) (*lambda.InvokeOutput, error) {
	wait := a.BusyWait
	if wait <= 0 {
		wait = DefaultBusyWait
	}
	deadline := time.Now().Add(wait)
	pause := 2 * time.Second
	if wait < 10*pause {
		pause = wait / 10
	}
	for warned := false; ; warned = true {
		out, err := c.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(a.Function), Payload: payload})
		var busy *lambdatypes.TooManyRequestsException
		if !errors.As(err, &busy) || time.Now().Add(pause).After(deadline) {
			if errors.As(err, &busy) {
				err = fmt.Errorf("the redrive function stayed busy for %s (a run holds its one concurrent slot): retry once it has ended: %w", wait, err)
			}
			return out, err
		}
		if !warned {
			fmt.Fprintf(a.Err, "the redrive function is busy (a run holds its one concurrent slot): retrying for up to %s\n", wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// FunctionError is a request the redrive function refused (a function
// error): Type is the error's type as the runtime reports it (HeldError,
// RequestError, …), Message its text with request fields named as flags.
type FunctionError struct{ Type, Message string }

func (e *FunctionError) Error() string { return "redrive function refused the request: " + e.Message }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func merge(total, r *redrive.Report) {
	total.AddOutcomes(r)
	total.Source, total.RequestedBy, total.Stopped = r.Source, r.RequestedBy, r.Stopped
	if total.StartedAt.IsZero() {
		total.StartedAt = r.StartedAt
	}
	total.FinishedAt = r.FinishedAt
}

// progress shows a bar on a terminal and plain lines otherwise, counting
// the records redriven or parked so far against planned, the dry run's
// would-redrive and would-park (more, when more came to match since).
func (a *App) progress(planned int, t *redrive.Report) {
	done := t.Redriven.Count + t.Parked.Count
	limit := max(planned, done)
	if a.IsTerminal() {
		width := 30
		filled := min(width, width*done/max(limit, 1))
		fmt.Fprintf(a.Err, "\r[%s%s] %d/%d redriven %d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, limit, t.Redriven.Count)
		return
	}
	fmt.Fprintf(a.Err, "progress: %d/%d of the plan, %d redriven, %d parked, %d held, %d failed\n", done, limit, t.Redriven.Count, t.Parked.Count, t.Held.Count, t.Failed.Count)
}

func (a *App) print(r *redrive.Report) error {
	if a.Output == "json" {
		return a.writeJSON(r)
	}
	fmt.Fprintf(a.Out, "redriven %d, held %d, parked as poison %d, failed %d, skipped %d; remaining %d\n",
		r.Redriven.Count, r.Held.Count, r.Parked.Count, r.Failed.Count, r.Skipped.Count, r.Remaining)
	if r.Unknown.Count+r.Deferred.Count > 0 {
		fmt.Fprintf(a.Out, "possibly sent (no answer from SQS; quarantined again, counted toward the cap) %d, deferred to keep FIFO order %d\n",
			r.Unknown.Count, r.Deferred.Count)
	}
	for _, o := range []struct {
		name string
		out  redrive.Outcome
	}{{"held", r.Held}, {"parked", r.Parked}, {"failed", r.Failed}, {"possibly sent", r.Unknown}, {"deferred", r.Deferred}, {"held_integrity", r.Integrity}} {
		for _, id := range o.out.IDs {
			fmt.Fprintf(a.Out, "  %s %s\n", o.name, id)
		}
	}
	return nil
}
