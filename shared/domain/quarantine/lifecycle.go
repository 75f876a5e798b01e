package quarantine

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// ActorIngest is the actor recorded for arrivals.
const ActorIngest = "ingest"

// Arrive returns the successor of r after a genuine re-failure: the attempt
// is appended (keeping the newest maxAttempts, with the total in
// AttemptCount), first_seen and redrive_count are kept, last_seen moves, and
// a record that was redriven or resolved is quarantined again. The result is
// sealed and chained to r; r itself is not modified.
func (r *Record) Arrive(att Attempt, c Classification, maxAttempts int, now time.Time) (*Record, error) {
	next := r.Clone()
	att.Kind = AttemptArrival
	next.Attempts = appendBounded(next.Attempts, att, maxAttempts)
	next.AttemptCount++
	next.LastSeen = At(now)
	if r.Status == StatusRedriving {
		// The round's run has recorded no outcome yet: it may still, or it
		// may have crashed after sending, any number of times (each try
		// without an answer may have been enqueued). Once this arrival
		// clears the lease, no takeover will say so: the arrival does.
		open := fmt.Sprintf(openRoundNote, r.RedriveCount)
		last := &next.Attempts[len(next.Attempts)-1]
		last.Note = JoinNote(Clip(last.Note, MaxNoteBytes-len(open)-len("; ")), open)
	}
	switch next.Status {
	case StatusRedriving, StatusRedriven, StatusResolved:
		next.Status = StatusQuarantined
		next.StatusSince = At(now)
		next.LeaseUntil, next.LeaseReclaimed, next.ParkedCap = nil, false, 0
	}
	// A parked poison record stays poison: the arrival is recorded in its
	// history only. An archived stub takes no arrival: ingest opens a
	// successor record for it instead, and the stub stays as archived.
	if next.Status == StatusArchived {
		return nil, ErrNotClaimable
	}
	if next.Status == StatusQuarantined {
		c = c.bound()
		next.FailureClass = c.Class
		next.FailureStage = c.Stage
		next.FailureReason = c.Reason
		next.FailureDetail = c.Detail
		next.FailureSignature = c.Signature
	}
	return next, next.reseal(r)
}

// reseal bumps the version, chains to prev and seals. It refuses, with
// prev's *SealError, a predecessor whose seal or inline body does not
// verify: no transition re-seals what it cannot verify (a forged value
// would otherwise sit under a valid seal). The caller sets such a record
// aside (Store.Hold) and writes nothing.
func (r *Record) reseal(prev *Record) error {
	if err := Verify(prev); err != nil {
		return err
	}
	r.Version = prev.Version + 1
	r.PrevSeal = prev.Seal
	r.WriteID = NewWriteID()
	return SealRecord(r)
}

// NewWriteID returns a fresh random write token (Record.WriteID).
func NewWriteID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// appendBounded appends a, its texts clipped, and keeps the newest max
// entries, except that the first arrival (the original failure, with its
// message id) is never evicted: it is kept with the newest max-1.
func appendBounded(list []Attempt, a Attempt, max int) []Attempt {
	list = append(list, a.bound())
	if max <= 0 || len(list) <= max {
		return list
	}
	keep := list[len(list)-max:]
	if max > 1 {
		for i := range list {
			if list[i].IsArrival() {
				if i < len(list)-max {
					keep = append([]Attempt{list[i]}, list[len(list)-max+1:]...)
				}
				break
			}
		}
	}
	return append([]Attempt(nil), keep...)
}

// Stages and actors recorded by the redrive transitions.
const (
	StageRedrive = "redrive"
	StageSettle  = "settle"
	ActorSettle  = "settler"
)

func (r *Record) next(now time.Time, att Attempt) *Record {
	n := r.Clone()
	att.At = At(now)
	att.Kind = "" // only an arrival is an arrival
	att.Actor, att.Approval, att.Target = ActorName(att.Actor), ActorApproval(att.Actor), ActorTarget(att.Actor)
	n.Attempts = appendBounded(n.Attempts, att, DefaultMaxAttempts)
	n.AttemptCount++
	return n
}

