package redrive_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// Runs that finish: whatever the function's timeout, an invocation
// replays what it claims, says what it left, and settling never takes the
// replay's time. Most of these run on a virtual clock (SetTimeLeft): every
// store write and send costs a fixed virtual time, so the run's time
// decisions are the same on any machine.

// virtualTime is an invocation's time left, spent by the calls it makes.
type virtualTime struct {
	mu   sync.Mutex
	left time.Duration
}

func (v *virtualTime) spend(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.left -= d
}

func (v *virtualTime) timeLeft(time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.left
}

// costlyStore spends virtual time on every record write and batch read,
// and counts the ids batch reads ask for.
type costlyStore struct {
	quarantine.Store
	v                *virtualTime
	replace, getMany time.Duration
	mu               sync.Mutex
	read             map[string]int
}

func (s *costlyStore) Replace(ctx context.Context, prev, next *quarantine.Record) error {
	s.v.spend(s.replace)
	return s.Store.Replace(ctx, prev, next)
}

func (s *costlyStore) GetMany(ctx context.Context, ids []string) (map[string]*quarantine.Record, error) {
	s.v.spend(s.getMany)
	s.mu.Lock()
	if s.read == nil {
		s.read = map[string]int{}
	}
	for _, id := range ids {
		s.read[id]++
	}
	s.mu.Unlock()
	return s.Store.GetMany(ctx, ids)
}

// costlySender spends virtual time on every SendMessageBatch.
type costlySender struct {
	redrive.Sender
	v    *virtualTime
	send time.Duration
}

func (s *costlySender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.v.spend(s.send)
	return s.Sender.SendMessageBatch(ctx, in, opts...)
}

// virtualRun runs req on e's service with the invocation's time on v: the
// context carries a deadline (its wall-clock value is not read).
func virtualRun(t *testing.T, svc *redrive.Service, v *virtualTime, req redrive.Request) *redrive.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	rep, err := redrive.SetTimeLeft(svc, v.timeLeft).Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// statuses counts the records of ids by status.
func (e *env) statuses(t *testing.T, ids []string) map[quarantine.Status]int {
	t.Helper()
	out := map[quarantine.Status]int{}
	for _, id := range ids {
		out[e.get(t, id).Status]++
	}
	return out
}

// A function with the template's shortest timeout (30 s) replays: its
// reserves (the margin kept for outcomes, a send's timeout) are sized to
// the invocation, not the 900 s default's 20 s + 10 s, which left a 30 s
// invocation no time to send anything it claimed.
func TestAThirtySecondInvocationReplays(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(100))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redriven.Count != 20 || rep.Deferred.Count != 0 || rep.Remaining != 0 || rep.Stopped != redrive.StoppedDone {
		t.Fatalf("30 s invocation: redriven %d deferred %d remaining %d stopped %s", rep.Redriven.Count, rep.Deferred.Count, rep.Remaining, rep.Stopped)
	}
	if got := e.statuses(t, ids); got[quarantine.StatusRedriven] != 20 {
		t.Fatalf("statuses %v", got)
	}
}

// Claims stop while what was claimed can still be sent: every record a run
// claims it sends, and the rest is counted as remaining, untouched (no
// claim given back: each give-back is a new version in the history and the
// ledger).
func TestClaimsStopWhereTheirSendsStillFit(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 60)
	v := &virtualTime{left: 30 * time.Second}
	// A batch of 10 costs 3 s to read and 0.1 s per call: a 30 s
	// invocation (5 s margin, 5 s send timeout) claims four of them.
	store := &costlyStore{Store: e.store, v: v, getMany: 3 * time.Second}
	sender := &costlySender{Sender: stack.Clients.SQS, v: v, send: 100 * time.Millisecond}
	req := e.request(100)
	req.BatchSize = 10
	rep := virtualRun(t, e.service(sender, store, redrive.Config{}), v, req)
	got := e.statuses(t, ids)
	if rep.Redriven.Count == 0 || rep.Redriven.Count == 60 || got[quarantine.StatusRedriven] != rep.Redriven.Count {
		t.Fatalf("redriven %d (statuses %v): the run should stop partway", rep.Redriven.Count, got)
	}
	if rep.Deferred.Count != 0 || got[quarantine.StatusRedriving] != 0 || rep.Stopped != redrive.StoppedDeadline {
		t.Fatalf("claimed but not sent: deferred %d, REDRIVING %d, stopped %s", rep.Deferred.Count, got[quarantine.StatusRedriving], rep.Stopped)
	}
	if rep.Remaining != 60-rep.Redriven.Count || got[quarantine.StatusQuarantined] != rep.Remaining {
		t.Fatalf("remaining %d, QUARANTINED %d, redriven %d", rep.Remaining, got[quarantine.StatusQuarantined], rep.Redriven.Count)
	}
	for _, id := range ids {
		if r := e.get(t, id); r.Status == quarantine.StatusQuarantined && r.Version != 1 {
			t.Fatalf("%s: version %d, a claim given back", id, r.Version)
		}
	}
	// The next invocation takes up the rest.
	v2 := &virtualTime{left: 15 * time.Minute}
	rep = virtualRun(t, e.service(nil, nil, redrive.Config{}), v2, req)
	if rep.Redriven.Count != 60-got[quarantine.StatusRedriven] || rep.Remaining != 0 {
		t.Fatalf("second invocation: redriven %d remaining %d", rep.Redriven.Count, rep.Remaining)
	}
}

