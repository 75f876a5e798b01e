package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// PolicyAddOptions are the flags of dlqctl policy add.
type PolicyAddOptions struct {
	Source     string
	Classes    string
	Signatures []string
	// From and Until bound first_seen (RFC 3339 or a duration ago).
	From, Until string
	MinAge      time.Duration
	MaxPerRun   int
	Rate        float64
	// Expires is an RFC 3339 time or a duration from now ("24h").
	Expires   string
	Threshold float64
	MinSample int
	Note      string
}

// PolicyChangeOptions are the flags of dlqctl policy rm and resume.
type PolicyChangeOptions struct {
	ID, Source, Reason string
	Resume             bool
}

func (a *App) policyCmd() *cobra.Command {
	c := &cobra.Command{Use: "policy", Short: "Standing redrive policies: pre-approved automatic replay with a breaker"}
	var add PolicyAddOptions
	addCmd := command("add --source Q (--signature S | --since T | --min-age D) --max-per-run N --expires T", "Create a standing policy (recorded, sealed)",
		func(ctx context.Context) error { return a.PolicyAdd(ctx, add) })
	f := addCmd.Flags()
	f.StringVar(&add.Source, "source", "", "source queue (required)")
	f.StringVar(&add.Classes, "class", "", "failure class (exhausted only, the default)")
	f.StringSliceVar(&add.Signatures, "signature", nil, "failure signature(s) it replays")
	f.StringVar(&add.From, "since", "", "first seen at or after (RFC 3339 or a duration ago)")
	f.StringVar(&add.Until, "until", "", "first seen at or before (RFC 3339 or a duration ago)")
	f.DurationVar(&add.MinAge, "min-age", 0, "only records first seen at least this long ago")
	f.IntVar(&add.MaxPerRun, "max-per-run", 0, "records replayed per scheduled run (required, at most 1000)")
	f.Float64Var(&add.Rate, "rate", 0, "sends per second")
	f.StringVar(&add.Expires, "expires", "", "RFC 3339 time or a duration from now, within 90 days (required)")
	f.Float64Var(&add.Threshold, "threshold", 0, fmt.Sprintf("share of replays that may come back before the breaker suspends it (default %g)", policy.DefaultThreshold))
	f.IntVar(&add.MinSample, "min-sample", 0, fmt.Sprintf("replays before the breaker judges (default %d)", policy.DefaultMinSample))
	f.StringVar(&add.Note, "note", "", "why (an incident, a change ticket)")

	var ls string
	lsCmd := command("ls --source Q", "List a source's policies with their breakers", func(ctx context.Context) error { return a.PolicyList(ctx, ls) })
	lsCmd.Flags().StringVar(&ls, "source", "", "source queue (required)")

	change := func(resume bool) *cobra.Command {
		o := PolicyChangeOptions{Resume: resume}
		use, short := "rm ID --source Q --reason R", "Revoke a policy (recorded)"
		if resume {
			use, short = "resume ID --source Q --reason R", "Resume a suspended policy; its breaker starts afresh (recorded)"
		}
		cc := idCommand(use, short, "a policy id (from dlqctl policy ls)", func(ctx context.Context, id string) error {
			o.ID = id
			return a.PolicyChange(ctx, o)
		})
		cc.Flags().StringVar(&o.Source, "source", "", "source queue (required)")
		cc.Flags().StringVar(&o.Reason, "reason", "", "why (required; recorded)")
		return cc
	}
	c.AddCommand(addCmd, lsCmd, change(false), change(true))
	return c
}

func (a *App) policyStore(ctx context.Context) (*dynamostore.PolicyStore, policy.CounterReader, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	store, _, _, err := a.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	return dynamostore.NewPolicyStore(c.DynamoDB, a.Table), store, nil
}

// Spec turns the flags into a policy spec.
func (o PolicyAddOptions) Spec(now time.Time) (policy.Spec, error) {
	if err := requireFlags(required{"--source", o.Source == ""}, required{"--max-per-run", o.MaxPerRun == 0}, required{"--expires", o.Expires == ""}); err != nil {
		return policy.Spec{}, err
	}
	cls, err := classes(o.Classes)
	if err != nil {
		return policy.Spec{}, err
	}
	spec := policy.Spec{Source: o.Source, Classes: cls, Signatures: o.Signatures, MinAge: o.MinAge, MaxPerRun: o.MaxPerRun,
		RatePerSecond: o.Rate, Threshold: o.Threshold, MinSample: o.MinSample, Note: o.Note}
	if spec.FirstSeenFrom, spec.FirstSeenTo, err = parseWindow(o.From, o.Until, now); err != nil {
		return policy.Spec{}, err
	}
	if d, err := time.ParseDuration(o.Expires); err == nil {
		spec.ExpiresAt = now.Add(d)
	} else if t, err := time.Parse(time.RFC3339, o.Expires); err == nil {
		spec.ExpiresAt = t
	} else {
		return policy.Spec{}, &UsageError{fmt.Errorf("--expires %q is neither RFC 3339 nor a duration", o.Expires)}
	}
	return spec, nil
}