func (r *Record) setStatus(s Status, now time.Time) {
	r.Status, r.StatusSince = s, At(now)
}

// Claim takes r for one replay round. A QUARANTINED record below its cap
// moves to REDRIVING with a lease and redrive_count + 1. A REDRIVING record
// whose lease expired is taken over for the same round (same count, same
// deduplication id); its history says a duplicate send is possible. A
// QUARANTINED record at its cap returns ErrCapReached (park it); anything
// else returns ErrNotClaimable.
func (r *Record) Claim(actor string, now time.Time, lease time.Duration) (*Record, error) {
	until := At(now.Add(lease))
	switch {
	case r.Status == StatusQuarantined && r.RedriveCount >= r.RedriveCap:
		return nil, ErrCapReached
	case r.Status == StatusQuarantined:
		n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf("claimed for round %d", r.RedriveCount+1), Actor: actor})
		n.RedriveCount++
		n.setStatus(StatusRedriving, now)
		n.LeaseUntil, n.LeaseReclaimed, n.RedrivenBy = &until, false, Clip(ActorName(actor), MaxActorBytes)
		return n, n.reseal(r)
	case r.Status == StatusRedriving && r.LeaseUntil != nil && !now.Before(r.LeaseUntil.Time):
		n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf(reclaimReason, r.RedriveCount), Actor: actor})
		n.LeaseUntil, n.LeaseReclaimed, n.RedrivenBy = &until, true, Clip(ActorName(actor), MaxActorBytes)
		return n, n.reseal(r)
	}
	return nil, ErrNotClaimable
}

// ClaimParked takes a PARKED record for one operator-approved replay. The
// cap is raised to the new count, in the sealed history, so that a record is
// still never replayed more often than its recorded cap.
func (r *Record) ClaimParked(actor string, now time.Time, lease time.Duration) (*Record, error) {
	if r.Status != StatusParked {
		return nil, ErrNotClaimable
	}
	until := At(now.Add(lease))
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf("parked record claimed with approval; cap raised from %d to %d", r.RedriveCap, max(r.RedriveCap, r.RedriveCount+1)), Actor: actor})
	n.RedriveCount++
	n.ParkedCap = max(r.RedriveCap, 1)
	n.RedriveCap = max(n.RedriveCap, n.RedriveCount)
	n.setStatus(StatusRedriving, now)
	n.LeaseUntil, n.LeaseReclaimed, n.RedrivenBy = &until, false, Clip(ActorName(actor), MaxActorBytes)
	return n, n.reseal(r)
}

// ParkPoison parks a record that reached its cap: class poison, never
// re-queued automatically.
func (r *Record) ParkPoison(actor string, now time.Time) (*Record, error) {
	if r.Status != StatusQuarantined && r.Status != StatusRedriving {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf("redrive cap %d reached; parked as poison", r.RedriveCap), Actor: actor})
	n.setStatus(StatusParked, now)
	n.FailureClass = ClassPoison
	n.LeaseUntil, n.LeaseReclaimed, n.ParkedCap = nil, false, 0
	return n, n.reseal(r)
}

// Release gives a claimed record back without a replay: QUARANTINED again,
// and the round's redrive count returned (unless the round was reclaimed
// from an expired lease, when it may already have been sent). A held record
// (the gate refused its payload) takes the gate's classification.
func (r *Record) Release(actor, reason string, now time.Time, held *Classification) (*Record, error) {
	if r.Status != StatusRedriving {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: reason, Actor: actor})
	if !r.LeaseReclaimed {
		n.RedriveCount--
	}
	n.setStatus(StatusQuarantined, now)
	n.LeaseUntil, n.LeaseReclaimed = nil, false
	if n.backToParked() {
		return n, n.reseal(r)
	}
	if held != nil {
		b := held.bound()
		held = &b
		n.FailureClass, n.FailureStage, n.FailureReason = held.Class, held.Stage, held.Reason
		n.FailureDetail, n.FailureSignature = held.Detail, held.Signature
	}
	return n, n.reseal(r)
}

