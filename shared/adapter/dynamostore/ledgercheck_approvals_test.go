package dynamostore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The four-eyes check over ledger items built from real records, policies
// and approvals, made by their own transitions (as the functions make
// them) or forged and re-sealed (as a table writer would).

var fe0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return fe0.Add(time.Duration(minutes) * time.Minute) }

const feSource = "orders"

func iam(t *testing.T, arn, userID string) identity.Principal {
	t.Helper()
	p, err := identity.FromIAM(arn, "123456789012", userID, "ASIAEXAMPLE")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// feWorld is a ledger's keys as Verify hands them to CheckAll: each
// key's versions in order, each its own change.
type feWorld struct {
	t     *testing.T
	alice identity.Principal // who asks
	bob   identity.Principal // who approves
	keys  map[string]*ledger.KeyHistory
	seq   int
}

func newFEWorld(t *testing.T) *feWorld {
	return &feWorld{t: t, keys: map[string]*ledger.KeyHistory{},
		alice: iam(t, "arn:aws:iam::123456789012:user/alice", "AIDAALICE"),
		bob:   iam(t, "arn:aws:iam::123456789012:user/bob", "AIDABOB")}
}

func (w *feWorld) put(key string, it ledger.Item) string {
	w.seq++
	k := w.keys[key]
	if k == nil {
		k = &ledger.KeyHistory{Key: key}
		w.keys[key] = k
	}
	seq := fmt.Sprintf("%021d", w.seq)
	k.Versions = append(k.Versions, ledger.HistoryVersion{Item: it, Seq: seq, At: fe0.Format(time.RFC3339Nano)})
	return seq
}

func (w *feWorld) record(r *quarantine.Record) {
	w.t.Helper()
	sdk, err := Marshal(r)
	if err != nil {
		w.t.Fatal(err)
	}
	it, err := LedgerItem(sdk)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(r.DLQID, it)
}

func (w *feWorld) approval(a *approval.Approval) {
	w.t.Helper()
	sdk, err := (&ApprovalStore{}).item(a)
	if err != nil {
		w.t.Fatal(err)
	}
	it, err := LedgerItem(sdk)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(approvalKey(a.Source, a.ID), it)
}

func (w *feWorld) policy(p *policy.Policy) { w.put(policyKey(p.Source, p.ID), policyItemOf(w.t, p)) }

func (w *feWorld) check() ([]ledger.Problem, []ledger.Note) {
	keys := make([]ledger.KeyHistory, 0, len(w.keys))
	for _, k := range slices.Sorted(maps.Keys(w.keys)) {
		keys = append(keys, *w.keys[k])
	}
	return LedgerApprovalCheck()(keys)
}

// newRecord is a QUARANTINED record of source as ingest writes it,
// ledgered.
func (w *feWorld) newRecord(source, key string) *quarantine.Record {
	w.t.Helper()
	now := quarantine.At(fe0.Add(-time.Hour))
	r := &quarantine.Record{
		DLQID: source + "#" + key, Source: source, SourceARN: "arn:aws:sqs:us-east-1:123456789012:" + source,
		IdempotencyKey: key, KeyOrigin: quarantine.KeyFromAttribute, Status: quarantine.StatusQuarantined, StatusSince: now,
		FailureClass: quarantine.ClassExhausted, FailureSignature: "consumer|retries exhausted|v1", FailureStage: "consumer", FailureReason: "retries exhausted",
		Body: `{"a":"é"}`, BodyEncoding: quarantine.EncodingUTF8, BodySHA256: quarantine.BodySHA256([]byte(`{"a":"é"}`)), BodySize: 10,
		Attempts:     []quarantine.Attempt{{At: now, Stage: "consumer", Reason: "retries exhausted", MessageID: "m-" + key, Actor: quarantine.ActorIngest, ReceiveCount: 5, Kind: quarantine.AttemptArrival}},
		AttemptCount: 1, FirstSeen: now, LastSeen: now, RedriveCap: 3, Version: 1,
	}
	if err := quarantine.SealRecord(r); err != nil {
		w.t.Fatal(err)
	}
	w.record(r)
	return r
}

// step ledgers the version a transition made.
func (w *feWorld) step(n *quarantine.Record, err error) *quarantine.Record {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	w.record(n)
	return n
}

// parked is a record an operator parked (not a high-risk action).
func (w *feWorld) parked(key string) *quarantine.Record {
	r := w.newRecord(feSource, key)
	n, err := r.ParkManual(w.alice.ARN, "look at it", at(-30))
	return w.step(n, err)
}

func (w *feWorld) as(p identity.Principal, approvalID string) string {
	return quarantine.WithApproval(p.Actor(), approvalID)
}

// ask is a pending approval alice asked for at minute 0, expiring after
// an hour.
func (w *feWorld) ask(id, source, action, plan string, risks ...quarantine.Risk) *approval.Approval {
	w.t.Helper()
	a, err := approval.New(approval.Request{ID: id, Source: source, Action: action, Risks: risks, Plan: []byte(plan), Summary: "s",
		Requester: w.alice, Reason: "needed", TTL: time.Hour}, at(0))
	if err != nil {
		w.t.Fatal(err)
	}
	w.approval(a)
	return a
}

// approve is a approved by bob at minute.
func (w *feWorld) approve(a *approval.Approval, minute int) *approval.Approval {
	w.t.Helper()
	n, err := a.Approve(w.bob, "ok", at(minute))
	if err != nil {
		w.t.Fatal(err)
	}
	w.approval(n)
	return n
}

// executed is a with its run's outcome at minute.
func (w *feWorld) executed(a *approval.Approval, minute int) *approval.Approval {
	w.t.Helper()
	n, err := a.Executed(approval.Outcome{RunID: "run", At: quarantine.At(at(minute)), Summary: "done"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.approval(n)
	return n
}

// forge is a forger's next version of a: edit applied, chained, sealed.
func (w *feWorld) forge(a *approval.Approval, edit func(*approval.Approval)) *approval.Approval {
	w.t.Helper()
	n := *a
	edit(&n)
	n.Version, n.PrevSeal = a.Version+1, a.Seal
	s, err := n.ComputeSeal()
	if err != nil {
		w.t.Fatal(err)
	}
	n.Seal = s
	w.approval(&n)
	return &n
}

func parkedPlan(ids ...string) string {
	return fmt.Sprintf(`{"action":"redrive","batch_size":50,"ids":["%s"],"include_parked":true,"max_messages":%d,"source":"orders"}`, strings.Join(ids, `","`), len(ids))
}

const correctedBody = `{"a":"b"}`

func correctPlan(id string) string {
	return fmt.Sprintf(`{"action":"correct","ids":["%s"],"max_messages":100,"payload":%q,"reason":"typo","source":"orders"}`, id, correctedBody)
}

func (w *feWorld) correct(r *quarantine.Record, actor string, body string, minute int) *quarantine.Record {
	src := &quarantine.Source{Name: r.Source, ARN: r.SourceARN}
	n, err := r.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: actor, Reason: "typo", Body: []byte(body)}, at(minute))
	return w.step(n, err)
}

// approvedParkedReplay is the whole clean path: a parked record, alice's
// request, bob's approval, the claim under it as alice, the outcome.
func (w *feWorld) approvedParkedReplay(key, id string) (*quarantine.Record, *approval.Approval) {
	r := w.parked(key)
	a := w.approve(w.ask(id, feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked), 1)
	n, err := r.ClaimParked(w.as(w.alice, id), at(2), time.Minute)
	r = w.step(n, err)
	w.executed(a, 3)
	return r, a
}

func (w *feWorld) policyAdd(id string, minute int, actor string) *policy.Policy {
	w.t.Helper()
	p, err := policy.New(policy.Spec{Source: feSource, Signatures: []string{"consumer|retries exhausted|v1"}, MaxPerRun: 10, ExpiresAt: at(24 * 60)}, actor, at(minute))
	if err != nil {
		w.t.Fatal(err)
	}
	p.ID = id
	if p.Seal, err = p.ComputeSeal(); err != nil {
		w.t.Fatal(err)
	}
	w.policy(p)
	return p
}

func (w *feWorld) policyStep(p *policy.Policy, err error) *policy.Policy {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	w.policy(p)
	return p
}

// The clean paths verify with no problem: an approved replay of a parked
// record, a correction, a policy's creation and its resume after the
// breaker, each under bob's approval of alice's request; a large run's
// claims up to its max_messages; and a parked replay, or a run's claims,
// that its source's four_eyes left to one person are notes.
func TestApprovalCheckPassesApprovedActions(t *testing.T) {
	t.Parallel()
	w := newFEWorld(t)
	w.approvedParkedReplay("k1", "apr-parked-1")

	r := w.newRecord(feSource, "k2")
	ca := w.approve(w.ask("apr-correct-1", feSource, "correct", correctPlan(r.DLQID), quarantine.RiskCorrection), 1)
	w.correct(r, w.as(w.alice, ca.ID), correctedBody, 2)
	w.executed(ca, 2)

	pa := w.approve(w.ask("apr-policy-1", feSource, "policy_add", `{"action":"policy_add","policy":{"max_per_run":10},"policy_id":"pol-0000000000a1","source":"orders"}`, quarantine.RiskPolicy), 1)
	p := w.policyAdd("pol-0000000000a1", 2, w.as(w.alice, pa.ID))
	w.executed(pa, 2)
	p = w.policyStep(p.Suspend(quarantine.ActorBreaker, "9 of 10 came back", at(10)))
	ra := w.approve(w.ask("apr-resume-1", feSource, "policy_resume", `{"action":"policy_resume","policy_id":"pol-0000000000a1","reason":"fixed","source":"orders"}`, quarantine.RiskResume), 11)
	w.policyStep(p.Resume(w.as(w.alice, ra.ID), "fixed", 10, 9, at(12)))
	w.executed(ra, 12)

	large := w.approve(w.ask("apr-large-1", feSource, "redrive", `{"action":"redrive","batch_size":50,"max_messages":2,"source":"orders"}`, quarantine.RiskLarge), 1)
	for _, k := range []string{"k3", "k4"} {
		r := w.newRecord(feSource, k)
		w.step(r.Claim(w.as(w.alice, large.ID), at(2), time.Minute))
	}
	w.executed(large, 3)

	off := w.parked("k5")
	w.step(off.ClaimParked(w.as(w.alice, quarantine.FourEyesOff), at(2), time.Minute))
	for _, k := range []string{"k6", "k7"} {
		r := w.newRecord(feSource, k)
		w.step(r.Claim(w.as(w.alice, quarantine.FourEyesOff), at(2), time.Minute))
	}

	problems, notes := w.check()
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if len(notes) != 2 || notes[0].Subject != feSource+"#k5" || !strings.Contains(notes[0].Detail, "four-eyes-off: claimed a parked record") ||
		notes[1].Subject != feSource || !strings.HasPrefix(notes[1].Detail, "four-eyes-off: 2 claims in runs on one person's request") {
		t.Fatalf("notes: %v", notes)
	}
}

// Each way an action lacks a valid approval is named, on the record or
// policy, saying what is wrong.
func TestApprovalCheckNamesUnapprovedActions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		subject string
		want    string
		build   func(w *feWorld)
	}{
		{"a parked claim without an approval", "orders#k", "claimed a parked record without an approval", func(w *feWorld) {
			r := w.parked("k")
			w.step(r.ClaimParked(w.alice.Actor(), at(2), time.Minute))
		}},
		{"a correction without an approval", "orders#k", "executed a correction without an approval", func(w *feWorld) {
			w.correct(w.newRecord(feSource, "k"), w.alice.Actor(), correctedBody, 2)
		}},
		{"a policy created without an approval", "#pol#orders#pol-0000000000b1", "created a standing policy without an approval", func(w *feWorld) {
			w.policyAdd("pol-0000000000b1", 2, w.alice.Actor())
		}},
		{"a policy resumed without an approval", "#pol#orders#pol-0000000000b2", "resumed a standing policy without an approval", func(w *feWorld) {
			p := w.policyAdd("pol-0000000000b2", 2, w.as(w.alice, quarantine.FourEyesOff))
			p = w.policyStep(p.Suspend(quarantine.ActorBreaker, "tripped", at(10)))
			w.policyStep(p.Resume(w.alice.Actor(), "fixed", 1, 1, at(12)))
		}},
		{"a claim for another queue marked four-eyes-off", "orders#k", "its entry says four-eyes-off, but a replay into another queue (payments) always needs a second person's approval", func(w *feWorld) {
			w.step(w.newRecord(feSource, "k").Claim(quarantine.WithTarget(w.as(w.alice, quarantine.FourEyesOff), "payments"), at(2), time.Minute))
		}},
		{"a parked record's expired approved claim taken over without an approval", "orders#k", "reclaimed the expired claim of a parked record without an approval", func(w *feWorld) {
			r, _ := w.approvedParkedReplay("k", "apr-reclaim-1")
			w.step(r.Claim(w.alice.Actor(), at(10), time.Minute))
		}},
		{"an unknown approval", "orders#k", "approval apr-nowhere-1 is not in the ledger", func(w *feWorld) {
			r := w.parked("k")
			w.step(r.ClaimParked(w.as(w.alice, "apr-nowhere-1"), at(2), time.Minute))
		}},
		{"an approval of another source", "orders#k", `approval apr-other-1 is for source "payments", not "orders"`, func(w *feWorld) {
			r := w.parked("k")
			w.approve(w.ask("apr-other-1", "payments", "redrive", parkedPlan(r.DLQID), quarantine.RiskParked), 1)
			w.step(r.ClaimParked(w.as(w.alice, "apr-other-1"), at(2), time.Minute))
		}},
		{"a self-approved approval (forged, sealed)", "orders#k", "approval apr-self-1 was approved by its own requester", func(w *feWorld) {
			r := w.parked("k")
			a := w.ask("apr-self-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked)
			w.forge(a, func(n *approval.Approval) {
				d := quarantine.At(at(1))
				n.State, n.DecidedBy, n.DecidedAt = approval.StateApproved, &w.alice, &d
			})
			w.step(r.ClaimParked(w.as(w.alice, a.ID), at(2), time.Minute))
		}},
		{"a self-approval through two trusted SSO roles (one person under its rules)", "orders#k", "approval apr-sso-1 was approved by its own requester", func(w *feWorld) {
			r := w.parked("k")
			maria := iam(t, "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Operator_1a/maria", "AROAOPERATOR:maria")
			mariaAdmin := iam(t, "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_2b/maria", "AROAADMIN:maria")
			a, err := approval.New(approval.Request{ID: "apr-sso-1", Source: feSource, Action: "redrive", Risks: []quarantine.Risk{quarantine.RiskParked},
				Plan: []byte(parkedPlan(r.DLQID)), Requester: maria, Reason: "needed", TTL: time.Hour,
				Rules: identity.Rules{TrustedSessionRoles: []string{"AWSReservedSSO_Operator_1a", "AWSReservedSSO_Admin_2b"}}}, at(0))
			if err != nil {
				t.Fatal(err)
			}
			w.approval(a)
			w.forge(a, func(n *approval.Approval) {
				d := quarantine.At(at(1))
				n.State, n.DecidedBy, n.DecidedAt = approval.StateApproved, &mariaAdmin, &d
			})
			w.step(r.ClaimParked(w.as(maria, a.ID), at(2), time.Minute))
		}},
		{"an approval approved after the claim", "orders#k", "approval apr-late-1 was not approved before the claim (pending then: approved at 2026-12-06T12:05:00", func(w *feWorld) {
			r := w.parked("k")
			a := w.ask("apr-late-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked)
			w.step(r.ClaimParked(w.as(w.alice, a.ID), at(2), time.Minute))
			w.approve(a, 5)
		}},
		{"an approval created after the claim", "orders#k", "approval apr-after-1 was created at", func(w *feWorld) {
			r := w.parked("k")
			w.step(r.ClaimParked(w.as(w.alice, "apr-after-1"), at(-5), time.Minute))
			w.approve(w.ask("apr-after-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked), 1)
		}},
		{"an expired approval (approved after its expiry: forged, sealed)", "orders#k", "approval apr-expired-1 was approved at 2026-12-06T13:30:00", func(w *feWorld) {
			r := w.parked("k")
			a := w.ask("apr-expired-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked)
			w.forge(a, func(n *approval.Approval) {
				d := quarantine.At(at(90))
				n.State, n.DecidedBy, n.DecidedAt = approval.StateApproved, &w.bob, &d
			})
			w.step(r.ClaimParked(w.as(w.alice, a.ID), at(91), time.Minute))
		}},
		{"a rejected approval", "orders#k", "approval apr-rejected-1 was rejected", func(w *feWorld) {
			r := w.parked("k")
			a := w.ask("apr-rejected-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked)
			n, err := a.Reject(w.bob, "no", at(1))
			if err != nil {
				t.Fatal(err)
			}
			w.approval(n)
			w.step(r.ClaimParked(w.as(w.alice, a.ID), at(2), time.Minute))
		}},
		{"an approval whose plan's ids do not include the record", "orders#k", "approval apr-ids-1's plan names 1 ids, not this record", func(w *feWorld) {
			r := w.parked("k")
			w.approve(w.ask("apr-ids-1", feSource, "redrive", parkedPlan("orders#someone-else"), quarantine.RiskParked), 1)
			w.step(r.ClaimParked(w.as(w.alice, "apr-ids-1"), at(2), time.Minute))
		}},
		{"more claims than max_messages", "orders#k2", "claim 2 of 2 recorded under it, whose plan allows max_messages 1", func(w *feWorld) {
			a := w.approve(w.ask("apr-max-1", feSource, "redrive", `{"action":"redrive","batch_size":50,"max_messages":1,"source":"orders"}`, quarantine.RiskLarge), 1)
			for i, k := range []string{"k1", "k2"} {
				r := w.newRecord(feSource, k)
				w.step(r.Claim(w.as(w.alice, a.ID), at(2+i), time.Minute))
			}
		}},
		{"an actor who is not the requester", "orders#k", "its actor arn:aws:iam::123456789012:user/bob is not approval apr-actor-1's requester", func(w *feWorld) {
			r := w.parked("k")
			w.approve(w.ask("apr-actor-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked), 1)
			w.step(r.ClaimParked(w.as(w.bob, "apr-actor-1"), at(2), time.Minute))
		}},
		{"an approval of another risk", "orders#k", "approval apr-risk-1 covers correction, not parked", func(w *feWorld) {
			r := w.parked("k")
			w.approve(w.ask("apr-risk-1", feSource, "correct", correctPlan(r.DLQID), quarantine.RiskCorrection), 1)
			w.step(r.ClaimParked(w.as(w.alice, "apr-risk-1"), at(2), time.Minute))
		}},
		{"a claim after the approved run ended", "orders#k", "approval apr-ended-1's run had ended", func(w *feWorld) {
			r := w.parked("k")
			a := w.approve(w.ask("apr-ended-1", feSource, "redrive", parkedPlan(r.DLQID), quarantine.RiskParked), 1)
			w.executed(a, 2)
			w.step(r.ClaimParked(w.as(w.alice, a.ID), at(3), time.Minute))
		}},
		{"a corrected body that is not the approved payload", "orders#k", "is not approval apr-body-1's planned payload", func(w *feWorld) {
			r := w.newRecord(feSource, "k")
			w.approve(w.ask("apr-body-1", feSource, "correct", correctPlan(r.DLQID), quarantine.RiskCorrection), 1)
			w.correct(r, w.as(w.alice, "apr-body-1"), `{"a":"c"}`, 2)
		}},
		{"a resume under another policy's approval", "#pol#orders#pol-0000000000b3", "approval apr-pol-1's plan names policy pol-0000000000ff, not pol-0000000000b3", func(w *feWorld) {
			p := w.policyAdd("pol-0000000000b3", 2, w.as(w.alice, quarantine.FourEyesOff))
			p = w.policyStep(p.Suspend(quarantine.ActorBreaker, "tripped", at(3)))
			a := w.approve(w.ask("apr-pol-1", feSource, "policy_resume", `{"action":"policy_resume","policy_id":"pol-0000000000ff","reason":"x","source":"orders"}`, quarantine.RiskResume), 4)
			w.policyStep(p.Resume(w.as(w.alice, a.ID), "fixed", 1, 1, at(5)))
		}},
		{"an approval whose item was written behind the redrive function", "orders#k", "approval apr-named-1 is itself named (writer-missing)", func(w *feWorld) {
			_, a := w.approvedParkedReplay("k", "apr-named-1")
			w.keys[approvalKey(a.Source, a.ID)].Named = []ledger.Kind{ledger.KindWriterMissing, ledger.KindRewritten}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newFEWorld(t)
			c.build(w)
			problems, _ := w.check()
			for _, p := range problems {
				if p.Subject != c.subject {
					t.Errorf("only %s is named, not %s: %s", c.subject, p.Subject, p.Detail)
				}
			}
			for _, p := range problems {
				if p.Kind == ledger.KindUnapproved && p.Subject == c.subject && strings.Contains(p.Detail, c.want) {
					if strings.Contains(p.Detail, "rewritten") {
						t.Errorf("a rewritten table item does not unmake an approval: %s", p.Detail)
					}
					return
				}
			}
			t.Fatalf("want %s named %q, got %v", c.subject, c.want, problems)
		})
	}
}

// What a version added is told from the version before it: a record's
// history keeps its old entries (the parked claim of an earlier version
// is not named again on every later version), a forged version that puts
// a parked claim in the middle of the history is still caught, and a key
// whose version before the ledger is unknown is judged by its newest
// entry only.
func TestApprovalCheckAttributesEachEntryToTheVersionThatAddedIt(t *testing.T) {
	t.Parallel()
	w := newFEWorld(t)
	r := w.parked("k")
	r = w.step(r.ClaimParked(w.alice.Actor(), at(2), time.Minute))
	r = w.step(r.MarkRedriven(w.alice.Actor(), "msg-1", at(3)))
	problems, _ := w.check()
	if len(problems) != 1 || !strings.Contains(problems[0].Detail, "claimed a parked record without an approval (change "+w.keys[r.DLQID].Versions[2].Seq) {
		t.Fatalf("one unapproved claim, named once at the version that added it: %v", problems)
	}

	// A forger's version: the parked claim slipped in before the newest
	// entry, re-sealed.
	w = newFEWorld(t)
	q := w.parked("k")
	n, err := q.Unpark(w.alice.Actor(), "back", at(3)) // its newest entry: the unpark's
	if err != nil {
		t.Fatal(err)
	}
	forged := n.Clone()
	last := forged.Attempts[len(forged.Attempts)-1]
	forged.Attempts = append(forged.Attempts[:len(forged.Attempts)-1],
		quarantine.Attempt{At: quarantine.At(at(2)), Stage: quarantine.StageRedrive, Reason: "parked record claimed with approval; cap raised from 3 to 3", Actor: w.alice.ARN}, last)
	forged.AttemptCount++
	if err := quarantine.SealRecord(forged); err != nil {
		t.Fatal(err)
	}
	w.record(forged)
	// Two actions without an approval: the claim slipped in, and the
	// unpark (itself high-risk: it makes a parked record replayable).
	if problems, _ := w.check(); len(problems) != 2 || !strings.Contains(problems[0].Detail+problems[1].Detail, "claimed a parked record without an approval") ||
		!strings.Contains(problems[0].Detail+problems[1].Detail, "unparked a record without an approval") {
		t.Fatalf("the entry slipped into the middle: %v", problems)
	}

	// The version before is unknown (the ledger began after it): only the
	// newest entry is this version's. An old parked claim further back is
	// not attributed; a new one is.
	w = newFEWorld(t)
	old := w.parked("k")
	old = w.step(old.ClaimParked(w.alice.Actor(), at(2), time.Minute))
	rel, err := old.Release(w.alice.Actor(), "given back", at(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := w.keys[old.DLQID]
	k.Versions, k.BeforeUnknown = nil, true
	w.record(rel)
	if problems, _ := w.check(); len(problems) != 0 {
		t.Fatalf("an entry before an unknown version is not this version's: %v", problems)
	}
	k.Versions = nil
	w.record(old)
	if problems, _ := w.check(); len(problems) != 1 {
		t.Fatalf("the newest entry of a version after an unknown one is its own: %v", problems)
	}

	// After a baseline: the baseline's entries are not the version's.
	w = newFEWorld(t)
	base := w.parked("k")
	base = w.step(base.ClaimParked(w.alice.Actor(), at(2), time.Minute))
	k = w.keys[base.DLQID]
	k.Versions = nil
	sdk, err := Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	if k.Before, err = LedgerItem(sdk); err != nil {
		t.Fatal(err)
	}
	next, err := base.Release(w.alice.Actor(), "given back", at(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.record(next)
	if problems, _ := w.check(); len(problems) != 0 {
		t.Fatalf("the baseline's entries are not the first ledgered version's: %v", problems)
	}
}

// An unpark makes a parked record replayable by any run: it is high-risk,
// and one without an approval is named on its own (review finding: the
// prefilter once left such a version undecoded).
func TestApprovalCheckNamesAnUnapprovedUnpark(t *testing.T) {
	t.Parallel()
	w := newFEWorld(t)
	r := w.parked("k")
	w.step(r.Unpark(w.alice.Actor(), "back to quarantine", at(3)))
	problems, _ := w.check()
	if len(problems) != 1 || !strings.Contains(problems[0].Detail, "unparked a record without an approval") {
		t.Fatalf("an unpark without an approval: %v", problems)
	}
}

// An approval whose first ledgered version is not its pending version 1
// (the ledger lost or never saw it) approves nothing: what it asked for
// cannot be proven unchanged (review finding).
func TestAnApprovalWithoutItsFirstVersionApprovesNothing(t *testing.T) {
	t.Parallel()
	w := newFEWorld(t)
	r := w.parked("k")
	// The approval as the redrive function would make it, but only its
	// approved version reaches the ledger.
	a, err := approval.New(approval.Request{ID: "chg-00000001", Source: "orders", Action: "redrive", Risks: []quarantine.Risk{quarantine.RiskParked},
		Plan: []byte(parkedPlan(r.DLQID)), Summary: "s", Requester: w.alice, Reason: "needed", TTL: time.Hour}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := a.Approve(w.bob, "ok", at(1))
	if err != nil {
		t.Fatal(err)
	}
	w.approval(ok)
	w.step(r.ClaimParked(quarantine.WithApproval(w.alice.Actor(), ok.ID), at(2), time.Minute))
	problems, _ := w.check()
	found := false
	for _, p := range problems {
		found = found || strings.Contains(p.Detail, "first-version-missing")
	}
	if !found {
		t.Fatalf("an approval without its first version approved the claim: %v", problems)
	}
}
