package redrive_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// seedGroup quarantines bodies, in order, as one FIFO message group "G".
func (e *env) seedGroup(t *testing.T, bodies []string) []string {
	t.Helper()
	var ids []string
	for i, b := range bodies {
		m := ingest.Message{MessageID: "g-" + string(rune('a'+i)), Body: []byte(b), SourceARN: e.src.ARN, ReceiveCount: 2, MessageGroupID: "G"}
		out, err := e.q.Quarantine(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(time.Second + redrive.IndexSettleGuard)
	return ids
}

// fifoGroup is a FIFO source whose message group G holds bodies, in order.
func fifoGroup(t *testing.T, bodies ...string) (*env, []string) {
	t.Helper()
	e := newEnv(t, true)
	return e, e.seedGroup(t, bodies)
}

// A FIFO group replays only from its earliest open record on. Whatever
// keeps that record from leaving in this run — the gate holds it, the
// request does not select it, another run holds its claim — no later
// record of the group leaves before it; and a later record left claimed
// by a crashed run (lease expired) does not jump ahead of an earlier one.
func TestFIFOGroupWaitsForItsEarliestOpenRecord(t *testing.T) {
	t.Parallel()
	t.Run("earlier held by the gate", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, `{"event_id":"ev-p1","lot":"x"}`, body(2, true))
		rep, sent := e.runGroup(t, e.request(10))
		waited(t, rep, sent, ids[1], "while the earlier record is held by the gate")
		if !slices.Contains(rep.Held.IDs, ids[0]) {
			t.Fatalf("held %v", rep.Held.IDs)
		}
	})
	t.Run("earlier not selected", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, body(3, true), body(4, true))
		// Give the later record its own signature and select only that.
		later := e.get(t, ids[1])
		c := quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "downstream timeout"}
		c.Signature = quarantine.Signature(c.Stage, c.Reason, e.src.SchemaVersion)
		next, err := later.Arrive(quarantine.Attempt{Stage: c.Stage, Reason: c.Reason, MessageID: "g-b2", Actor: quarantine.ActorIngest}, c, 20, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Replace(context.Background(), later, next); err != nil {
			t.Fatal(err)
		}
		req := e.request(10)
		req.Signatures = []string{c.Signature}
		rep, sent := e.runGroup(t, req)
		waited(t, rep, sent, ids[1], "while the earlier record stays open")
	})
	t.Run("earlier in flight in another run", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, body(21, true), body(22, true))
		e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Claim("run-a@ops", e.clock.Now(), 15*time.Minute)
		})
		rep, sent := e.runGroup(t, e.request(10))
		waited(t, rep, sent, ids[1], "while the earlier record is claimed by another run")
	})
	for _, mode := range []string{"max_messages 1", "batch_size 1", "one batch"} {
		t.Run("later left claimed, "+mode, func(t *testing.T) {
			t.Parallel()
			e, ids := fifoGroup(t, body(11, true), body(12, true))
			e.change(t, ids[1], func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.Claim("crashed-run@ops", e.clock.Now(), 15*time.Minute)
			})
			e.clock.Advance(16 * time.Minute)
			req := e.request(10)
			switch mode {
			case "max_messages 1":
				req.MaxMessages = 1
			case "batch_size 1":
				req.BatchSize = 1
			}
			_, sent := e.runGroup(t, req)
			want := ids
			if mode == "max_messages 1" {
				want = ids[:1]
			}
			if !slices.Equal(sent, want) {
				t.Fatalf("sent %v, want %v", sent, want)
			}
		})
	}
}

// An earlier record of the group that is PARKED (out of the replay stream,
// like a message moved to a DLQ) does not hold the group back.
func TestFIFOParkedEarlierDoesNotBlock(t *testing.T) {
	t.Parallel()
	e, ids := fifoGroup(t, body(31, true), body(32, true))
	e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ParkManual("ops", "investigating", e.clock.Now())
	})
	_, sent := e.runGroup(t, e.request(10))
	if len(sent) != 1 || sent[0] != ids[1] {
		t.Fatalf("sent %v", sent)
	}
}

