package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Outcome counts records with one outcome and lists their ids. Count is
// always exact; IDs stops growing when the report's id lists reach
// MaxReportIDBytes, and IDsTruncated then says so.
type Outcome struct {
	Count        int      `json:"count"`
	IDs          []string `json:"ids"`
	IDsTruncated bool     `json:"ids_truncated,omitempty"`
}

// MaxReportIDBytes bounds the JSON of all id lists of one report, so that
// a report stays well under Lambda's 6 MB response limit (10,000 ids of
// the longest kind would not).
const MaxReportIDBytes = 4 << 20

// MarshalJSON writes an outcome without ids with "ids": [], never null.
func (o Outcome) MarshalJSON() ([]byte, error) {
	type plain Outcome
	if o.IDs == nil {
		o.IDs = []string{}
	}
	return json.Marshal(plain(o))
}

func (o *Outcome) add(id string) {
	o.Count++
	o.IDs = append(o.IDs, id)
}

// note counts id under o and lists it while the id budget lasts.
func (rep *Report) note(o *Outcome, id string) {
	o.Count++
	raw, _ := json.Marshal(id)
	if rep.idBytes+len(raw)+1 > MaxReportIDBytes {
		o.IDsTruncated = true
		return
	}
	rep.idBytes += len(raw) + 1
	o.IDs = append(o.IDs, id)
}

// Stop reasons.
const (
	StoppedDone        = "done"
	StoppedMaxMessages = "max_messages"
	StoppedDeadline    = "deadline"
	// StoppedWalkBound: a FIFO run walked MaxFIFOWalk index entries.
	StoppedWalkBound = "walk_bound"
	// StoppedPendingApproval: the request is high-risk; it waits, as a
	// pending approval, for a second person (Report.Approval).
	StoppedPendingApproval = "pending_approval"
)

// Report is the outcome of one run.
type Report struct {
	// RunID and Action are left out when empty (a report that adds up
	// several runs has no one run id).
	RunID  string `json:"run_id,omitempty"`
	Action string `json:"action,omitempty"`
	Source string `json:"source"`
	// Target is the registered source a redrive to another queue replays
	// into (request field target).
	Target      string `json:"target,omitempty"`
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
	// SkippedNoRoom says why records of a redrive to another queue were
	// skipped unclaimed (NoRoomForRecordID): their messages would go
	// without dlq-record-id. Their ids are under Skipped.
	SkippedNoRoom string `json:"skipped_no_room,omitempty"`
	// Held failed the current schema and were not sent.
	Held Outcome `json:"held"`
	// Parked reached their redrive cap and were parked as poison.
	Parked Outcome `json:"parked"`
	// Failed could not be sent after retries (their claim was released), or
	// hit an error of their own (the run went on with the others).
	Failed Outcome `json:"failed"`
	// Unknown were sent without an answer from SQS (a timeout, a 5xx): they
	// may be enqueued. Each counts toward its cap, is QUARANTINED again and
	// says "possibly sent" in its sealed history.
	Unknown Outcome `json:"unknown"`
	// Deferred were not sent to keep FIFO order: an earlier message of
	// their group was not (surely) sent this run.
	Deferred Outcome `json:"deferred"`
	// Integrity failed verification (a sealed field, the inline body or a
	// claim-checked object changed behind the seal): they were set aside
	// by an integrity hold as found, never re-sealed, released or sent,
	// and later runs no longer list them (dlqctl ls --held does).
	Integrity Outcome `json:"held_integrity"`
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
	// Record is the version an operator action wrote: after a park or
	// unpark without its payload values (bodies, attributes, the
	// validator's words; its seal then does not verify), after a read
	// whole, sealed, with the read recorded.
	Record *quarantine.Record `json:"record,omitempty"`
	// RedriveCapBefore is the cap an unpark raised (0: not raised).
	RedriveCapBefore int `json:"redrive_cap_before,omitempty"`
	// Payload is what a read returned.
	Payload *Payload `json:"payload,omitempty"`
	// Policies is what each standing policy did (action policies).
	Policies []PolicyOutcome `json:"policies,omitempty"`
	// PoliciesSkipped says why a policies run ran no policy
	// (PoliciesCountersOff).
	PoliciesSkipped string `json:"policies_skipped,omitempty"`
	// Policy is the version of the standing policy a policy action wrote
	// (or found written by an earlier try of the same request), whole and
	// sealed.
	Policy *policy.Policy `json:"policy,omitempty"`

	// Approval is the four-eyes approval the request created (pending:
	// nothing ran), decided, or ran under.
	Approval *approval.Approval `json:"approval,omitempty"`
	// AlreadyDecided says the caller had already made this decision (a
	// call sent again after a lost answer): nothing ran this time.
	AlreadyDecided bool `json:"already_decided,omitempty"`

	// Remaining counts the records the request still covers that this run
	// left for a later one: those it did not reach (at most
	// MaxRemainingCount) and, in a replay, those it deferred or failed
	// (given back unsent). A caller invokes again while it is above 0.
	// The possibly sent (Unknown) are not counted: SQS may have enqueued
	// them, and sending them again at once would double the duplicate.
	Remaining int `json:"remaining"`
	// Stopped says why the run ended.
	Stopped    string    `json:"stopped"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`

	idBytes int // JSON bytes of the id lists so far
	// settleRan: the run's settle step ran (a policies tick settles once).
	settleRan bool
}