// PolicyAdd runs dlqctl policy add: the policy is checked here as the
// function checks it (so a bad one is a usage error, offline), then the
// redrive function creates it (action policy_add, one conditional write
// under its role: the operator needs no write permission on the table),
// under the id chosen here, so that a request sent again meets the policy
// it created rather than creating another.
func (a *App) PolicyAdd(ctx context.Context, o PolicyAddOptions) error {
	spec, err := o.Spec(a.Now())
	if err != nil {
		return err
	}
	ps := redrive.NewPolicySpec(spec)
	actor, err := a.actor(ctx)
	if err != nil {
		return err
	}
	p, err := policy.New(ps.Spec(o.Source), actor, a.Now())
	var pe *policy.Error
	if errors.As(err, &pe) {
		return mapPolicyError(err)
	}
	if err != nil {
		return err
	}
	rep, err := a.invoke(ctx, redrive.Request{Action: redrive.ActionPolicyAdd, Source: o.Source, RequestedBy: actor, PolicyID: p.ID, Policy: ps}, policyAddFlags)
	if err != nil {
		return err
	}
	if p = rep.Policy; p == nil {
		return errors.New("the redrive function reported no policy")
	}
	if a.Output == "json" {
		return a.writeJSON(p)
	}
	fmt.Fprintf(a.Out, "policy %s created by %s for %s: up to %d per run until %s; breaker at %.0f%% over %d replays\n",
		p.ID, p.CreatedBy, p.Source, p.MaxPerRun, p.ExpiresAt.UTC().Format(time.RFC3339), 100*p.Threshold, p.MinSample)
	return nil
}