// An approved replay of a parked poison record whose send fails goes back
// to PARKED: the next unapproved run does not replay it.
func TestApprovedParkedReplayThatFailsStaysParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 1)
	for i := range cap3 { // three replays that came back, then parked at the cap
		e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Claim("op", e.clock.Now(), time.Minute)
		})
		e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.MarkRedriven("op", "m", e.clock.Now())
		})
		e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
			c := quarantine.Classification{Class: r.FailureClass, Stage: r.FailureStage, Reason: r.FailureReason, Signature: r.FailureSignature}
			return r.Arrive(quarantine.Attempt{Stage: "consumer", Reason: "x", MessageID: "back-" + string(rune('0'+i)), Actor: quarantine.ActorIngest}, c, 50, e.clock.Now())
		})
	}
	e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("op", e.clock.Now()) })
	approved := redrive.Request{Source: e.src.Name, RequestedBy: "approver@ops", IncludeParked: true, Approve: true, MaxMessages: 10}
	if _, err := e.service(&errSender{Sender: stack.Clients.SQS, err: &http4xx{}}, nil, redrive.Config{SendAttempts: 1}).Run(ctx, approved); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, ids[0]); got.Status != quarantine.StatusParked || got.RedriveCap != cap3 {
		t.Fatalf("after the failed approved replay: %s cap %d", got.Status, got.RedriveCap)
	}
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10))
	if err != nil || rep.Redriven.Count != 0 {
		t.Fatalf("unapproved run: %v redriven %v", err, rep.Redriven.IDs)
	}
}

// Explicit ids go through the same walk: naming a later record does not
// send it before an earlier open one, and naming them out of order sends
// them in order.
func TestFIFOExplicitIDsKeepGroupOrder(t *testing.T) {
	t.Parallel()
	t.Run("a parked one is reported", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, body(46, true))
		e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkManual("ops", "wait", e.clock.Now())
		})
		req := e.request(10)
		req.IDs = ids
		rep, err := e.service(newEntrySender(nil, true), nil, redrive.Config{}).Run(context.Background(), req)
		if err != nil || !slices.Contains(rep.Skipped.IDs, ids[0]) {
			t.Fatalf("skipped %v, %v", rep.Skipped.IDs, err)
		}
	})
	t.Run("later only", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, body(42, true), body(43, true))
		req := e.request(10)
		req.IDs = ids[1:]
		rep, sent := e.runGroup(t, req)
		waited(t, rep, sent, ids[1], "when only the later record is named")
	})
	t.Run("out of order, one a batch", func(t *testing.T) {
		t.Parallel()
		e, ids := fifoGroup(t, body(44, true), body(45, true))
		req := e.request(10)
		req.IDs, req.BatchSize = []string{ids[1], ids[0]}, 1
		_, sent := e.runGroup(t, req)
		if !slices.Equal(sent, ids) {
			t.Fatalf("sent %v, want %v", sent, ids)
		}
	})
}

// A record set aside by an integrity hold is out of replay, and its group
// waits for it (it may be released after the investigation): no later
// record of the group goes ahead of it, in this run or the next.
func TestFIFOHeldEarlierHoldsBackItsGroup(t *testing.T) {
	t.Parallel()
	e, ids := fifoGroup(t, body(61, true), body(62, true))
	first := e.get(t, ids[0])
	if err := e.store.Hold(context.Background(), quarantine.IntegrityHold{ID: first.DLQID, Version: first.Version, Reason: "seal_mismatch", At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		_, sent := e.runGroup(t, e.request(10))
		if len(sent) != 0 {
			t.Fatalf("run %d sent %v ahead of the held record", run+1, sent)
		}
	}
}

// A record stored a moment ago waits for the next run: the status index is
// eventually consistent, and an earlier record of its group might not be
// listed yet.
func TestFIFOFreshRecordsWaitForTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: "fresh", Body: []byte(body(71, true)), SourceARN: e.src.ARN, ReceiveCount: 2, MessageGroupID: "G"})
	if err != nil {
		t.Fatal(err)
	}
	s := newEntrySender(nil, true)
	rep, err := e.service(s, nil, redrive.Config{}).Run(context.Background(), e.request(10))
	if err != nil || len(s.order["G"]) != 0 {
		t.Fatalf("fresh record sent at once: %v %v", s.order["G"], err)
	}
	if rep.Remaining != 1 {
		t.Fatalf("remaining %d: a record left for the next run must be reported (dlqctl stops at 0)", rep.Remaining)
	}
	e.clock.Advance(redrive.IndexSettleGuard + time.Second)
	if _, err := e.service(s, nil, redrive.Config{}).Run(context.Background(), e.request(10)); err != nil || len(s.order["G"]) != 1 || s.order["G"][0] != out.Record.DLQID {
		t.Fatalf("after the guard: %v %v", s.order["G"], err)
	}
}

// An earlier record of the group that no longer decodes is held, and its
// group waits for it in the same run too.
func TestFIFOUndecodableEarlierHoldsBackItsGroup(t *testing.T) {
	t.Parallel()
	e, ids := fifoGroup(t, body(51, true), body(52, true))
	spoil(t, ids[0], "attempt_count", "many")
	rep, sent := e.runGroup(t, e.request(10))
	if len(sent) != 0 || !slices.Contains(rep.Integrity.IDs, ids[0]) {
		t.Fatalf("sent %v, held %v", sent, rep.Integrity.IDs)
	}
}

