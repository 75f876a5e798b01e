package quarantine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// CheckArrival reports whether next is a version that prev.Arrive (the only
// transition ingest makes on an existing record) could produce: next's
// newest attempt is an arrival appended to prev's history (kept within its
// bound), AttemptCount grew by one, LastSeen is the arrival's, a REDRIVING, REDRIVEN or
// RESOLVED record is QUARANTINED again (status_since the arrival's
// last_seen, its lease cleared) and any other status is kept, and the
// failure fields changed only on a record that is QUARANTINED after it.
// Every other field must be prev's. The seal and chain (Version, PrevSeal,
// WriteID, Seal) are left to CheckTransition. The arrival's note ends
// with the round that was open exactly when prev was REDRIVING. It lets a verifier refuse a
// version that the ingest key proves but that ingest's code never writes
// (a PARKED record moved back to QUARANTINED, say).
func CheckArrival(prev, next *Record) error {
	if prev == nil || next == nil {
		return errors.New("an arrival needs the version before it")
	}
	k := len(next.Attempts)
	if k == 0 || !next.Attempts[k-1].IsArrival() {
		return errors.New("its newest attempt is not an arrival")
	}
	if prev.Status == StatusArchived {
		return errors.New("an archived record takes no arrival")
	}
	// Arrive ends the note with the open round exactly when it finds the
	// record REDRIVING, and names that round: never otherwise.
	round, open := next.Attempts[k-1].openRound()
	switch {
	case prev.Status == StatusRedriving && (!open || round != prev.RedriveCount):
		return fmt.Errorf("an arrival on a REDRIVING record (round %d) whose note does not say the round may have been sent more than once", prev.RedriveCount)
	case prev.Status != StatusRedriving && open:
		return fmt.Errorf("an arrival on a %s record whose note says round %d had no outcome", prev.Status, round)
	}
	// The history's bound is ingest's configuration (MAX_ATTEMPTS), which
	// no version records: an arrival may keep fewer entries than prev's
	// history when that bound is below it, so the length is not checked
	// here (the versions before stay in the ledger with the full history).
	// last_seen is the ingesting instance's clock (Arrive: At(now)), which
	// may be a little behind another instance's: it is taken as next says.
	want := prev.Clone()
	want.Attempts = appendBounded(prev.Attempts, next.Attempts[k-1], k)
	want.AttemptCount = prev.AttemptCount + 1
	want.LastSeen = next.LastSeen
	switch want.Status {
	case StatusRedriving, StatusRedriven, StatusResolved:
		want.Status = StatusQuarantined
		want.StatusSince = next.LastSeen
		want.LeaseUntil, want.LeaseReclaimed, want.ParkedCap = nil, false, 0
	}
	if want.Status == StatusQuarantined {
		want.FailureClass = next.FailureClass
		want.FailureStage = next.FailureStage
		want.FailureReason = next.FailureReason
		want.FailureDetail = next.FailureDetail
		want.FailureSignature = next.FailureSignature
	}
	want.Version, want.PrevSeal, want.WriteID, want.Seal = next.Version, next.PrevSeal, next.WriteID, next.Seal
	a, err := json.Marshal(want)
	if err != nil {
		return fmt.Errorf("marshal record: %w", err)
	}
	b, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("marshal record: %w", err)
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("it is no arrival on version %d (status %s to %s, attempt count %d to %d): an arrival changes only its history, counts, last_seen, failure and the status moves an arrival makes",
			prev.Version, prev.Status, next.Status, prev.AttemptCount, next.AttemptCount)
	}
	return nil
}
