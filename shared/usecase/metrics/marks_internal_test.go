package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strconv"
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

func (s *memMarks) WriteMetricMarks(_ context.Context, _ string, prevRev string, m quarantine.MetricMarks) error {
	if s.fail != nil {
		return s.fail
	}
	if prevRev != s.m.Rev {
		return quarantine.ErrMarksMoved
	}
	s.writes++
	s.m = m
	s.m.Rev = strconv.Itoa(s.writes)
	return nil
}

func quietService(m MarkStore) *Service {
	return &Service{Marks: m, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// runMarks is one run's part of the marks at now: it reads them, takes
// held and poisoned as the counters it read (poisoned must cover the
// hours the run reads), sets what is new, and stores the marks if the
// report was published.
func (s *Service) runMarks(t *testing.T, now time.Time, held int64, poisoned map[time.Time]int64, published bool) *Report {
	t.Helper()
	rep := &Report{Source: "src"}
	if err := s.readMarks(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	rep.IntegrityHolds, rep.poisoned = held, map[time.Time]int64{}
	for _, h := range poisonHours(now, rep.prev.At) {
		rep.poisoned[h] = poisoned[h]
	}
	s.newMarks(context.Background(), now, rep)
	if published {
		if err := s.moveMarks(context.Background(), rep); err != nil {
			t.Fatal(err)
		}
	}
	return rep
}

// A hold or a poison is published as new exactly once, by the first run
// that reads it counted, however late the ledger counts it and however
// long after it the run comes (the gap of the minute and hour buckets the
// runs used to read); a run whose report is not published leaves it new
// for the next; a counter below its mark (counters written behind the
// ledger, marks moved ahead) is one new hold or poison and an error, and
// the mark comes down to it.
func TestNewHoldsAndPoisonArePublishedOnceBeyondTheMarks(t *testing.T) {
	store := &memMarks{}
	s := quietService(store)
	h10 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	h9, h8 := h10.Add(-time.Hour), h10.Add(-2*time.Hour)
	at := h10.Add(5 * time.Minute)
	hours := func(n10, n9, n8 int64) map[time.Time]int64 {
		return map[time.Time]int64{h10: n10, h9: n9, h8: n8}
	}
	type want struct {
		holds, poison int64
		ahead         bool
	}
	for i, c := range []struct {
		name      string
		held      int64
		poisoned  map[time.Time]int64
		published bool
		want      want
	}{
		// No marks yet (a new stack, or the first run after the upgrade):
		// every hold held and the poison of the hours read are new.
		{"first run", 2, hours(1, 0, 1), true, want{2, 2, false}},
		{"nothing since", 2, hours(1, 0, 1), true, want{0, 0, false}},
		// A hold set between two runs of a slower schedule, or counted
		// late: the counter grew, whenever the hold was dated.
		{"a hold counted late", 3, hours(1, 0, 1), true, want{1, 0, false}},
		// The report is not published (CloudWatch refused it): the marks
		// stay, and the next run publishes the same as new.
		{"a hold, not published", 4, hours(1, 0, 1), false, want{1, 0, false}},
		{"the same hold, published", 4, hours(1, 0, 1), true, want{1, 0, false}},
		// A poison parked in an hour that has ended by the time it is
		// counted (the last minute of hour 9, counted at 10:00).
		{"a poison in the hour before", 4, hours(1, 1, 1), true, want{0, 1, false}},
		// Counters below the marks: one new of each, an error, and the
		// marks come down, so that the next holds count from there.
		{"counters below the marks", 3, hours(0, 1, 1), true, want{1, 1, true}},
		{"back from there", 4, hours(1, 1, 1), true, want{1, 1, false}},
		{"two more of each", 6, hours(2, 2, 1), true, want{2, 2, false}},
	} {
		at = at.Add(time.Minute)
		rep := s.runMarks(t, at, c.held, c.poisoned, c.published)
		if got := (want{rep.NewIntegrityHolds, rep.NewPoison, errors.Is(rep.marksErr, quarantine.ErrMarksAhead)}); got != c.want {
			t.Errorf("%d %s: new holds, poison, ahead %v, want %v (marks %+v)", i, c.name, got, c.want, store.m)
		}
	}
	if store.m.Held != 6 || !maps.Equal(store.m.Poisoned, hours(2, 2, 1)) {
		t.Errorf("marks %+v", store.m)
	}
	// A run that finds nothing new in the hour of the marks does not
	// write; the first in a new hour does (the marks' time bounds how far
	// back the next runs read).
	writes := store.writes
	s.runMarks(t, at.Add(time.Minute), 6, hours(2, 2, 1), true)
	if store.writes != writes {
		t.Errorf("%d writes for a run with nothing new", store.writes-writes)
	}
	h11 := h10.Add(time.Hour)
	rep := s.runMarks(t, h11.Add(time.Minute), 6, map[time.Time]int64{h11: 1, h10: 2, h9: 2, h8: 1}, true)
	if rep.NewPoison != 1 || store.writes != writes+1 || !store.m.At.Equal(h11.Add(time.Minute)) {
		t.Errorf("the first run of hour 11: new poison %d, %d writes, marks %+v", rep.NewPoison, store.writes-writes, store.m)
	}
	// That run read back to hour 8 (two before the marks' hour 10); the
	// next reads back to hour 9 only, and its marks leave hour 8 out.
	if len(store.m.Poisoned) != poisonWindow+1 {
		t.Errorf("the first run of hour 11 marked %+v, want hours 8 to 11", store.m.Poisoned)
	}
	seen := map[time.Time]int64{h11: 1, h10: 2, h9: 2}
	s.runMarks(t, h11.Add(2*time.Minute), 7, seen, true)
	if _, ok := store.m.Poisoned[h8]; ok || len(store.m.Poisoned) != poisonWindow {
		t.Errorf("hour 8 left the window, still marked: %+v", store.m)
	}
	// Nothing new in hour 12: its first run still stores the marks (their
	// time), the next does not.
	writes = store.writes
	for i, want := range []int{1, 0} {
		if rep := s.runMarks(t, h11.Add(time.Hour+time.Duration(i+1)*time.Minute), 7, seen, true); rep.NewIntegrityHolds+rep.NewPoison != 0 {
			t.Errorf("hour 12, run %d: new %+v", i, rep)
		}
		if store.writes-writes != want {
			t.Errorf("hour 12, run %d: %d writes, want %d", i, store.writes-writes, want)
		}
		writes = store.writes
	}
}

// After hours in which no run stored marks (the source failed, the
// schedule stopped), the next run reads back to poisonWindow-1 hours
// before the last marks, so that a poison counted meanwhile in an hour
// the runs no longer read by default is still new; never further back than
// maxPoisonHours.
func TestPoisonHoursReachBackToTheMarks(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 10, 0, 0, time.UTC)
	for _, c := range []struct {
		marked time.Time
		want   int
	}{
		{time.Time{}, poisonWindow},
		{now, poisonWindow},
		{now.Add(-time.Hour), poisonWindow + 1},
		{now.Add(-5 * time.Hour), poisonWindow + 5},
		{now.Add(72 * time.Hour), poisonWindow}, // marks dated ahead read no less
		{now.Add(-72 * time.Hour), maxPoisonHours},
	} {
		hs := poisonHours(now, c.marked)
		if len(hs) != c.want || !hs[0].Equal(now.Truncate(time.Hour)) {
			t.Errorf("marked %s: %d hours from %v, want %d from this hour", c.marked, len(hs), hs[0], c.want)
		}
	}
	store := &memMarks{}
	s := quietService(store)
	h10 := time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC).Truncate(time.Hour)
	s.runMarks(t, h10.Add(30*time.Minute), 0, nil, true)
	// Five hours without a stored run; a poison of hour 9 counted late.
	rep := s.runMarks(t, h10.Add(5*time.Hour+10*time.Minute), 0, map[time.Time]int64{h10.Add(-time.Hour): 1}, true)
	if rep.NewPoison != 1 {
		t.Errorf("a poison of hour 9 after five hours without a run: %d new", rep.NewPoison)
	}
}

// Two runs at once each publish what is new; the second's marks are
// refused and logged, nothing is missed. A store that refuses the marks
// fails the run (Run counts it), and the next run publishes the same
// again.
func TestMarksRefusedOrMovedRepublish(t *testing.T) {
	store := &memMarks{}
	s := quietService(store)
	now := time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC)
	a, b := &Report{Source: "src"}, &Report{Source: "src"}
	for _, r := range []*Report{a, b} {
		if err := s.readMarks(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		r.IntegrityHolds = 7
		s.newMarks(context.Background(), now, r)
	}
	if err := s.moveMarks(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := s.moveMarks(context.Background(), b); err != nil {
		t.Fatalf("the second run's marks: %v, want it logged", err)
	}
	if a.NewIntegrityHolds != 7 || b.NewIntegrityHolds != 7 || store.m.Held != 7 {
		t.Errorf("concurrent runs: %d and %d new, marks %+v", a.NewIntegrityHolds, b.NewIntegrityHolds, store.m)
	}
	store.fail = errors.New("AccessDenied")
	rep := &Report{Source: "src"}
	if err := s.readMarks(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	rep.IntegrityHolds = 8
	s.newMarks(context.Background(), now, rep)
	if err := s.moveMarks(context.Background(), rep); err == nil || rep.NewIntegrityHolds != 1 {
		t.Errorf("a refused write: %v, %d new", err, rep.NewIntegrityHolds)
	}
	if r := s.runMarks(t, now, 8, nil, false); r.NewIntegrityHolds != 1 {
		t.Errorf("after a refused write: %d new, want the same 1 again", r.NewIntegrityHolds)
	}
	if err := (&Service{}).readMarks(context.Background(), &Report{}); err == nil {
		t.Error("no mark store: no error")
	}
}

// Marks that do not read are not zero marks silently, nor a source left
// unpublished: every hold and poison read is new, the marks are written
// over the stored revision (also with nothing held), and the run is told
// (Run fails it after the publish).
func TestMalformedMarksPublishEverythingAndFail(t *testing.T) {
	for _, held := range []int64{5, 0} {
		store := &malformedMarks{memMarks: memMarks{m: quarantine.MetricMarks{Held: 5, Rev: "S:x"}}}
		s := quietService(store)
		rep := s.runMarks(t, time.Now(), held, nil, true)
		if rep.NewIntegrityHolds != held || !errors.Is(rep.marksErr, quarantine.ErrMarksMalformed) {
			t.Errorf("held %d: new holds %d, error %v", held, rep.NewIntegrityHolds, rep.marksErr)
		}
		if store.writes != 1 || store.m.Held != held {
			t.Errorf("held %d: marks not written over: %d writes, %+v", held, store.writes, store.m)
		}
	}
}

type malformedMarks struct{ memMarks }

func (s *malformedMarks) ReadMetricMarks(context.Context, string) (quarantine.MetricMarks, error) {
	if s.writes > 0 {
		return s.memMarks.m, nil
	}
	return quarantine.MetricMarks{Rev: s.m.Rev}, quarantine.ErrMarksMalformed
}

// A counter below 0 (written behind the ledger) is a count like another:
// the mark follows it down once (one new hold, an error), and the next
// real hold from there is new, once.
func TestMarksFollowACounterBelowZero(t *testing.T) {
	store := &memMarks{}
	s := quietService(store)
	now := time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC)
	for i, c := range []struct {
		held, want int64
		ahead      bool
	}{{0, 0, false}, {-5, 1, true}, {-5, 0, false}, {-4, 1, false}, {-4, 0, false}} {
		now = now.Add(time.Minute)
		rep := s.runMarks(t, now, c.held, nil, true)
		if rep.NewIntegrityHolds != c.want || errors.Is(rep.marksErr, quarantine.ErrMarksAhead) != c.ahead {
			t.Errorf("run %d, held %d: %d new, error %v; want %d new, ahead %v", i, c.held, rep.NewIntegrityHolds, rep.marksErr, c.want, c.ahead)
		}
	}
}

// A write refused at the very revision read (a condition that can never
// hold) is an error, not "moved by another run": logged as that, it would
// pin the alarm on the same holds with no one told.
func TestMarksRefusedAtTheRevisionReadFail(t *testing.T) {
	store := &neverMarks{memMarks{m: quarantine.MetricMarks{Rev: "N:3", At: time.Now()}}}
	s := quietService(store)
	rep := &Report{Source: "src"}
	if err := s.readMarks(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	rep.IntegrityHolds = 1
	s.newMarks(context.Background(), time.Now(), rep)
	if err := s.moveMarks(context.Background(), rep); !errors.Is(err, quarantine.ErrMarksMoved) {
		t.Errorf("refused at the revision read: %v, want an error", err)
	}
}

// neverMarks refuses every write as moved, and never moves.
type neverMarks struct{ memMarks }

func (*neverMarks) WriteMetricMarks(context.Context, string, string, quarantine.MetricMarks) error {
	return quarantine.ErrMarksMoved
}

// A shared DLQ that no source of it could read this run publishes no
// depth (a 0 would hide DLQDepthAlarm's condition).
func TestAnUnreadSharedDLQPublishesNoDepth(t *testing.T) {
	s := &Service{depths: map[string][2]int64{}} // no CloudWatch: a publish would panic
	if err := s.publishDepth(context.Background(), "shared-dlq"); err != nil {
		t.Fatal(err)
	}
}