// An invocation with too little time for one batch and its sends claims
// nothing, and says so: stopped at the deadline, everything remaining.
func TestNoClaimWithoutTimeToSend(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 3)
	v := &virtualTime{left: 2 * time.Second} // a 1 s margin and a 1 s send timeout leave no batch
	rep := virtualRun(t, e.service(nil, nil, redrive.Config{}), v, e.request(10))
	if rep.Redriven.Count != 0 || rep.Deferred.Count != 0 || rep.Remaining != 3 || rep.Stopped != redrive.StoppedDeadline {
		t.Fatalf("report: redriven %d deferred %d remaining %d stopped %s", rep.Redriven.Count, rep.Deferred.Count, rep.Remaining, rep.Stopped)
	}
	for _, id := range ids {
		if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.Version != 1 {
			t.Fatalf("%s: %s version %d", id, r.Status, r.Version)
		}
	}
}

// When the claims take longer than every batch before (here the first
// batch's claims take most of the time left), the claims left unsent are
// given back and counted as remaining: a report never says "remaining 0"
// while records of the request are still QUARANTINED.
func TestRemainingCountsWhatASlowBatchGaveBack(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 20)
	v := &virtualTime{left: 30 * time.Second}
	store := &costlyStore{Store: e.store, v: v, replace: 1100 * time.Millisecond}
	rep := virtualRun(t, e.service(nil, store, redrive.Config{}), v, e.request(100))
	got := e.statuses(t, ids)
	if rep.Redriven.Count != 0 || rep.Deferred.Count != 20 || got[quarantine.StatusQuarantined] != 20 {
		t.Fatalf("redriven %d deferred %d (statuses %v)", rep.Redriven.Count, rep.Deferred.Count, got)
	}
	if rep.Remaining != 20 || rep.Stopped != redrive.StoppedDeadline {
		t.Fatalf("remaining %d stopped %s; 20 records are still QUARANTINED", rep.Remaining, rep.Stopped)
	}
	for _, id := range ids {
		if r := e.get(t, id); r.RedriveCount != 0 {
			t.Fatalf("%s: count %d after its claim was given back unsent", id, r.RedriveCount)
		}
	}
}

// redrivenInTwoWaves replays n records now and n more after gap, and
// returns the ids of each wave.
func redrivenInTwoWaves(t *testing.T, e *env, n int, gap time.Duration) (first, second []string) {
	t.Helper()
	ids := e.seed(t, 2*n, none)
	svc := e.service(nil, nil, redrive.Config{})
	for wave := range 2 {
		if wave == 1 {
			e.clock.Advance(gap)
		}
		rep, err := svc.Run(context.Background(), e.request(n))
		if err != nil || rep.Redriven.Count != n {
			t.Fatalf("wave %d: %+v %v", wave, rep, err)
		}
	}
	for _, id := range ids {
		if r := e.get(t, id); r.StatusSince.Time.Equal(e.clock.Now()) {
			second = append(second, id)
		} else {
			first = append(first, id)
		}
	}
	if len(first) != n || len(second) != n {
		t.Fatalf("waves of %d and %d", len(first), len(second))
	}
	return first, second
}

