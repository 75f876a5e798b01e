package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// memMarks keeps marks as dynamostore does: a revision, written only over
// the revision read.
type memMarks struct {
	m      quarantine.MetricMarks
	writes int
	fail   error
}

func (s *memMarks) ReadMetricMarks(context.Context, string) (quarantine.MetricMarks, error) {
	m := s.m
	m.Poisoned = maps.Clone(s.m.Poisoned)
	return m, nil
}

func (s *memMarks) WriteMetricMarks(_ context.Context, _ string, prevRev int64, m quarantine.MetricMarks, _ time.Time) error {
	if s.fail != nil {
		return s.fail
	}
	if prevRev != s.m.Rev {
		return quarantine.ErrMarksMoved
	}
	s.writes++
	s.m = m
	s.m.Rev = prevRev + 1
	return nil
}

// runMarks measures the marks of one report: the held count and the poison by
// hour that the counters read, then what is new; published is whether the
// report was published (the marks move only then).
func (s *Service) runMarks(t *testing.T, held int64, poisoned map[time.Time]int64, published bool) *Report {
	t.Helper()
	rep := &Report{Source: "src", IntegrityHolds: held, poisoned: poisoned}
	if err := s.newMarks(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	if published {
		s.moveMarks(context.Background(), rep)
	}
	return rep
}

// A hold or a poison is published as new exactly once, by the first run
// that reads it counted, however late the ledger counts it and however
// long after it the run comes (the gap of the minute and hour buckets the
// runs used to read); a run whose report is not published leaves it new
// for the next; a count read below its mark (an eventually consistent
// read of a replica behind) publishes nothing and never moves the mark
// back.
func TestNewHoldsAndPoisonArePublishedOnceBeyondTheMarks(t *testing.T) {
	store := &memMarks{}
	s := &Service{Marks: store, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h10 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	h9, h8 := h10.Add(-time.Hour), h10.Add(-2*time.Hour)
	hours := func(n ...int64) map[time.Time]int64 {
		return map[time.Time]int64{h10: n[0], h9: n[1], h8: n[2]}
	}
	type want struct{ holds, poison int64 }
	for i, c := range []struct {
		name      string
		held      int64
		poisoned  map[time.Time]int64
		published bool
		want      want
	}{
		// No marks yet (a new stack, or the first run after the upgrade):
		// every hold held and the poison of the hours read are new.
		{"first run", 2, hours(1, 0, 1), true, want{2, 2}},
		{"nothing since", 2, hours(1, 0, 1), true, want{0, 0}},
		// A hold set between two runs of a slower schedule, or counted
		// late: the counter grew, whenever the hold was dated.
		{"a hold counted late", 3, hours(1, 0, 1), true, want{1, 0}},
		// The report is not published (CloudWatch refused it): the marks
		// stay, and the next run publishes the same as new.
		{"a hold, not published", 4, hours(1, 0, 1), false, want{1, 0}},
		{"the same hold, published", 4, hours(1, 0, 1), true, want{1, 0}},
		// A poison parked in an hour that has ended by the time it is
		// counted (the last minute of hour 9, counted at 10:00).
		{"a poison in the hour before", 4, hours(1, 1, 1), true, want{0, 1}},
		// Reads behind the marks: nothing new, and the marks stay.
		{"a read behind", 3, hours(0, 0, 1), true, want{0, 0}},
		{"caught up", 4, hours(1, 1, 1), true, want{0, 0}},
		{"two more of each", 6, hours(2, 2, 1), true, want{2, 2}},
	} {
		rep := s.runMarks(t, c.held, c.poisoned, c.published)
		if got := (want{rep.NewIntegrityHolds, rep.NewPoison}); got != c.want {
			t.Errorf("%d %s: new holds, poison %v, want %v (marks %+v)", i, c.name, got, c.want, store.m)
		}
	}
	if store.m.Held != 6 || !maps.Equal(store.m.Poisoned, hours(2, 2, 1)) {
		t.Errorf("marks %+v", store.m)
	}
	// A run that finds nothing new does not write.
	writes := store.writes
	s.runMarks(t, 6, hours(2, 2, 1), true)
	if store.writes != writes {
		t.Errorf("%d writes for a run with nothing new", store.writes-writes)
	}
	// An hour that leaves the window leaves the marks; the new hour's
	// first poison is new.
	rep := s.runMarks(t, 6, map[time.Time]int64{h10.Add(time.Hour): 1, h10: 2, h9: 2}, true)
	if rep.NewPoison != 1 || store.m.Poisoned[h8] != 0 || len(store.m.Poisoned) != 3 {
		t.Errorf("new poison %d, marks %+v", rep.NewPoison, store.m)
	}

	// Two runs at once: each publishes what is new; the second's marks
	// are refused (logged), and nothing is missed.
	a := &Report{Source: "src", IntegrityHolds: 7, poisoned: map[time.Time]int64{}}
	b := &Report{Source: "src", IntegrityHolds: 7, poisoned: map[time.Time]int64{}}
	for _, r := range []*Report{a, b} {
		if err := s.newMarks(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.moveMarks(context.Background(), a)
	s.moveMarks(context.Background(), b)
	if a.NewIntegrityHolds != 1 || b.NewIntegrityHolds != 1 || store.m.Held != 7 {
		t.Errorf("concurrent runs: %d and %d new, marks %+v", a.NewIntegrityHolds, b.NewIntegrityHolds, store.m)
	}
	// A mark store that fails: the run still publishes, and the next
	// publishes the same again.
	store.fail = errors.New("throttled")
	if r1, r2 := s.runMarks(t, 8, nil, true), s.runMarks(t, 8, nil, true); r1.NewIntegrityHolds != 1 || r2.NewIntegrityHolds != 1 {
		t.Errorf("with the marks unwritable: %d then %d new, want 1 and 1", r1.NewIntegrityHolds, r2.NewIntegrityHolds)
	}
	// No mark store: the run fails rather than publish no new holds.
	if err := (&Service{}).newMarks(context.Background(), &Report{}); err == nil {
		t.Error("no mark store: no error")
	}
}

// Marks that do not read are not zero marks silently, nor a source left
// unpublished: every hold and poison read is new, the marks are written
// over the stored revision, and the run is told (Run fails it after the
// publish).
func TestMalformedMarksPublishEverythingAndFail(t *testing.T) {
	store := &malformedMarks{memMarks: memMarks{m: quarantine.MetricMarks{Held: 5, Rev: 4}}}
	s := &Service{Marks: store, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rep := s.runMarks(t, 5, nil, true)
	if rep.NewIntegrityHolds != 5 || !errors.Is(rep.marksErr, quarantine.ErrMarksMalformed) {
		t.Errorf("new holds %d, error %v", rep.NewIntegrityHolds, rep.marksErr)
	}
	if store.writes != 1 || store.m.Rev != 5 || store.m.Held != 5 {
		t.Errorf("marks not written over: %d writes, %+v", store.writes, store.m)
	}
}

type malformedMarks struct{ memMarks }

func (s *malformedMarks) ReadMetricMarks(context.Context, string) (quarantine.MetricMarks, error) {
	if s.writes > 0 {
		return s.memMarks.m, nil
	}
	return quarantine.MetricMarks{Rev: s.m.Rev}, quarantine.ErrMarksMalformed
}
