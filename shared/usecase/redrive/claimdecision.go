package redrive

import (
	"errors"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The claim state machine, as pure decisions: what to do with a record
// read for a claim (decideClaim) and, once claimed, with what its payload
// read gave (decidePayload). They read nothing and write nothing; the
// run's claim applies them (claim.go).

// claimAction is what a claim decision says to do with one record.
type claimAction int

const (
	// claimTake: claim it (write next), then read and check its payload.
	claimTake claimAction = iota
	// claimSkip: leave it as it is (Skipped); block says whether its FIFO
	// group waits for it.
	claimSkip
	// claimDefer: an earlier message of its FIFO group is not sent this
	// run (Deferred).
	claimDefer
	// claimHold: it fails verification (cause): set it aside as found.
	claimHold
	// claimPark: it reached its cap: park it as poison (write next, unless
	// the run is dry).
	claimPark
	// claimReturn: an approved replay of a parked record whose run ended
	// without recording its send goes back to PARKED (write next).
	claimReturn
	// claimFail: a transition refused it (cause): the record's failure.
	claimFail
)

func (a claimAction) String() string {
	switch a {
	case claimTake:
		return "take"
	case claimSkip:
		return "skip"
	case claimDefer:
		return "defer"
	case claimHold:
		return "hold"
	case claimPark:
		return "park"
	case claimReturn:
		return "return"
	case claimFail:
		return "fail"
	}
	return "unknown"
}

// claimDecision is what decideClaim says to do with one record.
type claimDecision struct {
	action claimAction
	// next is the successor to write (take, park, return); nil for a dry
	// run's park.
	next *quarantine.Record
	// block: the record stays open and unsent, so its FIFO group sends
	// nothing after it this run (skip).
	block bool
	// reason says why a record is skipped.
	reason string
	// cause is why a record is held (its integrity failure) or failed.
	cause error
}

// claimInput is what a claim decision depends on besides the record read.
type claimInput struct {
	req    Request
	source string
	// sourceARN is the source's configured ARN: a record recorded from a
	// queue of another ARN (kept under the name while that queue had no
	// configuration) is never sent to this one.
	sourceARN string
	// dryRun is the run's: an unapproved high-risk run is dry whatever
	// the request said.
	dryRun bool
	// blocked: an earlier message of the record's FIFO group is not
	// (surely) sent this run.
	blocked bool
	now     time.Time
	lease   time.Duration
}

// decideClaim decides what to do with rec, read for a claim.
func decideClaim(rec *quarantine.Record, in claimInput) claimDecision {
	actor := in.req.RequestedBy
	if verr := quarantine.Verify(rec); quarantine.IsIntegrityFailure(verr) {
		// Checked before anything else about it: a record changed behind
		// its seal (or that no longer decodes) is set aside, whatever its
		// fields now claim.
		return claimDecision{action: claimHold, cause: verr}
	}
	if rec.Status == quarantine.StatusRedriving && rec.ParkedCap != 0 && !in.req.IncludeParked && !in.dryRun {
		// An approved replay of a parked record whose run ended without
		// recording its send: back to PARKED (possibly sent), for an
		// approved run to take up, instead of holding its group back.
		if back, err := rec.ReturnExpiredParkedClaim(actor, in.now); err == nil {
			return claimDecision{action: claimReturn, next: back}
		}
	}
	if in.sourceARN != "" && rec.SourceARN != "" && rec.SourceARN != in.sourceARN {
		open := rec.Status == quarantine.StatusQuarantined || rec.Status == quarantine.StatusRedriving
		return claimDecision{action: claimSkip, block: open, reason: "recorded from a queue of another ARN"}
	}
	if ok, why := in.req.eligible(rec, in.source); !ok {
		// Still open, not replayed now: its group waits.
		open := rec.Status == quarantine.StatusQuarantined || rec.Status == quarantine.StatusRedriving
		return claimDecision{action: claimSkip, block: open, reason: why}
	}
	if in.blocked {
		return claimDecision{action: claimDefer}
	}
	var next *quarantine.Record
	var err error
	if rec.Status == quarantine.StatusParked {
		next, err = rec.ClaimParked(actor, in.now, in.lease)
	} else {
		next, err = rec.Claim(actor, in.now, in.lease)
	}
	switch {
	case errors.Is(err, quarantine.ErrCapReached):
		return decidePark(rec, in)
	case errors.Is(err, quarantine.ErrNotClaimable):
		// In flight in another run: its group waits for it.
		return claimDecision{action: claimSkip, block: rec.Status == quarantine.StatusRedriving, reason: "not claimable"}
	case quarantine.IsIntegrityFailure(err):
		return claimDecision{action: claimHold, cause: err}
	case err != nil:
		return claimDecision{action: claimFail, cause: err}
	}
	return claimDecision{action: claimTake, next: next}
}

// decidePark decides the parking of rec, which reached its cap. A dry run
// reports it parked whatever the transition says, unless it fails
// verification.
func decidePark(rec *quarantine.Record, in claimInput) claimDecision {
	parked, perr := rec.ParkPoison(in.req.RequestedBy, in.now)
	switch {
	case quarantine.IsIntegrityFailure(perr):
		return claimDecision{action: claimHold, cause: perr}
	case in.dryRun:
		return claimDecision{action: claimPark}
	case perr != nil:
		return claimDecision{action: claimFail, cause: perr}
	}
	return claimDecision{action: claimPark, next: parked}
}

// payloadAction is what to do with a claimed record once its payload is
// read.
type payloadAction int

const (
	// payloadSend: send it.
	payloadSend payloadAction = iota
	// payloadHold: a claim-checked object does not match its sealed hash
	// (cause): set the record aside unclaimed, as found.
	payloadHold
	// payloadPark: the payload is gone for good: park the claim for an
	// operator.
	payloadPark
	// payloadRelease: the payload could not be read: give the claim back
	// (Failed).
	payloadRelease
	// payloadInvalid: the payload fails the current schema: give the
	// claim back as held (class).
	payloadInvalid
)

// payloadDecision is what decidePayload says to do with a claimed record.
type payloadDecision struct {
	action payloadAction
	reason string                     // the reason recorded (park, release, invalid)
	class  *quarantine.Classification // the gate's classification (invalid)
	cause  error                      // the integrity failure (hold)
}

// decidePayload decides what becomes of a claimed record of src given its
// replay body and the errors of reading the body and the attributes.
func decidePayload(src *quarantine.Source, body []byte, berr, aerr error) payloadDecision {
	var verdict quarantine.Verdict
	if berr == nil {
		verdict = src.Check(body)
	}
	if quarantine.IsIntegrityFailure(berr) || quarantine.IsIntegrityFailure(aerr) {
		return payloadDecision{action: payloadHold, cause: errors.Join(berr, aerr)}
	}
	if berr != nil || aerr != nil {
		perr := errors.Join(berr, aerr)
		reason := "payload unreadable: " + quarantine.ErrorKind(perr)
		if unreadable(perr) {
			// It fails the same way on every run: park it for an operator
			// instead of letting it sit at the head of every run.
			return payloadDecision{action: payloadPark, reason: reason}
		}
		return payloadDecision{action: payloadRelease, reason: reason}
	}
	if !verdict.Valid {
		// The same gate as ingest: a payload that fails the current schema
		// is never sent.
		c := quarantine.Classify(src, nil, verdict)
		return payloadDecision{action: payloadInvalid, reason: "held: " + c.Reason, class: &c}
	}
	return payloadDecision{action: payloadSend}
}

// dryOutcome is the outcome a dry run reports for a record whose payload
// decision is p (a hold is reported by setAside).
func (p payloadDecision) dryOutcome(rep *Report) *Outcome {
	switch p.action {
	case payloadPark, payloadRelease:
		return &rep.Failed
	case payloadInvalid:
		return &rep.Held
	}
	return &rep.Redriven
}

// unreadable reports whether a payload error is one no retry cures: the
// object is gone. (One that does not hash to the record's seal never gets
// here: it is an integrity failure, and the record is held.)
func unreadable(err error) bool {
	switch quarantine.ErrorKind(err) {
	case "aws:NoSuchKey", "aws:NoSuchVersion", "aws:NotFound", "aws:InvalidObjectState":
		// (Not AccessDenied: a KMS or IAM mistake would park every
		// claim-checked record in one run.)
		return true
	}
	return false
}
