package redrive_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// 500 records, a consumer that keeps failing a known subset: after repeated
// rounds every good record is RESOLVED, every bad one is PARKED as poison
// after exactly redrive_cap sends, and nothing is lost.
func TestRoundTripToResolvedAndPoison(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	isBad := func(i int) bool { return i%7 == 0 }
	ids := e.seed(t, 500, isBad)
	bad := map[string]bool{}
	for i, id := range ids {
		if isBad(i) {
			bad[id] = true
		}
	}
	// The queue redelivers 2 × 30 s; with a one-second margin the settle
	// window is 61 s, inside the two minutes between rounds.
	svc := e.service(nil, nil, redrive.Config{SettleWindow: time.Minute, SettleMargin: time.Second})
	sends := map[string]int{}
	ctx := context.Background()
	for round := 1; round <= cap3+2; round++ {
		rep, err := svc.Run(ctx, e.request(1000))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range e.drain(t, func(id string) bool { return bad[id] }) {
			sends[r.recordID]++
		}
		back := e.ingestDLQ(t)
		t.Logf("round %d: redriven %d parked %d settled %d; %d came back", round, rep.Redriven.Count, rep.Parked.Count, rep.Settled.Count, back)
		e.clock.Advance(2 * time.Minute)
	}
	if _, err := svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: e.src.Name, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		r := e.get(t, id)
		switch {
		case bad[id]:
			if r.Status != quarantine.StatusParked || r.FailureClass != quarantine.ClassPoison || r.RedriveCount != cap3 || sends[id] != cap3 {
				t.Fatalf("bad %s: status %s class %s count %d sends %d; history %+v", id, r.Status, r.FailureClass, r.RedriveCount, sends[id], r.Attempts)
			}
		default:
			if r.Status != quarantine.StatusResolved || sends[id] != 1 {
				t.Fatalf("good %s: status %s sends %d; history %+v", id, r.Status, sends[id], r.Attempts)
			}
		}
	}
}

// Two concurrent invocations over the same records: each record is sent
// once in the round.
func TestConcurrentRunsSendEachRecordOnce(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 120)
	svc := e.service(nil, nil, redrive.Config{})
	var wg sync.WaitGroup
	reps := make([]*redrive.Report, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := e.request(1000)
			req.BatchSize = 10
			rep, err := svc.Run(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		}()
	}
	wg.Wait()
	if got := reps[0].Redriven.Count + reps[1].Redriven.Count; got != len(ids) {
		t.Fatalf("redriven %d + %d, want %d", reps[0].Redriven.Count, reps[1].Redriven.Count, len(ids))
	}
	counts := map[string]int{}
	for _, r := range e.drain(t, none) {
		counts[r.recordID]++
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Fatalf("%s sent %d times", id, counts[id])
		}
	}
}

// A crash between claim, send and mark: a rerun after the lease expires
// converges, no record is lost, and a record sent twice says so in its
// history.
func TestCrashAtEachPointConverges(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"after-claim", "after-send", "after-mark"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e, ids := seeded(t, 30)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var svc *redrive.Service
			lease := redrive.Config{Lease: time.Minute}
			switch point {
			case "after-claim":
				svc = e.service(nil, &crashingStore{Store: e.store, after: quarantine.StatusRedriving, cancel: cancel}, lease)
			case "after-send":
				svc = e.service(&crashingSender{Sender: stack.Clients.SQS, cancel: cancel, dedup: map[string][]string{}}, nil, lease)
			case "after-mark":
				svc = e.service(nil, &crashingStore{Store: e.store, after: quarantine.StatusRedriven, cancel: cancel}, lease)
			}
			req := e.request(100)
			req.BatchSize = 10
			if _, err := svc.Run(ctx, req); err == nil {
				t.Fatal("the crashed run reported success")
			}
			// The rerun before the lease expires must not steal live claims.
			rerun := e.service(nil, nil, lease)
			if _, err := rerun.Run(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(2 * time.Minute)
			if _, err := rerun.Run(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, r := range e.drain(t, none) {
				counts[r.recordID]++
			}
			for _, id := range ids {
				r := e.get(t, id)
				if r.Status != quarantine.StatusRedriven || r.RedriveCount != 1 {
					t.Fatalf("%s: status %s count %d after the rerun", id, r.Status, r.RedriveCount)
				}
				if counts[id] < 1 {
					t.Fatalf("%s was never sent", id)
				}
				if counts[id] > 1 && !historyHas(r, "duplicate send is possible") {
					t.Fatalf("%s sent %d times silently", id, counts[id])
				}
			}
		})
	}
}