// MarkRedriven records a completed send: REDRIVEN, with the new message id.
func (r *Record) MarkRedriven(actor, messageID string, now time.Time) (*Record, error) {
	return r.MarkSent(actor, messageID, false, false, now)
}

// NoteSent records a send whose record changed meanwhile (its message
// already came back, say): the history gets the send, the status stays.
func (r *Record) NoteSent(actor, messageID string, round int, now time.Time) (*Record, error) {
	return r.NoteSentWhileChanged(actor, messageID, round, false, false, now)
}

// NoteSentWhileChanged is NoteSent with MarkSent's note on an earlier try
// that had no answer.
func (r *Record) NoteSentWhileChanged(actor, messageID string, round int, maybeTwice, fifo bool, now time.Time) (*Record, error) {
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: sentReason(round, maybeTwice, fifo) + " while the record changed", MessageID: messageID, Actor: actor})
	n.LastSentMessageID = Clip(messageID, MaxMessageIDBytes)
	return n, n.reseal(r)
}

// Settle resolves a REDRIVEN record whose replay did not come back within
// the settle window.
func (r *Record) Settle(now time.Time, window time.Duration) (*Record, error) {
	if r.Status != StatusRedriven || now.Sub(r.StatusSince.Time) < window {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageSettle, Reason: fmt.Sprintf("no failure within %s of the replay", window), Actor: ActorSettle})
	n.setStatus(StatusResolved, now)
	return n, n.reseal(r)
}

// StageArchive is the stage recorded when the sweeper archives a record.
const StageArchive = "archive"

// Archivable reports whether r is due for the archive at now: PARKED for
// parkAge, or RESOLVED for resolvedAge.
func (r *Record) Archivable(now time.Time, parkAge, resolvedAge time.Duration) bool {
	age := now.Sub(r.StatusSince.Time)
	switch r.Status {
	case StatusParked:
		return age >= parkAge
	case StatusResolved:
		return age >= resolvedAge
	}
	return false
}

// ArchiveStub turns r, whose current version was written to the archive
// as ref, into an ARCHIVED stub: the payload (inline or claim-checked) is
// dropped from the store; the hashes, history and seal chain stay, and the
// stub's prev_seal is the archived version's seal.
func (r *Record) ArchiveStub(actor string, ref ArchiveRef, now time.Time) (*Record, error) {
	if r.Status != StatusParked && r.Status != StatusResolved {
		return nil, ErrNotClaimable
	}
	if ref.Seal != r.Seal {
		return nil, &SealError{ID: r.DLQID, Stored: r.Seal, Computed: ref.Seal, Chain: true}
	}
	n := r.next(now, Attempt{Stage: StageArchive, Reason: "archived to s3://" + ref.Bucket + "/" + ref.Key + " until " + ref.RetainUntil.String(), Actor: actor})
	n.setStatus(StatusArchived, now)
	n.Body, n.Attributes, n.BodyRef, n.AttributesRef = "", nil, nil, nil
	for i := range n.Corrections {
		n.Corrections[i].Body, n.Corrections[i].BodyRef = "", nil
	}
	n.Archive = &ref
	return n, n.reseal(r)
}

// Stages of operator actions.
const (
	StageOperator = "operator"
	StageAudit    = "audit"
)

// ParkManual parks a record by hand, with the operator's reason: it is not
// replayed again until someone unparks it.
func (r *Record) ParkManual(actor, reason string, now time.Time) (*Record, error) {
	if r.Status != StatusQuarantined {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageOperator, Reason: "parked by hand: " + Clip(reason, 256), Actor: actor})
	n.setStatus(StatusParked, now)
	return n, n.reseal(r)
}

