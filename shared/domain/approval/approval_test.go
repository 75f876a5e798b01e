package approval_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func principal(t *testing.T, arn string) identity.Principal {
	t.Helper()
	p, err := identity.FromIAM(arn, "123456789012", "AIDA"+strings.ToUpper(arn[len(arn)-1:]), "AKIA")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pending(t *testing.T) (*approval.Approval, identity.Principal, identity.Principal) {
	t.Helper()
	a, b := principal(t, "arn:aws:iam::123456789012:user/a"), principal(t, "arn:aws:iam::123456789012:user/b")
	ap, err := approval.New(approval.Request{ID: "req-00000001", Source: "orders", Action: "redrive", Risks: []quarantine.Risk{quarantine.RiskParked},
		Plan: []byte(`{"action":"redrive","include_parked":true,"source":"orders"}`), Summary: "replay parked", Requester: a, Reason: "fixed", TTL: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ap, a, b
}

func TestAnApprovalIsDecidedOnceBySomeoneElseBeforeItExpires(t *testing.T) {
	t.Parallel()
	ap, a, b := pending(t)
	var refusal *approval.Refusal
	if _, err := ap.Approve(a, "", t0.Add(time.Minute)); !errors.As(err, &refusal) {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := ap.Approve(b, "", t0.Add(time.Hour)); !errors.As(err, &refusal) {
		t.Fatalf("approval at the expiry: %v", err)
	}
	ok, err := ap.Approve(b, "looks right", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := approval.CheckTransition(ap, ok); err != nil {
		t.Fatalf("approve is not a transition: %v", err)
	}
	if _, err := ok.Approve(b, "", t0.Add(2*time.Minute)); !errors.As(err, &refusal) {
		t.Fatalf("second approval: %v", err)
	}
	if _, err := ok.Reject(b, "", t0.Add(2*time.Minute)); !errors.As(err, &refusal) {
		t.Fatalf("reject after approve: %v", err)
	}
	done, err := ok.Executed(approval.Outcome{RunID: "r1", At: quarantine.At(t0.Add(3 * time.Minute)), Summary: "redriven 3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := approval.CheckTransition(ok, done); err != nil {
		t.Fatalf("executed is not a transition: %v", err)
	}
	if _, err := done.Executed(approval.Outcome{}); err == nil {
		t.Fatal("an executed approval took a second outcome")
	}
	// The requester may withdraw their own request.
	if _, err := ap.Reject(a, "withdrawn", t0.Add(time.Minute)); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
}

func TestCheckTransitionNamesForgedVersions(t *testing.T) {
	t.Parallel()
	ap, a, b := pending(t)
	ok, err := ap.Approve(b, "", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(x *approval.Approval) *approval.Approval {
		s, err := x.ComputeSeal()
		if err != nil {
			t.Fatal(err)
		}
		x.Seal = s
		return x
	}
	cp := func(x *approval.Approval) *approval.Approval { c := *x; return &c }
	for _, tc := range []struct {
		name       string
		prev, next *approval.Approval
		want       string
	}{
		{"self-approved", ap, func() *approval.Approval { n := cp(ok); n.DecidedBy = &a; return reseal(n) }(), "same principal"},
		{"plan changed on approval", ap, func() *approval.Approval {
			n := cp(ok)
			n.Plan = `{"action":"redrive","include_parked":true,"source":"orders","max_messages":10000}`
			n.PlanSHA256 = ""
			return reseal(n)
		}(), "plan_sha256"},
		{"decided after expiry", ap, func() *approval.Approval {
			n := cp(ok)
			at := quarantine.At(t0.Add(2 * time.Hour))
			n.DecidedAt = &at
			return reseal(n)
		}(), "after its expiry"},
		{"first version approved", nil, ok, "first version"},
		{"content without its seal", ap, func() *approval.Approval { n := cp(ok); n.Reason = "other"; return n }(), "seal"},
		{"executed straight from pending", ap, func() *approval.Approval {
			n := cp(ok)
			n.State, n.Outcome = approval.StateExecuted, &approval.Outcome{}
			return reseal(n)
		}(), "not a change"},
	} {
		err := approval.CheckTransition(tc.prev, tc.next)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestNewRefusesWhatCannotBeApproved(t *testing.T) {
	t.Parallel()
	fed, err := identity.FromIAM("arn:aws:sts::123456789012:federated-user/x", "123456789012", "123456789012:x", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]approval.Request{
		"no reason":      {Source: "s", Risks: []quarantine.Risk{quarantine.RiskLarge}, Plan: []byte("{}"), TTL: time.Hour, Requester: principal(t, "arn:aws:iam::123456789012:user/a")},
		"federated":      {Source: "s", Risks: []quarantine.Risk{quarantine.RiskLarge}, Plan: []byte("{}"), TTL: time.Hour, Reason: "r", Requester: fed},
		"bad id":         {ID: "UPPER CASE", Source: "s", Risks: []quarantine.Risk{quarantine.RiskLarge}, Plan: []byte("{}"), TTL: time.Hour, Reason: "r", Requester: principal(t, "arn:aws:iam::123456789012:user/a")},
		"plan too large": {Source: "s", Risks: []quarantine.Risk{quarantine.RiskLarge}, Plan: make([]byte, approval.MaxPlanBytes+1), TTL: time.Hour, Reason: "r", Requester: principal(t, "arn:aws:iam::123456789012:user/a")},
	} {
		if _, err := approval.New(req, t0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
