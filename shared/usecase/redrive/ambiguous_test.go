package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// An answer lost after SQS enqueued the batch: the retry enqueues it again
// on a standard queue, and the record's sealed history says that the round
// was possibly sent more than once. On a timeout of every try the record is not
// "not sent": the round counts toward the cap, the record is QUARANTINED
// for a later run (it may never have left) and its history says possibly
// sent.
func TestAmbiguousSendIsRecordedAsPossiblySent(t *testing.T) {
	t.Parallel()
	t.Run("lost answer then success", func(t *testing.T) {
		t.Parallel()
		e, ids := seeded(t, 3)
		s := &lostAnswerSender{Sender: stack.Clients.SQS, lose: func(n int) bool { return n == 1 }}
		rep, err := e.service(s, nil, redrive.Config{}).Run(context.Background(), e.request(10))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Redriven.Count != 3 {
			t.Fatalf("redriven %d of 3", rep.Redriven.Count)
		}
		got := e.drain(t, none)
		if len(got) != 6 {
			t.Fatalf("%d messages in the queue: the lost answer's batch should be there twice", len(got))
		}
		for _, id := range ids {
			r := e.get(t, id)
			if r.Status != quarantine.StatusRedriven || r.RedriveCount != 1 {
				t.Fatalf("%s: %s round %d", id, r.Status, r.RedriveCount)
			}
			if !historyHas(r, "sent (round 1)") || !historyHas(r, quarantine.PossiblySent+" more than once") {
				t.Fatalf("%s: the duplicate is not in the sealed history: %+v", id, r.Attempts)
			}
		}
	})
	t.Run("every answer lost", func(t *testing.T) {
		t.Parallel()
		e, ids := seeded(t, 2)
		s := &lostAnswerSender{Sender: stack.Clients.SQS, lose: func(int) bool { return true }}
		rep, err := e.service(s, nil, redrive.Config{SendAttempts: 2}).Run(context.Background(), e.request(10))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unknown.Count != 2 || rep.Failed.Count != 0 || rep.Redriven.Count != 0 {
			t.Fatalf("report: unknown %d failed %d redriven %d", rep.Unknown.Count, rep.Failed.Count, rep.Redriven.Count)
		}
		// Possibly enqueued: done as far as the request goes, so no caller
		// sends them again at once (dlqctl stops on them).
		if rep.Remaining != 0 {
			t.Fatalf("remaining %d: the possibly sent counted as still to replay", rep.Remaining)
		}
		for _, id := range ids {
			r := e.get(t, id)
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 1 {
				t.Fatalf("%s: %s count %d: a possibly sent round must count toward the cap", id, r.Status, r.RedriveCount)
			}
			if !historyHas(r, "send outcome unknown (round 1") || !historyHas(r, quarantine.PossiblySent) {
				t.Fatalf("%s: history does not say possibly sent: %+v", id, r.Attempts)
			}
		}
		// The next run replays it as round 2, and the cap still holds.
		rep, err = e.service(nil, nil, redrive.Config{}).Run(context.Background(), e.request(10))
		if err != nil || rep.Redriven.Count != 2 {
			t.Fatalf("second run: %v redriven %d", err, rep.Redriven.Count)
		}
		if r := e.get(t, ids[0]); r.RedriveCount != 2 {
			t.Fatalf("round %d after the second run", r.RedriveCount)
		}
	})
	t.Run("refused by SQS is not ambiguous", func(t *testing.T) {
		t.Parallel()
		e, ids := seeded(t, 1)
		s := &errSender{Sender: stack.Clients.SQS, err: &http4xx{}}
		rep, err := e.service(s, nil, redrive.Config{SendAttempts: 2}).Run(context.Background(), e.request(10))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed.Count != 1 || rep.Unknown.Count != 0 {
			t.Fatalf("report: failed %d unknown %d", rep.Failed.Count, rep.Unknown.Count)
		}
		if r := e.get(t, ids[0]); r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 {
			t.Fatalf("%s count %d: a refused call sent nothing, the round is given back", r.Status, r.RedriveCount)
		}
	})
}