// Unpark returns a PARKED record to QUARANTINED, with the operator's
// reason. A poison record becomes exhausted and, if it is at its cap, gets
// one more replay: the cap is raised, in the sealed history.
func (r *Record) Unpark(actor, reason string, now time.Time) (*Record, error) {
	if r.Status != StatusParked {
		return nil, ErrNotClaimable
	}
	why := "unparked by hand: " + Clip(reason, 256)
	if r.RedriveCount >= r.RedriveCap {
		why += fmt.Sprintf("; cap raised from %d to %d", r.RedriveCap, r.RedriveCount+1)
	}
	n := r.next(now, Attempt{Stage: StageOperator, Reason: why, Actor: actor})
	n.setStatus(StatusQuarantined, now)
	if n.FailureClass == ClassPoison {
		n.FailureClass = ClassExhausted
	}
	n.RedriveCap = max(n.RedriveCap, n.RedriveCount+1)
	return n, n.reseal(r)
}

// DefaultMaxReads bounds the payload reads a record lists (ReadCount
// keeps the total).
const DefaultMaxReads = 20

// NotePayloadRead records that actor read the payload: payloads may hold
// regulated data, so every read is in the sealed record. Reads are kept
// apart from the attempts (the newest DefaultMaxReads, with the total in
// ReadCount), so that they never evict the failure history nor count as
// attempts.
func (r *Record) NotePayloadRead(actor string, now time.Time) (*Record, error) {
	n := r.Clone()
	n.Reads = append(n.Reads, Read{At: At(now), Actor: Clip(actor, MaxActorBytes)})
	if len(n.Reads) > DefaultMaxReads {
		n.Reads = append([]Read(nil), n.Reads[len(n.Reads)-DefaultMaxReads:]...)
	}
	n.ReadCount++
	return n, n.reseal(r)
}

// Reasons of the send outcomes, in the sealed history. PossiblySent marks
// every entry that says a replay may have been enqueued although redrive
// could not confirm it (a send that timed out or got a 5xx): the duplicate
// it may cause is explained by it.
const (
	PossiblySent = "possibly sent"
)

// MarkSent records a completed send like MarkRedriven. maybeTwice says an
// earlier try of the same round ended without an answer, so SQS may hold a
// second copy: the history says so. fifo says SQS deduplicated such a copy
// (same deduplication id within its 5-minute interval).
func (r *Record) MarkSent(actor, messageID string, maybeTwice, fifo bool, now time.Time) (*Record, error) {
	if r.Status != StatusRedriving {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: sentReason(r.RedriveCount, maybeTwice, fifo), MessageID: messageID, Actor: actor})
	n.setStatus(StatusRedriven, now)
	n.LeaseUntil, n.LeaseReclaimed, n.ParkedCap = nil, false, 0
	n.LastSentMessageID = Clip(messageID, MaxMessageIDBytes)
	return n, n.reseal(r)
}

func sentReason(round int, maybeTwice, fifo bool) string {
	why := fmt.Sprintf("sent (round %d)", round)
	switch {
	case maybeTwice && fifo:
		why += "; an earlier try had no answer, SQS drops its copy within the 5-minute deduplication interval"
	case maybeTwice:
		why += sentAgainReason
	}
	return why
}

// Reasons that say a round may have reached SQS more often than the
// history's confirmed sends show; MayRepeat reads their round back.
const (
	reclaimReason      = "lease expired; round %d reclaimed, a duplicate send is possible"
	parkedExpiryReason = "lease of an approved replay of a parked record expired (round %d)"
	// sentAgainReason follows "sent (round N)" into a standard queue: each
	// earlier try without an answer may have been enqueued too.
	sentAgainReason = "; an earlier try had no answer and may also have been enqueued: " + PossiblySent + " more than once"
	// sentTwiceReason is how histories written before said it.
	sentTwiceReason = "; an earlier try had no answer and may also have been enqueued: " + PossiblySent + " twice"
	// openRoundNote ends the note of an arrival that found its record
	// REDRIVING: the round's outcome was not recorded yet (a later "sent
	// (round N) while the record changed" entry confirms one send).
	openRoundNote = "came back before round %d recorded its outcome: " + PossiblySent + " more than once"
)

