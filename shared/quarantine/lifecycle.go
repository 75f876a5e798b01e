package quarantine

import "time"

// ActorIngest is the actor recorded for arrivals.
const ActorIngest = "ingest"

// Arrive returns the successor of r after a genuine re-failure: the attempt
// is appended (keeping the newest maxAttempts, with the total in
// AttemptCount), first_seen and redrive_count are kept, last_seen moves, and
// a record that was redriven or resolved is quarantined again. The result is
// sealed and chained to r; r itself is not modified.
func (r *Record) Arrive(att Attempt, c Classification, maxAttempts int, now time.Time) (*Record, error) {
	next := r.Clone()
	next.Attempts = appendBounded(next.Attempts, att, maxAttempts)
	next.AttemptCount++
	next.LastSeen = now
	switch next.Status {
	case StatusRedriving, StatusRedriven, StatusResolved:
		next.Status = StatusQuarantined
		next.StatusSince = now
		next.LeaseUntil = nil
	}
	// A parked poison record stays poison, and an archived stub stays a stub:
	// the arrival is recorded in their history only.
	if next.Status == StatusQuarantined {
		next.FailureClass = c.Class
		next.FailureStage = c.Stage
		next.FailureReason = c.Reason
		next.FailureDetail = c.Detail
		next.FailureSignature = c.Signature
	}
	return next, next.reseal(r)
}

// reseal bumps the version, chains to prev and seals.
func (r *Record) reseal(prev *Record) error {
	r.Version = prev.Version + 1
	r.PrevSeal = prev.Seal
	return SealRecord(r)
}

func appendBounded(list []Attempt, a Attempt, max int) []Attempt {
	list = append(list, a)
	if max > 0 && len(list) > max {
		list = append([]Attempt(nil), list[len(list)-max:]...)
	}
	return list
}