// Settling reads only the records that can be due: a record REDRIVEN for
// less than the settle window is not read at all (the listing's
// status_since leaves it out), the due ones in batch reads.
func TestSettleReadsOnlyWhatCanBeDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	due, recent := redrivenInTwoWaves(t, e, 10, 10*time.Minute)
	e.clock.Advance(6 * time.Minute) // the first wave 16 min ago, the second 6
	store := &costlyStore{Store: e.store, v: &virtualTime{}}
	rep := settleRun(t, e, e.service(nil, store, redrive.Config{SettleWindow: 15 * time.Minute}))
	if rep.Settled.Count != 10 {
		t.Fatalf("settled %d, want the 10 due", rep.Settled.Count)
	}
	for _, id := range due {
		if store.read[id] != 1 {
			t.Fatalf("a due record read %d times", store.read[id])
		}
	}
	for _, id := range recent {
		if store.read[id] != 0 || e.get(t, id).Status != quarantine.StatusRedriven {
			t.Fatalf("a record redriven 6 min ago was read (%d) or settled", store.read[id])
		}
	}
}

// A run that also replays settles for at most a third of its time: a
// backlog of due records never takes the time its replay needs (here the
// settle's writes alone would take 45 of the invocation's 60 s).
func TestSettleNeverStarvesTheReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ids := e.seed(t, 180, none)
	if rep, err := e.service(nil, nil, redrive.Config{}).Run(context.Background(), e.request(150)); err != nil || rep.Redriven.Count != 150 {
		t.Fatalf("replaying the backlog: %+v %v", rep, err)
	}
	var fresh []string
	for _, id := range ids {
		if e.get(t, id).Status == quarantine.StatusQuarantined {
			fresh = append(fresh, id)
		}
	}
	e.clock.Advance(16 * time.Minute)
	v := &virtualTime{left: 60 * time.Second}
	store := &costlyStore{Store: e.store, v: v, replace: 300 * time.Millisecond}
	rep := virtualRun(t, e.service(nil, store, redrive.Config{SettleWindow: 15 * time.Minute}), v, e.request(100))
	if rep.Settled.Count == 0 || rep.Settled.Count >= 150 {
		t.Fatalf("settled %d: the settle should have run, and stopped at its share", rep.Settled.Count)
	}
	if rep.Redriven.Count == 0 {
		t.Fatalf("nothing replayed: settled %d, remaining %d, stopped %s", rep.Settled.Count, rep.Remaining, rep.Stopped)
	}
	if got := e.statuses(t, fresh); got[quarantine.StatusRedriven] != rep.Redriven.Count {
		t.Fatalf("statuses of the fresh records %v, redriven %d", got, rep.Redriven.Count)
	}
}

// claimCheckingSender checks, as each SendMessageBatch leaves, that every
// entry's record holds its claim for the round the message carries: with
// batches pipelined (the next claimed while this one is sent), a message
// is still never sent before its record's claim.
type claimCheckingSender struct {
	redrive.Sender
	store quarantine.Store
	mu    sync.Mutex
	bad   []string
	sent  int
}

func (s *claimCheckingSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		id := aws.ToString(e.MessageAttributes[quarantine.AttrRecordID].StringValue)
		round := aws.ToString(e.MessageAttributes[quarantine.AttrRedriveCount].StringValue)
		r, err := s.store.Get(ctx, id)
		s.mu.Lock()
		s.sent++
		if err != nil || r.Status != quarantine.StatusRedriving || strconv.Itoa(r.RedriveCount) != round {
			s.bad = append(s.bad, fmt.Sprintf("%s round %s sent while the record is %v (%v)", id, round, r, err))
		}
		s.mu.Unlock()
	}
	return s.Sender.SendMessageBatch(ctx, in, opts...)
}

// A standard queue's batches are pipelined: every message still leaves
// after its record's claim, each record is sent once and marked.
func TestPipelinedBatchesSendOnlyClaimedRecords(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 120)
	sender := &claimCheckingSender{Sender: stack.Clients.SQS, store: e.store}
	req := e.request(200)
	req.BatchSize = 20
	rep, err := e.service(sender, nil, redrive.Config{}).Run(context.Background(), req)
	if err != nil || rep.Redriven.Count != 120 || rep.Remaining != 0 {
		t.Fatalf("run: %v, redriven %d remaining %d", err, rep.Redriven.Count, rep.Remaining)
	}
	if len(sender.bad) > 0 || sender.sent != 120 {
		t.Fatalf("%d sent; sent before a claim: %v", sender.sent, sender.bad)
	}
	if got := e.statuses(t, ids); got[quarantine.StatusRedriven] != 120 {
		t.Fatalf("statuses %v", got)
	}
	if got := e.drain(t, none); len(got) != 120 {
		t.Fatalf("%d messages in the queue for 120 records", len(got))
	}
}
