package redrive

import (
	"time"

	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

// Outcome counts records with one outcome and lists their ids.
type Outcome struct {
	Count int      `json:"count"`
	IDs   []string `json:"ids"`
}

func (o *Outcome) add(id string) {
	o.Count++
	o.IDs = append(o.IDs, id)
}

// Stop reasons.
const (
	StoppedDone        = "done"
	StoppedMaxMessages = "max_messages"
	StoppedDeadline    = "deadline"
)

// Report is the outcome of one run.
type Report struct {
	RunID       string `json:"run_id"`
	Action      string `json:"action"`
	Source      string `json:"source"`
	RequestedBy string `json:"requested_by"`
	DryRun      bool   `json:"dry_run"`
	// DryRunReason says why a run that was not asked to be dry was dry
	// (a high-risk replay without approval).
	DryRunReason string `json:"dry_run_reason,omitempty"`

	// Redriven were sent (or, in a dry run, would be).
	Redriven Outcome `json:"redriven"`
	// Skipped were in flight, already redriven or resolved, or no longer
	// matched when read.
	Skipped Outcome `json:"skipped"`
	// Held failed the current schema and were not sent.
	Held Outcome `json:"held"`
	// Parked reached their redrive cap and were parked as poison.
	Parked Outcome `json:"parked"`
	// Failed could not be sent after retries; their claim was released.
	Failed Outcome `json:"failed"`
	// Settled were resolved: their replay did not come back in time.
	Settled Outcome `json:"settled"`
	// SettleWindowSeconds is the window the run settled with: the
	// configured one or, when the source queue's redrive policy and
	// visibility timeout need longer, that (0 when nothing was due).
	SettleWindowSeconds int64 `json:"settle_window_seconds,omitempty"`
	// SettleSkipped says why the run settled nothing (the source queue's
	// attributes could not be read, so the window could not be checked).
	SettleSkipped string `json:"settle_skipped,omitempty"`
	// Corrected is the record a correct action corrected, and Correction
	// what was recorded (its body left out).
	Corrected  Outcome                `json:"corrected"`
	Correction *quarantine.Correction `json:"correction,omitempty"`
	// Policies is what each standing policy did (action policies).
	Policies []PolicyOutcome `json:"policies,omitempty"`

	// Remaining matching records this run did not reach.
	Remaining int `json:"remaining"`
	// Stopped says why the run ended.
	Stopped    string    `json:"stopped"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// AddOutcomes adds r's per-outcome counts and ids to rep's (several runs
// reported as one).
func (rep *Report) AddOutcomes(r *Report) {
	for _, p := range []struct{ dst, src *Outcome }{
		{&rep.Redriven, &r.Redriven}, {&rep.Skipped, &r.Skipped}, {&rep.Held, &r.Held},
		{&rep.Parked, &r.Parked}, {&rep.Failed, &r.Failed}, {&rep.Settled, &r.Settled},
	} {
		p.dst.Count += p.src.Count
		p.dst.IDs = append(p.dst.IDs, p.src.IDs...)
	}
}