// A payload that fails the current schema is never sent: it is held, stays
// quarantined as validation, and its redrive count is given back.
func TestSchemaFailureIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	out, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "x", SourceARN: e.src.ARN,
		Body: []byte(`{"event_id":"ev-x","ndc":"bad","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T10:00:00Z"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Even when an operator asks for validation records explicitly.
	req := e.request(10)
	req.IDs = []string{out.Record.DLQID}
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Held.Count != 1 || rep.Redriven.Count != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := e.drain(t, none); len(got) != 0 {
		t.Fatalf("%d messages sent", len(got))
	}
	r := e.get(t, out.Record.DLQID)
	if r.Status != quarantine.StatusQuarantined || r.FailureClass != quarantine.ClassValidation || r.RedriveCount != 0 || !strings.HasPrefix(r.FailureReason, "schema /ndc") {
		t.Fatalf("held record: %s %s %d %q", r.Status, r.FailureClass, r.RedriveCount, r.FailureReason)
	}
}

// FIFO: the group id is kept and the deduplication id is stable across the
// retries of one round (a crash after sending and a takeover of the lease).
func TestFIFOGroupAndStableDeduplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ids := e.seed(t, 12, none)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &crashingSender{Sender: stack.Clients.SQS, cancel: cancel, dedup: map[string][]string{}, groups: map[string]string{}}
	req := e.request(100)
	req.BatchSize = 10
	_, _ = e.service(rec, nil, redrive.Config{Lease: time.Minute}).Run(ctx, req)
	e.clock.Advance(2 * time.Minute)
	rec.cancel = nil
	if _, err := e.service(rec, nil, redrive.Config{Lease: time.Minute}).Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := e.drain(t, none); len(got) < len(ids) {
		t.Fatalf("%d messages in the queue for %d records", len(got), len(ids))
	}
	groups := rec.groups
	for _, id := range ids {
		r := e.get(t, id)
		if groups[id] != r.MessageGroupID || r.MessageGroupID == "" {
			t.Fatalf("%s: sent with group %q, original %q", id, groups[id], r.MessageGroupID)
		}
		dd := rec.dedup[id]
		if len(dd) == 0 {
			t.Fatalf("%s never sent", id)
		}
		for _, d := range dd {
			if d != redrive.DeduplicationID(id, 1) {
				t.Fatalf("%s: deduplication ids %v differ within round 1", id, dd)
			}
		}
	}
}

func TestRequestLimits(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"source":"s","requested_by":"me","batch_size":51}`,
		`{"source":"s","requested_by":"me","surprise":true}`,
		`{"source":"s"}`,
		`{"requested_by":"me"}`,
		`{"source":"s","requested_by":"me","max_messages":-1}`,
		`{"source":"s","requested_by":"me","classes":["maybe"]}`,
		`{"source":"s","requested_by":"me","ids":["no-hash"]}`,
		`{"source":"s","requested_by":"me"} {}`,
		`not json`,
	} {
		var re *redrive.RequestError
		if _, err := redrive.ParseRequest([]byte(raw)); !errors.As(err, &re) {
			t.Errorf("%s: accepted (%v)", raw, err)
		}
	}
	req, err := redrive.ParseRequest([]byte(`{"source":"s","requested_by":"me"}`))
	if err != nil || req.BatchSize != 50 || req.MaxMessages != 100 || req.Action != "redrive" {
		t.Fatalf("defaults: %+v %v", req, err)
	}
}