// MayRepeat reports whether a, an entry redrive wrote, says that its round
// may have reached SQS more often than the history's confirmed sends show,
// and which round: a takeover of an expired lease (the run that lost it may
// have sent it, any number of times), a send whose outcome no try learned
// (each try may have been enqueued), a send confirmed after tries that got
// no answer, into a standard queue (a FIFO queue drops those copies within
// its deduplication interval), the expired claim of an approved replay
// of a parked record, and an arrival that found its round's outcome
// unrecorded (its run may have crashed after sending, Arrive). Whoever counts the copies of a replay explains every
// copy beyond the first by such an entry, or finds a duplicate the history
// hides.
func (a *Attempt) MayRepeat() (round int, ok bool) {
	if a.Kind == AttemptArrival && a.Actor == ActorIngest {
		return a.openRound()
	}
	if a.Stage != StageRedrive || a.IsArrival() || a.Actor == ActorIngest {
		return 0, false // an arrival's reason is the sender's text
	}
	var format string
	switch {
	case strings.HasPrefix(a.Reason, "lease expired; "):
		format = reclaimReason
	case strings.HasPrefix(a.Reason, "lease of an approved replay"):
		format = parkedExpiryReason
	case a.IsPossiblySent():
		format = sendUnknownReason + " (round %d,"
	case strings.HasPrefix(a.Reason, "sent (round ") && (strings.Contains(a.Reason, sentAgainReason) || strings.Contains(a.Reason, sentTwiceReason)):
		format = "sent (round %d)"
	default:
		return 0, false
	}
	if _, err := fmt.Sscanf(a.Reason, format, &round); err != nil || round < 1 {
		return 0, false
	}
	return round, true
}

// RoundsThatMayRepeat are the rounds that attempts (a record's history,
// or every version's, in any order) say may have reached SQS more often
// than their confirmed sends: each entry's MayRepeat, except the round an
// arrival found open (Arrive) when the run recorded a send of it that
// MayRepeat does not read as more than one (after such an arrival, "sent
// (round N) while the record changed"): the run was alive and its one
// send was confirmed. Only the run that held round N writes such an entry
// (the arrival ended the round: the next claim is another).
func RoundsThatMayRepeat(attempts []Attempt) map[int]bool {
	out, open, once := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for i := range attempts {
		a := &attempts[i]
		round, ok := a.MayRepeat()
		switch {
		case ok && a.IsArrival():
			open[round] = true
		case ok:
			out[round] = true
		case a.Stage == StageRedrive && !a.IsArrival() && a.Actor != ActorIngest && a.MessageID != "":
			if _, err := fmt.Sscanf(a.Reason, "sent (round %d)", &round); err == nil && round > 0 {
				once[round] = true
			}
		}
	}
	for round := range open {
		if !once[round] {
			out[round] = true
		}
	}
	return out
}

// openRound reads the round an arrival's note says was open when it came
// back (Arrive). Only the note is read: ingest writes it, whereas an
// arrival's reason is the sender's text.
func (a *Attempt) openRound() (round int, ok bool) {
	i := strings.LastIndex(a.Note, strings.SplitN(openRoundNote, "%d", 2)[0])
	if i < 0 || (i > 0 && !strings.HasSuffix(a.Note[:i], "; ")) {
		return 0, false
	}
	if _, err := fmt.Sscanf(a.Note[i:], openRoundNote, &round); err != nil || round < 1 ||
		a.Note[i:] != fmt.Sprintf(openRoundNote, round) {
		return 0, false
	}
	return round, true
}

