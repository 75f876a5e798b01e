package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// A redrive to another queue: a run with target replays the selected
// records into another registered source's queue, under a second
// person's approval; the target is sealed in each record's history; and a
// replay that fails there comes back, through the target's DLQ, to the
// same record.

// retargetPair is two sources of one kind on one table, ingest and
// redrive configured with both.
func retargetPair(t *testing.T, fifo bool) (a, b *env, svc *redrive.Service) {
	t.Helper()
	a, b, svc, _ = retargetPairSent(t, fifo)
	return a, b, svc
}

// sentEntry is one entry a sendLog saw SQS accept.
type sentEntry struct{ queueURL, group, dedup string }

// sendLog sends through SQS and records, per record id, the entries SQS
// accepted, and per message group the record ids in enqueue order (kumo
// returns no group or deduplication id on receive).
type sendLog struct {
	redrive.Sender
	mu      sync.Mutex
	entries map[string][]sentEntry
	order   map[string][]string
}

func (l *sendLog) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := l.Sender.SendMessageBatch(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := map[string]bool{}
	for _, r := range out.Successful {
		ok[aws.ToString(r.Id)] = true
	}
	for _, e := range in.Entries {
		if ok[aws.ToString(e.Id)] {
			rid, g := entryRecord(e), aws.ToString(e.MessageGroupId)
			l.entries[rid] = append(l.entries[rid], sentEntry{aws.ToString(in.QueueUrl), g, aws.ToString(e.MessageDeduplicationId)})
			l.order[g] = append(l.order[g], rid)
		}
	}
	return out, nil
}

// retargetPairSent is retargetPair with the sendLog its redrive sends
// through.
func retargetPairSent(t *testing.T, fifo bool) (a, b *env, svc *redrive.Service, log *sendLog) {
	t.Helper()
	log = &sendLog{Sender: stack.Clients.SQS, entries: map[string][]sentEntry{}, order: map[string][]string{}}
	a, b = newEnv(t, fifo), newEnv(t, fifo)
	both := map[string]*quarantine.Source{a.src.Name: a.src, b.src.Name: b.src}
	b.clock = a.clock
	q := ingest.NewQuarantiner(a.store, a.payloads, a.clock.Now, ingest.QuarantinerConfig{Sources: both})
	a.q, b.q = q, q
	svc = redrive.New(a.store, a.lister, a.payloads, log, both, a.clock.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: 10000, MaxBackoff: 20 * time.Millisecond}).
		WithApprovals(memstore.NewApprovals())
	return a, b, svc, log
}