// max_messages is respected, the rest is reported as remaining, and a dry
// run changes nothing at all.
func TestMaxMessagesAndDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ids := e.seed(t, 25, func(i int) bool { return false })
	svc := e.service(nil, nil, redrive.Config{})
	ctx := context.Background()
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, id := range ids {
			out[id] = e.get(t, id).Seal
		}
		return out
	}
	before := snapshot()
	req := e.request(10)
	req.DryRun = true
	rep, err := svc.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.Redriven.Count != 10 || rep.Remaining != 15 || rep.Stopped != redrive.StoppedMaxMessages {
		t.Fatalf("dry run report %+v", rep)
	}
	after := snapshot()
	for id := range before {
		if before[id] != after[id] {
			t.Fatalf("dry run changed %s", id)
		}
	}
	depth, err := stack.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.srcURL), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
	if err != nil || depth.Attributes["ApproximateNumberOfMessages"] != "0" {
		t.Fatalf("dry run sent messages: %v %v", depth.Attributes, err)
	}

	req.DryRun = false
	req.BatchSize = 4
	rep, err = svc.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redriven.Count != 10 || rep.Remaining != 15 {
		t.Fatalf("report %+v", rep)
	}
	if n := len(e.drain(t, none)); n != 10 {
		t.Fatalf("%d sent, want 10", n)
	}
	// High-risk without approval becomes a dry run that says why.
	svc = e.service(nil, nil, redrive.Config{ApprovalThreshold: 5})
	rep, err = svc.Run(ctx, e.request(10))
	if err != nil || !rep.DryRun || !strings.Contains(rep.DryRunReason, "second person's approval") {
		t.Fatalf("unapproved high-risk run: %+v %v", rep, err)
	}
}

func TestPartialBatchFailuresReleaseOnlyFailedEntries(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 20)
	fail := map[string]bool{ids[3]: true, ids[11]: true, ids[17]: true}
	ps := newEntrySender(fail, false)
	rep, err := e.service(ps, nil, redrive.Config{SendAttempts: 3}).Run(context.Background(), e.request(100))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed.Count != 3 || rep.Redriven.Count != 17 {
		t.Fatalf("report: failed %v redriven %d", rep.Failed.IDs, rep.Redriven.Count)
	}
	sent := map[string]bool{}
	for _, r := range e.drain(t, none) {
		sent[r.recordID] = true
	}
	for _, id := range ids {
		r := e.get(t, id)
		if fail[id] {
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 || sent[id] || !historyHas(r, "send failed after retries: InternalError") {
				t.Fatalf("failed entry %s: %s count %d sent %v", id, r.Status, r.RedriveCount, sent[id])
			}
		} else if r.Status != quarantine.StatusRedriven || !sent[id] {
			t.Fatalf("%s: %s sent %v", id, r.Status, sent[id])
		}
	}
	if ps.tries < 3 {
		t.Fatalf("failed entries were tried %d times", ps.tries)
	}
}

