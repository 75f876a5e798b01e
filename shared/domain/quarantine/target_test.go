package quarantine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A record sealed before attempts could name a target still verifies: the
// field is left out of the canonical JSON when empty. A target, once
// sealed, cannot be changed or removed unnoticed.
func TestAttemptTargetIsSealedAndOldSealsVerify(t *testing.T) {
	t.Parallel()
	rec := sealedRecord(t, "k-1", validBody, fixtureTime)
	canon, err := quarantine.Canonical(rec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(canon), `"target"`) {
		t.Fatalf("an attempt without a target puts one in the canonical JSON: %s", canon)
	}
	before := rec.Seal
	if err := quarantine.SealRecord(rec); err != nil || rec.Seal != before {
		t.Fatalf("re-sealing a record without targets changed its seal: %v", err)
	}

	claimed, err := rec.Claim(quarantine.WithTarget(quarantine.WithApproval("arn:aws:iam::1:user/a", "apr-12345678"), "orders-v2"), fixtureTime.Add(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := claimed.Attempts[len(claimed.Attempts)-1]
	if a.Target != "orders-v2" || a.Approval != "apr-12345678" || a.Actor != "arn:aws:iam::1:user/a" || claimed.RedrivenBy != "arn:aws:iam::1:user/a" {
		t.Fatalf("claim entry: target %q approval %q actor %q (redriven by %q)", a.Target, a.Approval, a.Actor, claimed.RedrivenBy)
	}
	if err := quarantine.Verify(claimed); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*quarantine.Record){
		"changed": func(r *quarantine.Record) { r.Attempts[len(r.Attempts)-1].Target = "elsewhere" },
		"removed": func(r *quarantine.Record) { r.Attempts[len(r.Attempts)-1].Target = "" },
	} {
		c := claimed.Clone()
		change(c)
		var se *quarantine.SealError
		if err := quarantine.Verify(c); !errors.As(err, &se) {
			t.Errorf("target %s: Verify = %v, want a SealError", name, err)
		}
	}
}

func TestActorStringParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ actor, name, approval, target string }{
		{"alice", "alice", "", ""},
		{quarantine.WithApproval("alice", "apr-1"), "alice", "apr-1", ""},
		{quarantine.WithTarget("alice", "q2"), "alice", "", "q2"},
		{quarantine.WithTarget(quarantine.WithApproval("alice", "apr-1"), "q2"), "alice", "apr-1", "q2"},
		{quarantine.WithApproval(quarantine.WithTarget("alice", "q2"), "apr-1"), "alice", "apr-1", "q2"},
	} {
		if n, a, g := quarantine.ActorName(tc.actor), quarantine.ActorApproval(tc.actor), quarantine.ActorTarget(tc.actor); n != tc.name || a != tc.approval || g != tc.target {
			t.Errorf("%q: name %q approval %q target %q", tc.actor, n, a, g)
		}
	}
}

// No four_eyes setting leaves retarget out: an empty list, a list written
// before it existed. Other risks follow the list.
func TestRetargetAlwaysNeedsASecondPerson(t *testing.T) {
	for _, fe := range []map[quarantine.Risk]bool{nil, {}, {quarantine.RiskLarge: true}, {quarantine.RiskRetarget: true}} {
		s := &quarantine.Source{Name: "s", FourEyes: fe}
		if !s.NeedsSecondPerson(quarantine.RiskRetarget) {
			t.Errorf("four_eyes %v: retarget runs on one request", fe)
		}
		if want := fe == nil || fe[quarantine.RiskLarge]; s.NeedsSecondPerson(quarantine.RiskLarge) != want {
			t.Errorf("four_eyes %v: large needs a second person %v, want %v", fe, !want, want)
		}
	}
}