// sendUnknownReason opens the reason of SendUnknown's history entry.
const sendUnknownReason = "send outcome unknown"

// IsPossiblySent reports whether a records a send that got no answer
// (SendUnknown): it counts toward the cap and may have been enqueued, but
// has no message id.
func (a *Attempt) IsPossiblySent() bool {
	return a.Stage == StageRedrive && a.MessageID == "" && strings.HasPrefix(a.Reason, sendUnknownReason+" (")
}

// SendUnknown records a round whose send could not be confirmed: every try
// ended without an answer (a timeout, a 5xx), so SQS may have enqueued it.
// The safe side is kept both ways: the round counts toward the cap (it may
// have been replayed) and the record is QUARANTINED again (it may not have
// been), so a later run replays it again rather than settle a message that
// never left; the history says a duplicate is possible. A record that
// changed meanwhile keeps its status and gets the history entry only.
func (r *Record) SendUnknown(actor, code string, round int, now time.Time) (*Record, error) {
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf(sendUnknownReason+" (round %d, %s): %s; counted toward the cap", round, Clip(code, 64), PossiblySent), Actor: actor})
	if r.Status == StatusRedriving && r.RedriveCount == round {
		n.setStatus(StatusQuarantined, now)
		n.LeaseUntil, n.LeaseReclaimed = nil, false
		if n.ParkedCap != 0 {
			// An approved replay of a parked record: it stays parked (its
			// cap counts this possibly sent round).
			n.Status, n.ParkedCap = StatusParked, 0
		}
	}
	return n, n.reseal(r)
}

// ParkUnsendable parks a claimed record that no run could ever send as it
// is (its payload cannot be read, or the message exceeds SQS's limits):
// left QUARANTINED it would be claimed and released at the head of every
// run. The round's count is given back, as for Release; an operator fixes
// the record and unparks it.
func (r *Record) ParkUnsendable(actor, reason string, now time.Time) (*Record, error) {
	if r.Status != StatusRedriving {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: "parked, cannot be sent: " + Clip(reason, 256), Actor: actor})
	if !r.LeaseReclaimed {
		n.RedriveCount--
	}
	n.setStatus(StatusParked, now)
	n.LeaseUntil, n.LeaseReclaimed = nil, false
	n.backToParked() // an approved parked replay keeps its former cap
	return n, n.reseal(r)
}

// backToParked returns a record whose claim came from an approved replay
// of a PARKED record to PARKED under its former cap: a claim given back
// never turns a poison record into one the next run replays unapproved.
func (r *Record) backToParked() bool {
	if r.ParkedCap == 0 {
		return false
	}
	r.Status = StatusParked
	r.RedriveCap = max(r.ParkedCap, min(r.RedriveCap, r.RedriveCount))
	r.ParkedCap = 0
	return true
}

// ReturnExpiredParkedClaim returns the claim of an approved replay of a
// PARKED record whose lease expired (its run ended without recording the
// send) to PARKED: the round counts, since it may have been sent, and only
// another approved run replays the record. Left REDRIVING, it would wait
// for an approved run while holding back its FIFO group, alarmed by
// nothing.
func (r *Record) ReturnExpiredParkedClaim(actor string, now time.Time) (*Record, error) {
	if r.Status != StatusRedriving || r.ParkedCap == 0 || r.LeaseUntil == nil || now.Before(r.LeaseUntil.Time) {
		return nil, ErrNotClaimable
	}
	n := r.next(now, Attempt{Stage: StageRedrive, Reason: fmt.Sprintf(parkedExpiryReason+": %s; back to PARKED", r.RedriveCount, PossiblySent), Actor: actor})
	n.setStatus(StatusParked, now)
	n.LeaseUntil, n.LeaseReclaimed, n.ParkedCap = nil, false, 0
	return n, n.reseal(r)
}