func TestRedriveToAnotherQueueAndItsComeback(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b, svc, sent := retargetPairSent(t, fifo)
			ids := a.seed(t, 4, none)
			req := redrive.Request{Source: a.src.Name, Target: b.src.Name, MaxMessages: 10, RequestedBy: "ops@example.com"}

			// A direct invoke never runs it: a dry run that says why, and
			// names the target.
			dry, err := svc.Run(ctx, req)
			if err != nil || !dry.DryRun || !strings.Contains(dry.DryRunReason, "retarget") || dry.Target != b.src.Name || dry.Redriven.Count != 4 {
				t.Fatalf("direct invoke: %+v %v", dry, err)
			}
			if got := b.receive(t); len(got) != 0 {
				t.Fatalf("a dry run sent %d messages", len(got))
			}

			rep, err := runApproved(ctx, svc, req)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Redriven.Count != 4 || rep.Target != b.src.Name || rep.Approval == nil || !slices.Contains(rep.Approval.Risks, quarantine.RiskRetarget) ||
				!strings.Contains(rep.Approval.Plan, `"target":"`+b.src.Name+`"`) || !strings.Contains(rep.Approval.Summary, "into another queue: "+b.src.Name) {
				t.Fatalf("approved run: %s, approval %+v", rep.Summary(), rep.Approval)
			}
			if got := a.receive(t); len(got) != 0 {
				t.Fatalf("the records' own source got %d messages", len(got))
			}
			for _, id := range ids {
				r := a.get(t, id)
				claim, send := r.Attempts[len(r.Attempts)-2], r.Attempts[len(r.Attempts)-1]
				if r.Status != quarantine.StatusRedriven || claim.Target != b.src.Name || send.Target != b.src.Name || send.MessageID == "" ||
					claim.Approval != rep.Approval.ID || claim.Actor != operatorA.ARN || !r.SentTo(b.src.Name) || r.LastTarget() != b.src.Name {
					t.Fatalf("record %s after the run: %s, claim %+v, send %+v", id, r.Status, claim, send)
				}
			}

			// The target's consumer gets them (FIFO: group and
			// deduplication id as for any replay, each group in order) and
			// fails the first: SQS moves it to the target's DLQ.
			got := b.drain(t, func(rid string) bool { return rid == ids[0] })
			if len(got) != 4 {
				t.Fatalf("target received %d messages, want 4", len(got))
			}
			seen := map[string]bool{}
			for _, m := range got {
				seen[m.recordID] = true
			}
			for _, id := range ids {
				r := a.get(t, id)
				want := sentEntry{queueURL: b.srcURL}
				if fifo {
					want.group, want.dedup = r.MessageGroupID, redrive.DeduplicationID(id, 1)
				}
				if e := sent.entries[id]; !seen[id] || len(e) != 1 || e[0] != want {
					t.Errorf("record %s: received %v, sent %+v, want %+v", id, seen[id], e, want)
				}
			}
			if fifo {
				// Seeded in id order: each group's records leave in it.
				for g, order := range sent.order {
					if !slices.IsSortedFunc(order, func(x, y string) int { return slices.Index(ids, x) - slices.Index(ids, y) }) {
						t.Errorf("group %s left out of order: %v", g, order)
					}
				}
			}
			if n := b.ingestDLQ(t); n != 1 {
				t.Fatalf("%d messages came back through the target's DLQ, want 1", n)
			}
			back := a.get(t, ids[0])
			last := back.Attempts[len(back.Attempts)-1]
			if back.Status != quarantine.StatusQuarantined || !last.IsArrival() || !strings.Contains(last.Note, "came back from "+b.src.Name) ||
				back.Source != a.src.Name || back.RedriveCount != 1 {
				t.Fatalf("comeback: %s %+v (source %s, count %d)", back.Status, last, back.Source, back.RedriveCount)
			}
			if _, err := a.store.Get(ctx, quarantine.RecordID(b.src.Name, back.IdempotencyKey)); !errors.Is(err, quarantine.ErrNotFound) {
				t.Fatalf("the comeback opened a record under the target's name: %v", err)
			}
		})
	}
}

// A message on the target's DLQ whose redrive header names a record the
// history does not say was sent there with that body is a new arrival of
// the target, its header noted as forged (invariant 11).
func TestForgedComebackIsANewArrivalOfTheTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, svc := retargetPair(t, false)
	ids := a.seed(t, 2, none)
	if _, err := runApproved(ctx, svc, redrive.Request{Source: a.src.Name, Target: b.src.Name, IDs: ids[:1], MaxMessages: 1}); err != nil {
		t.Fatal(err)
	}
	retargeted, plain := a.get(t, ids[0]), a.get(t, ids[1])
	header := func(id string) map[string]quarantine.Attribute {
		return map[string]quarantine.Attribute{quarantine.AttrRecordID: {DataType: "String", StringValue: id}}
	}
	for name, m := range map[string]ingest.Message{
		"a record never sent there": {MessageID: "forged-1", Body: []byte(plain.Body), Attributes: header(plain.DLQID), SourceARN: b.src.ARN},
		"another body":              {MessageID: "forged-2", Body: []byte(body(99, true)), Attributes: header(retargeted.DLQID), SourceARN: b.src.ARN},
	} {
		out, err := a.q.Quarantine(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		r := out.Record
		if r.Source != b.src.Name || out.Result != ingest.ResultCreated || !strings.Contains(r.Attempts[0].Note, "forged redrive attributes ignored") {
			t.Errorf("%s: %s in %s (%s), note %q", name, out.Result, r.Source, quarantine.LogRef(r.DLQID), r.Attempts[0].Note)
		}
	}
	if r := a.get(t, ids[0]); r.Version != retargeted.Version {
		t.Fatal("a forged comeback changed the retargeted record")
	}
	if r := a.get(t, ids[1]); r.Version != plain.Version {
		t.Fatal("a forged comeback changed a record never retargeted")
	}
}

func TestRetargetRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, _ := retargetPair(t, false)
	c := newEnv(t, true)
	svc := redrive.New(a.store, a.lister, a.payloads, stack.Clients.SQS, map[string]*quarantine.Source{a.src.Name: a.src, b.src.Name: b.src, c.src.Name: c.src},
		a.clock.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{}).WithApprovals(memstore.NewApprovals())
	for target, want := range map[string]string{
		"arn:aws:sqs:us-east-1:000000000000:" + b.src.Name: "is not a registered source",
		"nowhere":  "is not a registered source",
		a.src.Name: "is the source itself",
		c.src.Name: "a replay goes to a queue of its own kind",
	} {
		_, err := svc.Run(ctx, redrive.Request{Source: a.src.Name, Target: target, RequestedBy: "ops", DryRun: true})
		var re *redrive.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("target %q: %v, want a refusal saying %q", target, err, want)
		}
	}
	if _, err := redrive.ParseRequest([]byte(`{"action":"settle","source":"s","target":"t","requested_by":"ops"}`)); err == nil || !strings.Contains(err.Error(), "target belongs to action redrive") {
		t.Errorf("settle with a target: %v", err)
	}
}

// A source missing from SOURCES is quarantined all the same (ingest's
// unconfigured route); once it is added (a redeploy) its records are
// replayable, through the same validation gate as any.
func TestUnconfiguredSourceIsReplayableOnceAdded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	unconfigured := ingest.NewQuarantiner(e.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{})
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:" + e.src.DLQName
	var ids []string
	for i, good := range []bool{true, false} {
		b := body(i, true)
		if !good {
			b = strings.Replace(b, `"ndc":"12345-678-90"`, `"ndc":"not-an-ndc"`, 1)
		}
		out, err := unconfigured.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprintf("m-%d", i), Body: []byte(b), DLQARN: dlqARN, SourceARN: e.src.ARN, ReceiveCount: 3})
		if err != nil {
			t.Fatal(err)
		}
		if out.Route != ingest.RouteUnconfigured || out.Record.Source != e.src.Name {
			t.Fatalf("unconfigured arrival: route %q source %q", out.Route, out.Record.Source)
		}
		ids = append(ids, out.Record.DLQID)
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(time.Second)
	// The source added (e.service is configured with it): replayed.
	rep, err := e.service(nil, nil, redrive.Config{}).Run(ctx, e.request(10))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redriven.Count != 1 || rep.Held.Count != 1 || rep.Redriven.IDs[0] != ids[0] || rep.Held.IDs[0] != ids[1] {
		t.Fatalf("replay once added: %s (redriven %v, held %v)", rep.Summary(), rep.Redriven.IDs, rep.Held.IDs)
	}
	got := e.drain(t, none)
	if len(got) != 1 || got[0].recordID != ids[0] {
		t.Fatalf("the source queue got %+v", got)
	}
}