// AddOutcomes adds r's per-outcome counts and ids to rep's (several runs
// reported as one).
func (rep *Report) AddOutcomes(r *Report) {
	for _, p := range []struct{ dst, src *Outcome }{
		{&rep.Redriven, &r.Redriven}, {&rep.Skipped, &r.Skipped}, {&rep.Held, &r.Held},
		{&rep.Parked, &r.Parked}, {&rep.Failed, &r.Failed}, {&rep.Settled, &r.Settled},
		{&rep.Unknown, &r.Unknown}, {&rep.Deferred, &r.Deferred}, {&rep.Integrity, &r.Integrity},
	} {
		for _, id := range p.src.IDs {
			rep.note(p.dst, id)
		}
		p.dst.Count += p.src.Count - len(p.src.IDs)
		p.dst.IDsTruncated = p.dst.IDsTruncated || p.src.IDsTruncated
	}
}

// note records an outcome for id.
func (r *run) note(o *Outcome, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.note(o, id)
}

// NoRoomForRecordID is why a redrive to another queue skips a record
// whose original message attributes fill SQS's 10 (Report.SkippedNoRoom).
const NoRoomForRecordID = "no room for dlq-record-id: a replay into another queue could not come back to its record"

// noteNoRoom notes id skipped for NoRoomForRecordID.
func (r *run) noteNoRoom(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.note(&r.rep.Skipped, id)
	r.rep.SkippedNoRoom = NoRoomForRecordID
}

// logFinished writes the run's one log line: its counts, never its ids.
func (rep *Report) logFinished(ctx context.Context, log *slog.Logger, err error) {
	log.InfoContext(ctx, "redrive run finished",
		"run_id", rep.RunID, "action", rep.Action, "source", rep.Source, "dry_run", rep.DryRun,
		"redriven", rep.Redriven.Count, "skipped", rep.Skipped.Count, "held", rep.Held.Count,
		"parked", rep.Parked.Count, "failed", rep.Failed.Count, "settled", rep.Settled.Count, "held_integrity", rep.Integrity.Count,
		"unknown", rep.Unknown.Count, "deferred", rep.Deferred.Count,
		"remaining", rep.Remaining, "stopped", rep.Stopped, "error_kind", quarantine.ErrorKind(err))
}

// Summary counts what the run did, without ids.
func (rep *Report) Summary() string {
	var parts []string
	for _, o := range []struct {
		name string
		o    Outcome
	}{{"redriven", rep.Redriven}, {"skipped", rep.Skipped}, {"held", rep.Held}, {"parked", rep.Parked}, {"failed", rep.Failed},
		{"unknown", rep.Unknown}, {"deferred", rep.Deferred}, {"held_integrity", rep.Integrity}, {"settled", rep.Settled}, {"corrected", rep.Corrected}} {
		if o.o.Count > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o.name, o.o.Count))
		}
	}
	if rep.Policy != nil {
		parts = append(parts, "policy "+rep.Policy.ID+" "+rep.Policy.State)
	}
	if rep.Target != "" {
		parts = append(parts, "into "+rep.Target)
	}
	parts = append(parts, fmt.Sprintf("remaining %d", rep.Remaining), "stopped "+rep.Stopped)
	if rep.DryRun {
		parts = append(parts, "dry run")
	}
	return strings.Join(parts, ", ")
}
