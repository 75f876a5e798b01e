package quarantine

import (
	"errors"
	"time"
)

// MetricMarks are what a source's "new" metrics (the integrity holds and
// the records parked as poison since the run before) were last published
// from: the source's hold counter, which only ever grows (HoldDeltas; a
// hold is never removed), and each recent hour's poison count. The
// metrics function publishes what a counter holds beyond its mark, then
// moves the mark: a hold or a poison is new once, however late the
// ledger counts it and however seldom the function runs, and a run that
// fails before the mark moves leaves it new for the next.
type MetricMarks struct {
	Held int64
	// Poisoned maps an hour (its start, UTC) to the records parked as
	// poison in it that have been published.
	Poisoned map[time.Time]int64
	// At is when the run that stored them read the counters (zero: none
	// stored).
	At time.Time
	// Rev names the stored revision, opaque to the caller ("": none
	// stored); a write is conditional on it.
	Rev string
}

var (
	// ErrMarksMoved says another run moved a source's marks since they
	// were read: what this run published as new, it published too.
	ErrMarksMoved = errors.New("the metrics marks moved since they were read")
	// ErrMarksMalformed says a source's stored marks do not read: the
	// metrics function publishes every hold and poison it reads as new (a
	// page too many, never one too few), fails its run so that its errors
	// alarm names the cause, and writes them over.
	ErrMarksMalformed = errors.New("the metrics marks are malformed")
	// ErrMarksAhead says a counter holds less than its published mark:
	// the hold counter and an hour's poison count only grow, so the
	// counters were written behind the ledger (dlqctl verify names the
	// drift) or the marks were moved ahead. The run publishes one new
	// hold or poison for it, lowers the mark and fails.
	ErrMarksAhead = errors.New("a counter holds less than its published mark")
)
