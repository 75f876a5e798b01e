package redrive

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// decisionNow is the time of the claim decisions below: after the
// records' first_seen (storetest.Record).
var decisionNow = time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)

// sealed returns a sealed record of source "src", changed by edit (if
// any) first.
func sealed(t *testing.T, edit func(r *quarantine.Record)) *quarantine.Record {
	t.Helper()
	r := storetest.Record(t, storetest.UniqueID("dc"))
	if edit != nil {
		edit(r)
	}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func redriving(lease time.Time, parkedCap int) func(r *quarantine.Record) {
	return func(r *quarantine.Record) {
		until := quarantine.At(lease)
		r.Status, r.StatusSince, r.LeaseUntil, r.RedriveCount, r.ParkedCap = quarantine.StatusRedriving, r.FirstSeen, &until, 1, parkedCap
	}
}

func TestDecideClaim(t *testing.T) {
	t.Parallel()
	expired, live := decisionNow.Add(-time.Minute), decisionNow.Add(time.Minute)
	for _, tc := range []struct {
		name string
		// edit changes the record decided on before it is sealed (nil:
		// as stored); rec, when set, makes it instead (changed after
		// sealing, say).
		edit   func(r *quarantine.Record)
		rec    func(t *testing.T) *quarantine.Record
		in     func(in *claimInput)
		action claimAction
		block  bool
		reason string
		// next, when set, checks the successor to write.
		next func(n *quarantine.Record) error
	}{
		{
			name:   "quarantined below its cap is taken for the next round",
			action: claimTake,
			next:   status(quarantine.StatusRedriving, 1),
		},
		{
			name: "a record changed behind its seal is held, whatever it claims",
			rec: func(t *testing.T) *quarantine.Record {
				r := sealed(t, func(r *quarantine.Record) { r.RedriveCount = r.RedriveCap })
				r.RedriveCount = 0 // tampered: a poison record passed off as fresh
				return r
			},
			action: claimHold,
		},
		{
			name:   "at its cap it is parked as poison",
			edit:   func(r *quarantine.Record) { r.RedriveCount = r.RedriveCap },
			action: claimPark,
			next:   status(quarantine.StatusParked, 3),
		},
		{
			name:   "at its cap in a dry run it is reported parked, nothing to write",
			edit:   func(r *quarantine.Record) { r.RedriveCount = r.RedriveCap },
			in:     func(in *claimInput) { in.dryRun = true },
			action: claimPark,
		},
		{
			name:   "parked is skipped without include_parked, and blocks nothing",
			edit:   func(r *quarantine.Record) { r.Status, r.RedriveCount = quarantine.StatusParked, 3 },
			action: claimSkip,
			reason: "parked",
		},
		{
			name:   "parked with include_parked is claimed with approval",
			edit:   func(r *quarantine.Record) { r.Status, r.RedriveCount = quarantine.StatusParked, 3 },
			in:     func(in *claimInput) { in.req.IncludeParked = true },
			action: claimTake,
			next:   status(quarantine.StatusRedriving, 4),
		},
		{
			name:   "in flight in another run: skipped, its group waits",
			edit:   redriving(live, 0),
			action: claimSkip,
			block:  true,
			reason: "not claimable",
		},
		{
			name:   "an expired lease is taken over for the same round",
			edit:   redriving(expired, 0),
			action: claimTake,
			next:   status(quarantine.StatusRedriving, 1),
		},
		{
			name:   "an expired approved replay of a parked record goes back to PARKED",
			edit:   redriving(expired, 3),
			action: claimReturn,
			next:   status(quarantine.StatusParked, 1),
		},
		{
			name:   "an expired approved replay of a parked record in a dry run: skipped, its group waits",
			edit:   redriving(expired, 3),
			in:     func(in *claimInput) { in.dryRun = true },
			action: claimSkip,
			block:  true,
			reason: "parked",
		},
		{
			name:   "a live approved replay of a parked record: skipped, its group waits",
			edit:   redriving(live, 3),
			action: claimSkip,
			block:  true,
			reason: "parked",
		},
		{
			name:   "an expired approved replay of a parked record, in an approved parked run, is taken over",
			edit:   redriving(expired, 3),
			in:     func(in *claimInput) { in.req.IncludeParked = true },
			action: claimTake,
			next:   status(quarantine.StatusRedriving, 1),
		},
		{
			name:   "its FIFO group is blocked: deferred",
			in:     func(in *claimInput) { in.blocked = true },
			action: claimDefer,
		},
		{
			// (The filters carry cleared_reasons: see Request.selected.)
			name:   "a signature not cleared: skipped, its group waits",
			in:     func(in *claimInput) { in.req.ClearedReasons = []string{"consumer|other|v#"} },
			action: claimSkip,
			block:  true,
			reason: "no longer matches the filters",
		},
		{
			name:   "no longer matching the filters: skipped, its group waits",
			in:     func(in *claimInput) { in.req.Classes = []quarantine.Class{quarantine.ClassValidation} },
			action: claimSkip,
			block:  true,
			reason: "no longer matches the filters",
		},
		{
			name:   "another source's record: skipped",
			in:     func(in *claimInput) { in.source = "other" },
			action: claimSkip,
			block:  true,
			reason: "no longer matches the filters",
		},
		{
			name:   "redriven already: skipped, blocks nothing",
			edit:   func(r *quarantine.Record) { r.Status, r.RedriveCount = quarantine.StatusRedriven, 1 },
			action: claimSkip,
			reason: "not claimable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := claimInput{req: Request{Source: "src", RequestedBy: "ops@test"}, source: "src", now: decisionNow, lease: 15 * time.Minute}
			if tc.in != nil {
				tc.in(&in)
			}
			var rec *quarantine.Record
			if tc.rec != nil {
				rec = tc.rec(t)
			} else {
				rec = sealed(t, tc.edit)
			}
			before := *rec
			d := decideClaim(rec, in)
			if d.action != tc.action || d.block != tc.block || d.reason != tc.reason {
				t.Fatalf("decision %v (block %v, reason %q, cause %v), want %v (block %v, reason %q)",
					d.action, d.block, d.reason, d.cause, tc.action, tc.block, tc.reason)
			}
			if rec.Version != before.Version || rec.Status != before.Status || rec.Seal != before.Seal {
				t.Fatal("the decision changed the record read")
			}
			if (d.action == claimHold) != quarantine.IsIntegrityFailure(d.cause) {
				t.Fatalf("cause %v for %v", d.cause, d.action)
			}
			switch {
			case tc.next == nil && d.next != nil:
				t.Fatalf("a successor %s to write, want none", d.next.Status)
			case tc.next != nil && d.next == nil:
				t.Fatal("no successor to write")
			case tc.next != nil:
				if err := tc.next(d.next); err != nil {
					t.Fatal(err)
				}
				if err := quarantine.VerifyChain(rec, d.next); err != nil {
					t.Fatalf("the successor does not chain to the record read: %v", err)
				}
			}
		})
	}
}