// One record's claim error is that record's failure: the batch's other
// records are still sent and marked in the same run, none is left claimed.
// And a release that cannot be written does not keep the sent records of
// the same call from being marked.
func TestOneRecordsErrorDoesNotStrandTheBatch(t *testing.T) {
	t.Parallel()
	t.Run("claim", func(t *testing.T) {
		t.Parallel()
		e, ids := seeded(t, 6)
		bad := ids[2]
		fs := &failingStore{Store: e.store, fail: func(r *quarantine.Record) bool {
			return r.DLQID == bad && r.Status == quarantine.StatusRedriving
		}}
		rep, err := e.service(nil, fs, redrive.Config{}).Run(context.Background(), e.request(10))
		if !errors.Is(err, errStoreDown) {
			t.Fatalf("run error = %v, want the claim's error reported", err)
		}
		if rep.Redriven.Count != 5 || rep.Failed.Count != 1 || rep.Failed.IDs[0] != bad {
			t.Fatalf("report: redriven %d failed %v", rep.Redriven.Count, rep.Failed.IDs)
		}
		for _, id := range ids {
			r := e.get(t, id)
			want := quarantine.StatusRedriven
			if id == bad {
				want = quarantine.StatusQuarantined
			}
			if r.Status != want {
				t.Fatalf("%s: %s, want %s", id, r.Status, want)
			}
		}
	})
	t.Run("release", func(t *testing.T) {
		t.Parallel()
		e, ids := seeded(t, 4)
		fail := map[string]bool{ids[0]: true}
		ps := newEntrySender(fail, false)
		fs := &failingStore{Store: e.store, fail: func(r *quarantine.Record) bool {
			return fail[r.DLQID] && r.Status == quarantine.StatusQuarantined // its release
		}}
		rep, err := e.service(ps, fs, redrive.Config{SendAttempts: 2}).Run(context.Background(), e.request(10))
		if !errors.Is(err, errStoreDown) {
			t.Fatalf("run error = %v", err)
		}
		if rep.Redriven.Count != 3 {
			t.Fatalf("redriven %d of 3", rep.Redriven.Count)
		}
		for _, id := range ids[1:] {
			if r := e.get(t, id); r.Status != quarantine.StatusRedriven {
				t.Fatalf("%s: %s: a sent record was not marked", id, r.Status)
			}
		}
	})
}

// A claim whose first try was applied but unanswered is retried by the SDK
// and fails its condition: the writer recognizes its own write instead of
// calling it another run's, so the record is sent in this run (on main it
// was "skipped" and left REDRIVING until its lease expired).
func TestRetriedClaimThatWasAppliedIsOurs(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 1)
	ddb, lose := faults.LoseDynamoDBAnswers(stack.AWS, "PutItem", 1)
	store := dynamostore.New(ddb, stack.Names["QuarantineTable"])
	rep, err := e.service(nil, store, redrive.Config{}).Run(context.Background(), e.request(10))
	if err != nil {
		t.Fatal(err)
	}
	if lose.Lost() != 1 {
		t.Fatalf("%d answers lost", lose.Lost())
	}
	if rep.Redriven.Count != 1 || rep.Skipped.Count != 0 {
		t.Fatalf("report: redriven %d skipped %d", rep.Redriven.Count, rep.Skipped.Count)
	}
	r := e.get(t, ids[0])
	if r.Status != quarantine.StatusRedriven || historyHas(r, "while the record changed") {
		t.Fatalf("%s: %+v", r.Status, r.Attempts)
	}
	if got := e.drain(t, none); len(got) != 1 {
		t.Fatalf("%d messages for one record", len(got))
	}
}