// The claim of an approved replay of a parked record whose run crashed is
// not taken over by an unapproved run when its lease expires.
func TestExpiredParkedClaimNeedsApprovalToTakeOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	ids, claimed := e.expiredParkedClaim(t)
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10))
	if err != nil || rep.Redriven.Count != 0 {
		t.Fatalf("unapproved run took the parked claim over: %v %v", err, rep.Redriven.IDs)
	}
	// It went back to PARKED, possibly sent (the round counts), instead of
	// waiting REDRIVING for an approved run.
	if got := e.get(t, ids[0]); got.Status != quarantine.StatusParked || got.RedriveCount != claimed.RedriveCount || !historyHas(got, quarantine.PossiblySent) {
		t.Fatalf("after the unapproved run: %s count %d", got.Status, got.RedriveCount)
	}
	approved := redrive.Request{Source: e.src.Name, RequestedBy: "approver@ops", IncludeParked: true, Approve: true, MaxMessages: 10}
	if rep, err = e.service(nil, nil, redrive.Config{}).Run(ctx, approved); err != nil || rep.Redriven.Count != 1 {
		t.Fatalf("approved run: %v %v", err, rep.Redriven.IDs)
	}
}

// expiredParkedClaim seeds one record, parks it, and leaves it claimed by
// an approved run that crashed: its lease has expired. It returns the
// record's id and the claimed version.
func (e *env) expiredParkedClaim(t *testing.T) ([]string, *quarantine.Record) {
	t.Helper()
	ids := e.seed(t, 1, none)
	e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ParkManual("ops", "hold on", e.clock.Now())
	})
	claimed := e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ClaimParked("approver@ops", e.clock.Now(), time.Minute)
	})
	e.clock.Advance(2 * time.Minute) // the approved run crashed; its lease expired
	return ids, claimed
}

// Giving an expired parked claim back is a write like the others: a record
// changed since it was read is Skipped (the next run reads it again), one
// set aside meanwhile is counted under Integrity; neither is Parked, nor a
// run error.
func TestExpiredParkedClaimReturnMeetsAConflictOrAHold(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err                error
		skipped, integrity int
	}{
		"changed meanwhile": {err: quarantine.ErrVersionConflict, skipped: 1},
		"held meanwhile":    {err: fmt.Errorf("replace: %w", quarantine.ErrHeld), integrity: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			e.expiredParkedClaim(t)
			back := &failingStore{Store: e.store, err: tc.err, fail: func(r *quarantine.Record) bool { return r.Status == quarantine.StatusParked }}
			rep, err := e.service(nil, back, redrive.Config{}).Run(context.Background(), e.request(10))
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if rep.Parked.Count != 0 || rep.Skipped.Count != tc.skipped || rep.Integrity.Count != tc.integrity {
				t.Fatalf("report: parked %d skipped %d integrity %d; want 0, %d, %d", rep.Parked.Count, rep.Skipped.Count, rep.Integrity.Count, tc.skipped, tc.integrity)
			}
		})
	}
}

// runGroup runs req with a sender that records what leaves (and fails
// nothing), and returns the report and the record ids of group G in the
// order they were sent.
func (e *env) runGroup(t *testing.T, req redrive.Request) (*redrive.Report, []string) {
	t.Helper()
	s := newEntrySender(nil, true)
	rep, err := e.service(s, nil, redrive.Config{}).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return rep, s.order["G"]
}

// waited checks that group G sent nothing in a run and that it deferred
// later, the record behind the one the group waits for (why).
func waited(t *testing.T, rep *redrive.Report, sent []string, later, why string) {
	t.Helper()
	if len(sent) != 0 || !slices.Contains(rep.Deferred.IDs, later) {
		t.Fatalf("sent %v %s; deferred %v", sent, why, rep.Deferred.IDs)
	}
}

// returnRacer runs race once, just before the expired approved claim of
// record id is given back to PARKED: another writer gets there first.
type returnRacer struct {
	quarantine.Store
	id   string
	race func(ctx context.Context, prev *quarantine.Record)
	once sync.Once
}

func (s *returnRacer) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.DLQID == s.id && prev.Status == quarantine.StatusRedriving && r.Status == quarantine.StatusParked {
		s.once.Do(func() { s.race(ctx, prev) })
	}
	return s.Store.Replace(ctx, prev, r)
}