// status checks a successor's status and redrive count.
func status(want quarantine.Status, count int) func(n *quarantine.Record) error {
	return func(n *quarantine.Record) error {
		if n.Status != want || n.RedriveCount != count {
			return fmt.Errorf("successor %s at count %d, want %s at %d", n.Status, n.RedriveCount, want, count)
		}
		return nil
	}
}

func TestDecidePayload(t *testing.T) {
	t.Parallel()
	src := &quarantine.Source{Name: "src"}
	gone := &smithy.GenericAPIError{Code: "NoSuchKey"}
	denied := &smithy.GenericAPIError{Code: "AccessDenied"}
	for _, tc := range []struct {
		name       string
		body       []byte
		berr, aerr error
		action     payloadAction
		reason     string
		dry        func(rep *Report) *Outcome
	}{
		{name: "a valid body is sent", body: []byte(`{"a":1}`), action: payloadSend, dry: func(rep *Report) *Outcome { return &rep.Redriven }},
		{name: "a body that fails the gate is held", body: []byte(`not json`), action: payloadInvalid, dry: func(rep *Report) *Outcome { return &rep.Held }},
		{name: "a body whose object does not match its seal: hold", berr: quarantine.ErrPayloadMismatch, action: payloadHold},
		{name: "attributes whose object does not match their seal: hold", body: []byte(`{"a":1}`), aerr: fmt.Errorf("read: %w", quarantine.ErrPayloadMismatch), action: payloadHold},
		{name: "an integrity failure wins over an unreadable object", berr: gone, aerr: quarantine.ErrPayloadMismatch, action: payloadHold},
		{name: "a body object that is gone: park", berr: gone, action: payloadPark, reason: "payload unreadable: aws:NoSuchKey", dry: func(rep *Report) *Outcome { return &rep.Failed }},
		{name: "an attribute object that is gone: park, even with a valid body", body: []byte(`{"a":1}`), aerr: gone, action: payloadPark, reason: "payload unreadable: aws:NoSuchKey", dry: func(rep *Report) *Outcome { return &rep.Failed }},
		{name: "access denied is released, never parked", berr: denied, action: payloadRelease, reason: "payload unreadable: aws:AccessDenied", dry: func(rep *Report) *Outcome { return &rep.Failed }},
		{name: "an unreadable body with an invalid one: release, not held", body: []byte(`not json`), berr: errors.New("boom"), action: payloadRelease, reason: "payload unreadable: unavailable", dry: func(rep *Report) *Outcome { return &rep.Failed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := decidePayload(src, tc.body, tc.berr, tc.aerr)
			if p.action != tc.action {
				t.Fatalf("decision %d (%q), want %d", p.action, p.reason, tc.action)
			}
			if tc.reason != "" && p.reason != tc.reason {
				t.Fatalf("reason %q, want %q", p.reason, tc.reason)
			}
			if (p.action == payloadHold) != quarantine.IsIntegrityFailure(p.cause) {
				t.Fatalf("cause %v for %d", p.cause, p.action)
			}
			if (p.action == payloadInvalid) != (p.class != nil) {
				t.Fatalf("classification %+v for %d", p.class, p.action)
			}
			if p.action == payloadInvalid && p.reason != "held: "+p.class.Reason {
				t.Fatalf("reason %q, class reason %q", p.reason, p.class.Reason)
			}
			if tc.dry != nil {
				rep := &Report{}
				if got := p.dryOutcome(rep); got != tc.dry(rep) {
					t.Fatal("a dry run reports it under another outcome")
				}
			}
		})
	}
}