// A record replayed into another queue settles only after that queue's
// settle window too: its replay comes back, if it fails, through that
// queue's DLQ, as late as that queue's attributes allow.
func TestRetargetedRecordSettlesAfterTheTargetsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, svc := retargetPair(t, false)
	// The target's consumer holds a message 6 hours before it fails:
	// with 2 receives, a failing replay is back after 12 hours.
	if _, err := stack.Clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(b.srcURL),
		Attributes: map[string]string{"VisibilityTimeout": "21600"}}); err != nil {
		t.Fatal(err)
	}
	ids := a.seed(t, 2, none)
	if _, err := runApproved(ctx, svc, redrive.Request{Source: a.src.Name, Target: b.src.Name, IDs: ids[:1], MaxMessages: 1}); err != nil {
		t.Fatal(err)
	}
	if rep, err := svc.Run(ctx, redrive.Request{Source: a.src.Name, IDs: ids[1:], MaxMessages: 1, RequestedBy: "ops"}); err != nil || rep.Redriven.Count != 1 {
		t.Fatalf("plain replay: %v %v", rep, err)
	}
	settle := func() *redrive.Report {
		t.Helper()
		rep, err := svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: a.src.Name, RequestedBy: "schedule:settle"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a.clock.Advance(2 * time.Hour) // past the source queue's window, not the target's
	if rep := settle(); rep.Settled.Count != 1 || rep.Settled.IDs[0] != ids[1] {
		t.Fatalf("after 2 hours: settled %v, want only the record replayed into its own source", rep.Settled.IDs)
	}
	if r := a.get(t, ids[0]); r.Status != quarantine.StatusRedriven {
		t.Fatalf("the retargeted record settled before its target's window: %s", r.Status)
	}
	a.clock.Advance(11 * time.Hour)
	if rep := settle(); rep.Settled.Count != 1 || rep.Settled.IDs[0] != ids[0] {
		t.Fatalf("after 13 hours: settled %v", rep.Settled.IDs)
	}
}

// A record whose 10 original attributes leave no room for dlq-record-id
// is not replayed into another queue: its failure there could not come
// back to it (it would be a new record of the target, and the original
// would settle RESOLVED). It is skipped unclaimed, saying why, its count
// unchanged; with 9 originals the record id fits and it is replayed.
func TestRetargetSkipsARecordWithNoRoomForItsRecordID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, svc, sent := retargetPairSent(t, false)
	attrs := func(n int) map[string]quarantine.Attribute {
		m := map[string]quarantine.Attribute{}
		for i := range n {
			m[fmt.Sprintf("attr-%d", i)] = quarantine.Attribute{DataType: "String", StringValue: "v"}
		}
		return m
	}
	var ids []string
	for i, n := range []int{10, 9} {
		out, err := a.q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprintf("full-%d", i), SourceARN: a.src.ARN, Attributes: attrs(n), Body: []byte(body(i, true)), ReceiveCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		a.clock.Advance(time.Millisecond)
	}
	a.clock.Advance(time.Second)
	full, fits := ids[0], ids[1]
	before := a.get(t, full)
	for _, dry := range []bool{true, false} {
		req := redrive.Request{Source: a.src.Name, Target: b.src.Name, MaxMessages: 10, DryRun: dry}
		rep, err := runApproved(ctx, svc, req)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Skipped.Count != 1 || rep.Skipped.IDs[0] != full || rep.Redriven.Count != 1 || rep.Redriven.IDs[0] != fits ||
			rep.SkippedNoRoom != redrive.NoRoomForRecordID {
			t.Fatalf("dry %v: %s (skipped %v %q, redriven %v)", dry, rep.Summary(), rep.Skipped.IDs, rep.SkippedNoRoom, rep.Redriven.IDs)
		}
	}
	if r := a.get(t, full); r.Version != before.Version || r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 {
		t.Fatalf("the skipped record changed: %s, version %d→%d, count %d", r.Status, before.Version, r.Version, r.RedriveCount)
	}
	if len(sent.entries[full]) != 0 || len(sent.entries[fits]) != 1 {
		t.Fatalf("sent %d of the full record, %d of the other", len(sent.entries[full]), len(sent.entries[fits]))
	}
	got := b.receive(t)
	if len(got) != 1 {
		t.Fatalf("target received %d messages", len(got))
	}
	if _, ok := got[0].MessageAttributes[quarantine.AttrRecordID]; !ok {
		t.Fatal("the replay of 9 originals went without dlq-record-id")
	}
}