// PolicyList runs dlqctl policy ls.
func (a *App) PolicyList(ctx context.Context, source string) error {
	if source == "" {
		return &UsageError{errors.New("--source is required")}
	}
	store, counters, err := a.policyStore(ctx)
	if err != nil {
		return err
	}
	pols, err := store.List(ctx, source)
	if err != nil {
		return describe(err, a.Table)
	}
	type row struct {
		*policy.Policy
		Breaker breakerReading `json:"breaker"`
	}
	rows := []row{}
	for _, p := range pols {
		sent, back, err := policy.Counts(ctx, counters, source, p.ID)
		if err != nil {
			return err
		}
		rows = append(rows, row{p, readBreaker(p, p.Judge(sent, back))})
	}
	if a.Output == "json" {
		return a.writeJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(a.Out, "no policies for %s\n", source)
		return nil
	}
	tw := newTable(a.Out)
	fmt.Fprintln(tw, "ID\tSTATE\tSELECTS\tMAX/RUN\tEXPIRES\tSENT\tCAME BACK\tSHARE\tBREAKER\tCREATED BY\tLAST CHANGE")
	var waiting []int // the minimum samples of the breakers below theirs
	for _, r := range rows {
		state := r.State
		if state == policy.StateActive && r.Expired(a.Now()) {
			state = "expired"
		}
		sel := strings.Join(r.Signatures, ",")
		if r.MinAgeSeconds > 0 {
			sel = strings.TrimPrefix(sel+fmt.Sprintf(",older than %s", time.Duration(r.MinAgeSeconds)*time.Second), ",")
		}
		if r.FirstSeenFrom != nil || r.FirstSeenTo != nil {
			sel = strings.TrimPrefix(sel+",first seen in a window", ",")
		}
		last := r.History[len(r.History)-1]
		if !r.Breaker.Judging && !slices.Contains(waiting, r.Breaker.MinSample) {
			waiting = append(waiting, r.Breaker.MinSample)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%.0f%%\t%s\t%s\t%s by %s\n", r.ID, state, sel, r.MaxPerRun,
			r.ExpiresAt.UTC().Format(time.RFC3339), r.Breaker.Sent, r.Breaker.CameBack, 100*r.Breaker.Share, r.Breaker.text(r.Threshold), r.CreatedBy, last.Action, last.Actor)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(waiting) > 0 {
		slices.Sort(waiting)
		here := make([]string, len(waiting))
		for i, n := range waiting {
			here[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(a.Out, "\na breaker judges only once its policy has sent its minimum sample (here %s; --min-sample, default %d) since it was created or resumed;\nbelow it, however many came back, it cannot trip: the policy goes on replaying up to its max per run\n",
			strings.Join(here, " or "), policy.DefaultMinSample)
	}
	return nil
}

// breakerReading is a breaker's reading as dlqctl prints it: the
// counts since the last resume, the minimum sample and whether it is
// reached (below it the breaker cannot trip).
type breakerReading struct {
	Sent      int64   `json:"sent"`
	CameBack  int64   `json:"came_back"`
	Share     float64 `json:"share"`
	Trip      bool    `json:"trip"`
	MinSample int     `json:"min_sample"`
	// Judging is true once Sent reached MinSample.
	Judging bool `json:"judging"`
}

func readBreaker(p *policy.Policy, b policy.Breaker) breakerReading {
	return breakerReading{Sent: b.Sent, CameBack: b.CameBack, Share: b.Share, Trip: b.Trip, MinSample: p.MinSample, Judging: b.Sent >= int64(p.MinSample)}
}

// text is the BREAKER column.
func (b breakerReading) text(threshold float64) string {
	if !b.Judging {
		return fmt.Sprintf("cannot trip yet: %d of %d minimum sample sent", b.Sent, b.MinSample)
	}
	if b.Trip {
		return fmt.Sprintf("tripped: over %.0f%% came back", 100*threshold)
	}
	return fmt.Sprintf("judging: trips over %.0f%% came back", 100*threshold)
}

// PolicyChange runs dlqctl policy rm and resume: the redrive function
// revokes or resumes the policy (actions policy_revoke, policy_resume),
// with one conditional write under its role.
func (a *App) PolicyChange(ctx context.Context, o PolicyChangeOptions) error {
	if err := requireFlags(required{"--source", o.Source == ""}, required{"--reason", strings.TrimSpace(o.Reason) == ""}); err != nil {
		return err
	}
	action := redrive.ActionPolicyRevoke
	if o.Resume {
		action = redrive.ActionPolicyResume
	}
	rep, err := a.invoke(ctx, redrive.Request{Action: action, Source: o.Source, RequestedBy: a.Actor, PolicyID: o.ID, Reason: o.Reason}, policyChangeFlags(o.ID, o.Source))
	if err != nil {
		return err
	}
	next := rep.Policy
	if next == nil || len(next.History) == 0 {
		return errors.New("the redrive function reported no policy")
	}
	if a.Output == "json" {
		return a.writeJSON(next)
	}
	fmt.Fprintf(a.Out, "policy %s %s by %s\n", next.ID, next.History[len(next.History)-1].Action, a.Actor)
	return nil
}

// policyAddFlags is the mapper of dlqctl policy add: a problem the
// function's validation of the policy finds reads with the flags.
func policyAddFlags(p string) string {
	rest, ok := strings.CutPrefix(p, "policy refused: ")
	if !ok {
		return mapFields(strings.ReplaceAll(p, "policy_id", "the id dlqctl chose"), func(int) string { return "the policy" })
	}
	var out []string
	for _, q := range strings.Split(rest, "; ") {
		for _, f := range policyFlags {
			if r, ok := strings.CutPrefix(q, f.from); ok {
				q = f.to + r
				break
			}
		}
		out = append(out, q)
	}
	return "policy refused: " + strings.Join(out, "; ")
}

// policyChangeFlags is the mapper of dlqctl policy rm and resume: the
// policy is the ID argument.
func policyChangeFlags(id, source string) flagMapper {
	return func(p string) string {
		switch {
		case p == "policy_id names no policy of this source":
			return fmt.Sprintf("no policy %q for %s", id, source)
		case strings.HasPrefix(p, "policy_id is not a policy id"):
			return fmt.Sprintf("ID %q", id) + strings.TrimPrefix(p, "policy_id")
		case strings.HasSuffix(p, " needs a reason: it is recorded in the policy's sealed history"):
			return "--reason is required: it is recorded in the policy's sealed history"
		}
		return mapFields(p, func(int) string { return fmt.Sprintf("ID %q", id) })
	}
}