// The replayed message carries the original body and attributes, plus the
// record id and redrive count, within SQS's 10-attribute limit.
func TestMessageFidelity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	mk := func(n int) map[string]quarantine.Attribute {
		a := map[string]quarantine.Attribute{"bin": {DataType: "Binary", BinaryValue: []byte{0, 1, 2}}}
		for i := 1; i < n; i++ {
			a[string(rune('a'+i))] = quarantine.Attribute{DataType: "String", StringValue: strings.Repeat("v", i)}
		}
		return a
	}
	for _, n := range []int{8, 9, 10} {
		if _, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "m" + string(rune('0'+n)), SourceARN: e.src.ARN, Attributes: mk(n), Body: []byte(body(n, true))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10)); err != nil {
		t.Fatal(err)
	}
	msgs := e.receive(t)
	if len(msgs) != 3 {
		t.Fatalf("received %d", len(msgs))
	}
	for _, m := range msgs {
		orig := len(m.MessageAttributes)
		_, hasID := m.MessageAttributes[quarantine.AttrRecordID]
		_, hasCount := m.MessageAttributes[quarantine.AttrRedriveCount]
		if orig != 10 || string(m.MessageAttributes["bin"].BinaryValue) != "\x00\x01\x02" {
			t.Fatalf("attributes %d: %v", orig, m.MessageAttributes)
		}
		n := orig - boolInt(hasID) - boolInt(hasCount)
		switch n {
		case 8:
			if !hasID || !hasCount {
				t.Fatal("8 originals: both redrive attributes expected")
			}
		case 9:
			if !hasID || hasCount {
				t.Fatal("9 originals: only the record id expected")
			}
		case 10:
			if hasID || hasCount {
				t.Fatal("10 originals: no redrive attribute expected")
			}
		}
		if !strings.Contains(aws.ToString(m.Body), `"event_id":"ev-000`) {
			t.Fatalf("body %s", aws.ToString(m.Body))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A rate-limited run still sends everything, through the limiter.
func TestRateLimitedRunSendsEverything(t *testing.T) {
	t.Parallel()
	e, ids := seeded(t, 25)
	req := e.request(100)
	req.RatePerSecond = 500
	rep, err := e.service(nil, nil, redrive.Config{}).Run(context.Background(), req)
	if err != nil || rep.Redriven.Count != len(ids) {
		t.Fatalf("%+v %v", rep, err)
	}
}

// markRacer runs change once, just before the first write that marks a
// record sent: another writer changes the record between the send and
// its mark.
type markRacer struct {
	quarantine.Store
	change func(ctx context.Context, id string)
	once   sync.Once
}

func (s *markRacer) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if a := r.Attempts[len(r.Attempts)-1]; strings.HasPrefix(a.Reason, "sent (round") {
		s.once.Do(func() { s.change(ctx, r.DLQID) })
	}
	return s.Store.Replace(ctx, prev, r)
}

// A sent record whose mark meets a concurrent change is marked on the
// version it finds: REDRIVEN when the change left it in the round (a
// payload read), "sent while the record changed" when the claim was given
// back meanwhile; never unmarked, never marked twice.
func TestMarkSentMeetsAConcurrentChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(r *quarantine.Record, now time.Time) (*quarantine.Record, error)
		status quarantine.Status
		note   string
	}{
		{"read meanwhile", func(r *quarantine.Record, now time.Time) (*quarantine.Record, error) {
			return r.NotePayloadRead("auditor", now)
		},
			quarantine.StatusRedriven, "sent (round 1)"},
		{"released meanwhile", func(r *quarantine.Record, now time.Time) (*quarantine.Record, error) {
			return r.Release("other", "x", now, nil)
		},
			quarantine.StatusQuarantined, "while the record changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, ids := seeded(t, 1)
			s := &markRacer{Store: e.store, change: func(ctx context.Context, id string) {
				cur, err := e.store.Get(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				n, err := c.change(cur, e.clock.Now())
				if err == nil {
					err = e.store.Replace(ctx, cur, n)
				}
				if err != nil {
					t.Error(err)
				}
			}}
			rep, err := e.service(nil, s, redrive.Config{}).Run(context.Background(), e.request(10))
			if err != nil || rep.Redriven.Count != 1 {
				t.Fatalf("%+v %v", rep, err)
			}
			r := e.get(t, ids[0])
			marks := 0
			for _, a := range r.Attempts {
				if strings.HasPrefix(a.Reason, "sent (round") {
					marks++
				}
			}
			if r.Status != c.status || !historyHas(r, c.note) || marks != 1 {
				t.Fatalf("%s with %d sent entries, want %s with one %q: %+v", r.Status, marks, c.status, c.note, r.Attempts)
			}
		})
	}
}