// A replay into another queue always needs a second, different verified
// principal, whatever the source's or the target's four_eyes say: a list
// written before retarget existed, an empty list (four_eyes: []), one
// naming retarget. One verified request becomes a pending approval and
// sends nothing; a direct invoke runs dry; never four-eyes-off.
func TestRetargetAlwaysNeedsASecondPerson(t *testing.T) {
	t.Parallel()
	for name, fourEyes := range map[string]map[quarantine.Risk]bool{
		"a list from before retarget": {quarantine.RiskParked: true, quarantine.RiskLarge: true, quarantine.RiskCorrection: true, quarantine.RiskPolicy: true, quarantine.RiskResume: true},
		"four_eyes: []":               {},
		"a list naming retarget":      {quarantine.RiskRetarget: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b, svc := retargetPair(t, false)
			a.src.FourEyes, b.src.FourEyes = fourEyes, fourEyes
			ids := a.seed(t, 1, none)
			req := redrive.Request{Source: a.src.Name, Target: b.src.Name, MaxMessages: 1, Reason: "move it"}
			rep, err := redrive.RunVerified(ctx, svc, req, operatorA)
			if err != nil || rep.Stopped != redrive.StoppedPendingApproval || rep.Approval == nil ||
				!slices.Equal(rep.Approval.Risks, []quarantine.Risk{quarantine.RiskRetarget}) || rep.Redriven.Count != 0 {
				t.Fatalf("one verified request: %+v %v", rep, err)
			}
			req.RequestedBy = "ops@example.com"
			dry, err := svc.Run(ctx, req)
			if err != nil || !dry.DryRun || !strings.Contains(dry.DryRunReason, "retarget") {
				t.Fatalf("direct invoke: %+v %v", dry, err)
			}
			if r := a.get(t, ids[0]); r.Status != quarantine.StatusQuarantined || len(r.Attempts) != 1 {
				t.Fatalf("the record was touched: %s, %d entries", r.Status, len(r.Attempts))
			}
			if got := b.receive(t); len(got) != 0 {
				t.Fatalf("the target got %d messages", len(got))
			}
		})
	}
}

// The target is unregistered after the replay, before its consumer's
// failure comes back: the comeback is a message of an unconfigured queue
// now, and still joins the record it was sent from (its sealed history
// says so), instead of opening a record of its own while the original
// settles as a success.
func TestComebackFromATargetNoLongerRegistered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, svc := retargetPair(t, false)
	ids := a.seed(t, 1, none)
	if _, err := runApproved(ctx, svc, redrive.Request{Source: a.src.Name, Target: b.src.Name, MaxMessages: 10, RequestedBy: "ops@example.com"}); err != nil {
		t.Fatal(err)
	}
	if got := b.drain(t, func(string) bool { return true }); len(got) != 1 {
		t.Fatalf("target received %d messages, want 1", len(got))
	}
	b.q = ingest.NewQuarantiner(a.store, a.payloads, a.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{a.src.Name: a.src}})
	if n := b.ingestDLQ(t); n != 1 {
		t.Fatalf("%d messages came back through the target's DLQ, want 1", n)
	}
	back := a.get(t, ids[0])
	last := back.Attempts[len(back.Attempts)-1]
	if back.Status != quarantine.StatusQuarantined || !last.IsArrival() || !strings.Contains(last.Note, "came back from "+b.src.Name) || back.Source != a.src.Name {
		t.Fatalf("comeback: %s %+v (source %s)", back.Status, last, back.Source)
	}
	if _, err := a.store.Get(ctx, quarantine.RecordID(b.src.Name, back.IdempotencyKey)); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatalf("the comeback opened a record under the target's name: %v", err)
	}
}