// Within a FIFO message group, replays leave in the original order, also
// when an earlier message's send fails and is retried: no later message of
// the group goes before it.
func TestFIFOReplayKeepsGroupOrder(t *testing.T) {
	t.Parallel()
	for _, failFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry=%v", failFirst), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, true)
			ids := e.seed(t, 24, none) // groups 0,1,2; 8 each, in order
			byGroup := map[string][]string{}
			for _, id := range ids {
				r := e.get(t, id)
				byGroup[r.MessageGroupID] = append(byGroup[r.MessageGroupID], id)
			}
			s := newEntrySender(nil, true)
			if failFirst {
				for _, g := range byGroup {
					s.fail[g[0]] = true
				}
			}
			req := e.request(100)
			req.BatchSize = 24
			rep, err := e.service(s, nil, redrive.Config{SendAttempts: 3}).Run(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Redriven.Count != 24 {
				t.Fatalf("redriven %d of 24 (failed %d, deferred %d)", rep.Redriven.Count, rep.Failed.Count, rep.Deferred.Count)
			}
			for g, want := range byGroup {
				if got := s.order[g]; strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("group %s left in the order\n%v\nwant\n%v", g, got, want)
				}
			}
		})
	}
}

// A message of a group whose earlier message could not be sent is held
// back: it is not sent before it (its claim is given back, deferred).
func TestFIFOGroupHeldBackAfterAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.seed(t, 6, none) // groups 0,1,2 twice
	first := e.get(t, ids[0])
	s := newEntrySender(map[string]bool{ids[0]: true}, false)
	rep, err := e.service(s, nil, redrive.Config{SendAttempts: 2}).Run(context.Background(), e.request(10))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed.Count != 1 || rep.Deferred.Count != 1 || rep.Redriven.Count != 4 {
		t.Fatalf("report: failed %v deferred %v redriven %d", rep.Failed.IDs, rep.Deferred.IDs, rep.Redriven.Count)
	}
	later := e.get(t, rep.Deferred.IDs[0])
	if later.MessageGroupID != first.MessageGroupID || later.Status != quarantine.StatusQuarantined || later.RedriveCount != 0 {
		t.Fatalf("deferred %s: group %s (want %s), %s count %d", later.DLQID, later.MessageGroupID, first.MessageGroupID, later.Status, later.RedriveCount)
	}
}

// A record that no run can send (its payload is gone, its message is above
// SQS's size limit) is parked with the reason instead of failing at the
// head of every run, so the records behind it are reached.
func TestUnsendableRecordsDoNotBlockTheQueue(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 2)
	// The first record's body is claim-checked and its object is gone.
	bad := e.get(t, ids[0])
	next := bad.Clone()
	next.BodyRef = &quarantine.ObjectRef{Bucket: stack.Names["PayloadBucket"], Key: "bodies/missing/" + quarantine.NewWriteID(), SHA256: bad.BodySHA256, Size: bad.BodySize}
	next.Body = ""
	next.Version++
	next.PrevSeal = bad.Seal
	next.WriteID = quarantine.NewWriteID()
	if err := quarantine.SealRecord(next); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(context.Background(), bad, next); err != nil {
		t.Fatal(err)
	}
	svc := e.service(nil, nil, redrive.Config{})
	rep, err := svc.Run(context.Background(), e.request(1))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Parked.Count != 1 || rep.Parked.IDs[0] != ids[0] {
		t.Fatalf("first run: parked %v failed %v", rep.Parked.IDs, rep.Failed.IDs)
	}
	r := e.get(t, ids[0])
	if r.Status != quarantine.StatusParked || r.RedriveCount != 0 || !historyHas(r, "cannot be sent: payload unreadable") {
		t.Fatalf("%s count %d %+v", r.Status, r.RedriveCount, r.Attempts)
	}
	rep, err = svc.Run(context.Background(), e.request(1))
	if err != nil || rep.Redriven.Count != 1 || rep.Redriven.IDs[0] != ids[1] {
		t.Fatalf("second run: %v redriven %v", err, rep.Redriven.IDs)
	}
}

