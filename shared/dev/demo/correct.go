package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// MaxCorrections bounds the malformed events the demo's pharmacist fixes.
const MaxCorrections = 5

// correctAndPolicy corrects up to MaxCorrections malformed events through
// the redrive function's correct action, creates a standing policy for
// corrected records and applies it, then lets the consumer take the
// replays and ingest drain the DLQ.
func correctAndPolicy(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, ops *operators, gen []Generated, c *consumer, rep *Report) error {
	idOf := recordIDs(fns.IngestConfig, fns.Source)
	rep.Corrected = map[string]bool{}
	for _, g := range gen {
		if g.Kind != Malformed || !strings.Contains(g.Body, `"ndc":"NDC?`) || len(rep.Corrected) == MaxCorrections {
			continue
		}
		fixed := strings.Replace(g.Body, `"ndc":"NDC?`, `"ndc":"`, 1)
		// A correction is high-risk: operator-a (the pharmacist) asks,
		// operator-b approves.
		if _, err := ops.run(ctx, redrive.Request{Action: redrive.ActionCorrect, Source: fns.Source, IDs: []string{idOf(g.Body)},
			Reason: "NDC keyed with a stray prefix; corrected from the shipping manifest", Payload: fixed}); err != nil {
			return fmt.Errorf("correct: %w", err)
		}
		rep.Corrected[g.ID] = true
		c.mu.Lock()
		c.byBody[fixed] = Generated{ID: g.ID, Body: fixed, Kind: Good}
		c.mu.Unlock()
	}
	schemaVersion := ""
	if s, err := sources.Build(fns.IngestConfig.Sources); err == nil && s[fns.Source] != nil {
		schemaVersion = s[fns.Source].SchemaVersion
	}
	// The lead's standing policy: high-risk too, asked and approved.
	created, err := ops.run(ctx, redrive.Request{Action: redrive.ActionPolicyAdd, Source: fns.Source, Reason: "replay what the pharmacists correct",
		Policy: &redrive.PolicySpec{Signatures: []string{quarantine.Signature(quarantine.StageCorrection, quarantine.ReasonCorrection, schemaVersion)},
			MaxPerRun: 50, ExpiresIn: "1h", Note: "replay what the pharmacists correct"}})
	if err != nil {
		return fmt.Errorf("policy add: %w", err)
	}
	if created.Policy == nil {
		return fmt.Errorf("policy add: no policy in the report (stopped %s)", created.Stopped)
	}
	rep.Approvals, rep.Approver = ops.approved, ops.b.Identity.ARN
	out, err := fns.Redrive.Handle(ctx, []byte(`{"action":"policies","source":"`+fns.Source+`","requested_by":"schedule:policies"}`))
	if err != nil {
		return fmt.Errorf("standing policies: %w", err)
	}
	rep.Policies = out.Policies
	if err := c.run(ctx); err != nil {
		return err
	}
	if err := waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"]); err != nil {
		return err
	}
	time.Sleep(fns.Settle + 100*time.Millisecond)
	return nil
}