// An expired approved parked claim whose give-back meets a hold, or an
// approved run that took the claim over, holds back its FIFO group: the
// group's later record is not sent ahead of it in this run.
func TestExpiredParkedClaimReturnRaceHoldsBackItsGroup(t *testing.T) {
	for _, mode := range []string{"held", "reclaimed"} {
		t.Run(mode, func(t *testing.T) {
			e, ids := fifoGroup(t, body(81, true), body(82, true))
			e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.ParkManual("ops", "hold on", e.clock.Now())
			})
			e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
				return r.ClaimParked("approver@ops", e.clock.Now(), time.Minute)
			})
			e.clock.Advance(2 * time.Minute) // the approved claim's lease is over
			st := &returnRacer{Store: e.store, id: ids[0], race: func(ctx context.Context, prev *quarantine.Record) {
				if mode == "held" {
					if err := e.store.Hold(ctx, quarantine.IntegrityHold{ID: prev.DLQID, Version: prev.Version, Reason: "seal_mismatch", At: e.clock.Now()}); err != nil {
						t.Error(err)
					}
					return
				}
				n, err := prev.Claim("approver2@ops", e.clock.Now(), 15*time.Minute) // in flight in another run
				if err != nil {
					t.Error(err)
					return
				}
				if err := e.store.Replace(ctx, prev, n); err != nil {
					t.Error(err)
				}
			}}
			s := newEntrySender(nil, true)
			rep, err := e.service(s, st, redrive.Config{}).Run(context.Background(), e.request(10))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.order["G"]) != 0 {
				t.Fatalf("%s: the group's later record %v was sent while the earlier one is %s", mode, s.order["G"], mode)
			}
			if !slices.Contains(rep.Deferred.IDs, ids[1]) {
				t.Fatalf("%s: the later record is not deferred: %+v", mode, rep.Deferred)
			}
		})
	}
}

// A FIFO record sent but not marked (its mark refused past every retry)
// stays REDRIVING, and a later run sends it again once its lease expires:
// nothing later of its group goes before that copy.
func TestFIFOGroupWaitsForAnUnmarkedSend(t *testing.T) {
	t.Parallel()
	e, ids := fifoGroup(t, body(11, true), body(12, true))
	fs := &failingStore{Store: e.store, fail: func(r *quarantine.Record) bool {
		return r.DLQID == ids[0] && r.Status == quarantine.StatusRedriven
	}}
	s := newEntrySender(nil, true)
	req := e.request(10)
	req.BatchSize = 1 // each record its own batch: the second after the first's mark
	rep, _ := e.service(s, fs, redrive.Config{}).Run(context.Background(), req)
	if sent := s.order["G"]; len(sent) != 1 || sent[0] != ids[0] {
		t.Fatalf("sent %v; want the first alone", sent)
	}
	if r := e.get(t, ids[0]); r.Status != quarantine.StatusRedriving {
		t.Fatalf("first: %s", r.Status)
	}
	if !slices.Contains(rep.Deferred.IDs, ids[1]) {
		t.Fatalf("deferred %v", rep.Deferred.IDs)
	}
}

// throttledMarks answers the first n mark writes with DynamoDB's throttle,
// as a table does once the SDK's retries (or its retry quota) are spent.
type throttledMarks struct {
	quarantine.Store
	mu sync.Mutex
	n  int
}

func (s *throttledMarks) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status == quarantine.StatusRedriven {
		s.mu.Lock()
		throttle := s.n > 0
		s.n--
		s.mu.Unlock()
		if throttle {
			return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput (test)"}
		}
	}
	return s.Store.Replace(ctx, prev, r)
}

// A mark throttled past the SDK's retries is tried again until the margin:
// given up, it would leave a sent record REDRIVING, sent again (a second
// payment) once its lease expires.
func TestThrottledMarksAreRetried(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 5)
	store := &throttledMarks{Store: e.store, n: 8}
	rep, err := e.service(nil, store, redrive.Config{}).Run(context.Background(), e.request(10))
	if err != nil || rep.Redriven.Count != 5 {
		t.Fatalf("run: %v, redriven %d", err, rep.Redriven.Count)
	}
	if got := e.statuses(t, ids); got[quarantine.StatusRedriven] != 5 {
		t.Fatalf("statuses %v: a throttled mark was given up", got)
	}
	if got := e.drain(t, none); len(got) != 5 {
		t.Fatalf("%d messages for 5 records", len(got))
	}
}

// An id named twice in a request is one record, taken up once.
func TestRepeatedIDsAreOneRecord(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 2)
	req := e.request(10)
	req.IDs = []string{ids[0], ids[1], ids[0], ids[0]}
	rep, err := e.service(nil, nil, redrive.Config{}).Run(context.Background(), req)
	if err != nil || rep.Redriven.Count != 2 || rep.Skipped.Count != 0 {
		t.Fatalf("run: %v, redriven %d skipped %d", err, rep.Redriven.Count, rep.Skipped.Count)
	}
}