// batch_size and max_messages given as 0 are outside their ranges (absent
// takes the default).
func TestExplicitZeroLimitsAreRejected(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"source":"s","requested_by":"me","batch_size":0}`,
		`{"source":"s","requested_by":"me","max_messages":0}`,
	} {
		var re *redrive.RequestError
		if _, err := redrive.ParseRequest([]byte(raw)); !errors.As(err, &re) || !strings.Contains(err.Error(), " 0 is outside") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// A lease that does not outlast the invocation would let another run take
// over claims this run still holds: the run refuses to start.
func TestLeaseMustExceedTheFunctionTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	raw := []byte(fmt.Sprintf(`{"source":%q,"requested_by":"test@ops","max_messages":1}`, e.src.Name))
	_, err := e.service(nil, nil, redrive.Config{Lease: 14 * time.Minute}).LambdaHandler(ctx, raw)
	var ce *redrive.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "LEASE_SECONDS") {
		t.Fatalf("invocation = %v", err)
	}
	if _, err := e.service(nil, nil, redrive.Config{Lease: 16 * time.Minute}).LambdaHandler(ctx, raw); err != nil {
		t.Fatal(err)
	}
}

// A record set aside while a run claims it is reported as held, not as a
// failure, and no function error carries a record id (an idempotency key,
// maybe a payload value).
func TestHoldMetDuringAClaimIsReportedWithoutIDs(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 2)
	fs := &failingStore{Store: &heldStore{Store: e.store}, fail: func(r *quarantine.Record) bool { return false }}
	raw := []byte(fmt.Sprintf(`{"source":%q,"requested_by":"test@ops","max_messages":10}`, e.src.Name))
	out, err := e.service(nil, fs, redrive.Config{}).LambdaHandler(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if out.Integrity.Count != 2 || out.Failed.Count != 0 {
		t.Fatalf("report: held %d failed %d", out.Integrity.Count, out.Failed.Count)
	}
	// A run whose records hit their own errors returns them joined: the
	// function error names kinds only.
	fs = &failingStore{Store: e.store, fail: func(*quarantine.Record) bool { return true }}
	_, err = e.service(nil, fs, redrive.Config{}).LambdaHandler(context.Background(), raw)
	if err == nil {
		t.Fatal("no error")
	}
	for _, id := range ids {
		if strings.Contains(err.Error(), id) || strings.Contains(err.Error(), quarantine.LogRef(id)) {
			t.Fatalf("function error names a record: %v", err)
		}
	}
}

// An item changed outside the system so that it no longer decodes as a
// record (an attribute of the wrong type) is set aside like any tampered
// record: a run holds it and replays the records behind it, and an
// arrival for its key opens a successor instead of failing until the
// DLQ's retention drops the message.
func TestUndecodableItemIsHeldAndItsArrivalsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 3)
	bad := ids[0]
	spoil(t, bad, "redrive_count", "zero")
	// The arrival of a re-failure for its key is stored in a successor.
	got, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "again-0", Body: []byte(body(0, true)), SourceARN: e.src.ARN, ReceiveCount: 2})
	if err != nil {
		t.Fatalf("arrival for an undecodable record: %v", err)
	}
	if got.Result != ingest.ResultCreated || got.Record.Predecessor == nil || got.Record.Predecessor.ID != bad {
		t.Fatalf("arrival: %s %+v", got.Result, got.Record.Predecessor)
	}
	// Its redrive count cannot be trusted (the cap could be bypassed
	// through it): the successor starts at its cap, so a run parks it as
	// poison instead of replaying it.
	if got.Record.Status != quarantine.StatusQuarantined || got.Record.RedriveCount < got.Record.RedriveCap {
		t.Fatalf("successor of a broken record: %s at %d of cap %d", got.Record.Status, got.Record.RedriveCount, got.Record.RedriveCap)
	}
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.Integrity.Count != 1 || rep.Integrity.IDs[0] != bad || rep.Redriven.Count != 2 || !slices.Contains(rep.Parked.IDs, got.Record.DLQID) {
		t.Fatalf("report: held %v redriven %v", rep.Integrity.IDs, rep.Redriven.IDs)
	}
	// Held: the next run does not list it.
	rep, err = e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10))
	if err != nil || rep.Integrity.Count != 0 || rep.Failed.Count != 0 {
		t.Fatalf("second run: %v held %d failed %d", err, rep.Integrity.Count, rep.Failed.Count)
	}
}
