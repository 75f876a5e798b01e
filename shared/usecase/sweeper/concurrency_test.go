package sweeper_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// gatedArchiver holds the first `gate` archives until that many are
// inside at once (proving they run together), then lets every archive
// through after pause; it counts the most inside at once.
type gatedArchiver struct {
	gate  int
	pause time.Duration

	mu      sync.Mutex
	inside  int
	most    int
	entered int
	open    chan struct{}
}

func (a *gatedArchiver) PutArchive(ctx context.Context, _, _, key string, _ []byte, _ string, retain time.Time) (string, time.Time, error) {
	a.mu.Lock()
	a.inside++
	a.entered++
	a.most = max(a.most, a.inside)
	if a.entered == a.gate {
		close(a.open)
	}
	a.mu.Unlock()
	select {
	case <-a.open:
	case <-time.After(30 * time.Second):
		return "", time.Time{}, fmt.Errorf("%s: the first %d archives never ran together", key, a.gate)
	}
	time.Sleep(a.pause)
	a.mu.Lock()
	a.inside--
	a.mu.Unlock()
	return "v-" + key, retain, nil
}

// parked quarantines and parks n records, one a second, in mem.
func parked(t *testing.T, mem *memstore.Store, clk *clock.Fake, n int) []string {
	t.Helper()
	src := &quarantine.Source{Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", IdempotencyPointer: "/event_id", RedriveCap: 3}
	q := ingest.NewQuarantiner(mem, memstore.NewPayloads(), clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": src}})
	var ids []string
	for i := range n {
		out, err := q.Quarantine(context.Background(), ingest.Message{MessageID: fmt.Sprint("m", i), SourceARN: src.ARN, Body: []byte(inv(fmt.Sprintf("c%03d", i), ""))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Update(context.Background(), out.Record.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("test", clk.Now()) }); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		clk.Advance(time.Second)
	}
	clk.Advance(2 * time.Hour)
	return ids
}

// A run archives Concurrency records at once, never more, and reports
// them in the order it selected them (oldest first).
func TestArchivesRunTogetherAndReportInOrder(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	ids := parked(t, mem, clk, 3*sweeper.Concurrency+2)
	arch := &gatedArchiver{gate: sweeper.Concurrency, open: make(chan struct{})}
	svc := testSweeper(mem, mem, memstore.NewPayloads(), arch, clk, 0)
	rep, err := svc.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range rep.Archived {
		got = append(got, a.ID)
	}
	if !slices.Equal(got, ids) || rep.Stopped != "done" || rep.Remaining != 0 {
		t.Fatalf("archived %v (stopped %q, remaining %d), want %v", got, rep.Stopped, rep.Remaining, ids)
	}
	if arch.most != sweeper.Concurrency {
		t.Fatalf("%d archives at once, want %d", arch.most, sweeper.Concurrency)
	}
	for _, id := range ids {
		r, err := mem.Get(context.Background(), id)
		if err != nil || r.Status != quarantine.StatusArchived {
			t.Fatalf("%s: %v %v", id, r, err)
		}
	}
}

// Once less than the margin is left, no archive starts; every one that
// started has its stub written; the rest are left PARKED and counted as
// remaining.
func TestNoArchiveStartsPastTheMargin(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	const n = 3 * sweeper.Concurrency
	ids := parked(t, mem, clk, n)
	// Each archive takes 400 ms; the margin is reached 600 ms in: two
	// rounds of Concurrency start, the third does not.
	arch := &gatedArchiver{gate: sweeper.Concurrency, pause: 400 * time.Millisecond, open: make(chan struct{})}
	svc := testSweeper(mem, mem, memstore.NewPayloads(), arch, clk, time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(1600*time.Millisecond))
	defer cancel()
	rep, err := svc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "deadline" || rep.Remaining == 0 || len(rep.Archived)+rep.Remaining != n || len(rep.Archived) != arch.entered {
		t.Fatalf("archived %d, remaining %d, stopped %q; %d archives started", len(rep.Archived), rep.Remaining, rep.Stopped, arch.entered)
	}
	archived := map[string]bool{}
	for _, a := range rep.Archived {
		archived[a.ID] = true
	}
	for _, id := range ids {
		r, err := mem.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]quarantine.Status{true: quarantine.StatusArchived, false: quarantine.StatusParked}[archived[id]]; r.Status != want {
			t.Fatalf("%s: %s, want %s", id, r.Status, want)
		}
	}
}

// stallingStubs is a store whose stub writes (a record becoming ARCHIVED)
// wait for their context to end, as a write does that Lambda's deadline
// cuts short.
type stallingStubs struct{ *memstore.Store }

func (s stallingStubs) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status == quarantine.StatusArchived {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Replace(ctx, prev, r)
}

// A stub write cut short by the deadline fails its record (the next run
// finds its object and writes the stub), and the report says the run
// stopped at the deadline, not that it was done.
func TestStubsCutShortSayDeadline(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	ids := parked(t, mem, clk, 3)
	arch := &gatedArchiver{gate: 1, open: make(chan struct{})}
	svc := testSweeper(stallingStubs{mem}, mem, memstore.NewPayloads(), arch, clk, time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(1500*time.Millisecond))
	defer cancel()
	rep, err := svc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "deadline" || len(rep.Archived) != 0 || rep.Failed != len(ids) {
		t.Fatalf("report %+v, want the %d stubs failed at the deadline", rep, len(ids))
	}
}

// twiceListed lists every id twice, as two listings of an eventually
// consistent index may.
type twiceListed struct{ *memstore.Store }

func (l twiceListed) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	page, err := l.Store.List(ctx, q)
	page.IDs = append(page.IDs, page.IDs...)
	return page, err
}

// panicking panics on its first archive.
type panicking struct {
	gatedArchiver
	once sync.Once
}

func (p *panicking) PutArchive(ctx context.Context, bucket, kms, key string, raw []byte, sum string, retain time.Time) (string, time.Time, error) {
	first := false
	p.once.Do(func() { first = true })
	if first {
		panic("archiver bug")
	}
	return p.gatedArchiver.PutArchive(ctx, bucket, kms, key, raw, sum, retain)
}

// An id listed twice is archived once; an archive that panics fails its
// record, not the run.
func TestRepeatedIDsAndPanicsStayInTheirRecord(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	ids := parked(t, mem, clk, 5)
	arch := &panicking{gatedArchiver: gatedArchiver{gate: 1, open: make(chan struct{})}}
	svc := testSweeper(mem, twiceListed{mem}, memstore.NewPayloads(), arch, clk, 0)
	rep, err := svc.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range rep.Archived {
		seen[a.ID]++
	}
	if len(rep.Archived) != len(ids)-1 || rep.Failed != 1 || len(seen) != len(ids)-1 {
		t.Fatalf("archived %v, failed %d (%+v): want %d archived once each and the panic failed", seen, rep.Failed, rep.Failures, len(ids)-1)
	}
}

// An archive that waits for the envelope budget until the margin has come
// does not start: its record is remaining and the run stopped at the
// deadline, not a failure.
func TestAnArchiveWaitingForTheBudgetPastTheMarginIsRemaining(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	mem, payloads := memstore.New(), memstore.NewPayloads()
	src := &quarantine.Source{Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", IdempotencyPointer: "/event_id", RedriveCap: 3}
	q := ingest.NewQuarantiner(mem, payloads, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": src}})
	for i := range 3 {
		// 6 MiB: each envelope's estimate fills the budget alone.
		body := fmt.Sprintf(`{"event_id":"big-%d","pad":%q}`, i, strings.Repeat("x", 6<<20))
		out, err := q.Quarantine(context.Background(), ingest.Message{MessageID: fmt.Sprint("m", i), SourceARN: src.ARN, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Update(context.Background(), out.Record.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("test", clk.Now()) }); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	clk.Advance(2 * time.Hour)
	// Each archive takes 400 ms, one at a time; the margin comes 600 ms in:
	// the second starts, the third waits past it.
	arch := &gatedArchiver{gate: 1, pause: 400 * time.Millisecond, open: make(chan struct{})}
	svc := testSweeper(mem, mem, payloads, arch, clk, time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(1600*time.Millisecond))
	defer cancel()
	rep, err := svc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || rep.Stopped != "deadline" || rep.Remaining == 0 || len(rep.Archived)+rep.Remaining != 3 {
		t.Fatalf("archived %d, remaining %d, failed %d (%+v), stopped %q", len(rep.Archived), rep.Remaining, rep.Failed, rep.Failures, rep.Stopped)
	}
}

// testSweeper is the sweeper these tests run: parked and resolved records
// older than an hour archived to "archive" for a day, with margin (0: the
// default) kept before the deadline.
func testSweeper(store quarantine.Store, lister quarantine.Lister, payloads quarantine.PayloadStore, arch sweeper.Archiver, clk *clock.Fake, margin time.Duration) *sweeper.Service {
	return sweeper.New(store, lister, payloads, arch, nil, clk.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		sweeper.Config{Bucket: "archive", ParkAge: time.Hour, ResolvedAge: time.Hour, Retention: 24 * time.Hour, DeadlineMargin: margin})
}
