package dynamostore

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
)

// policyItemOf is p's table item as PolicyStore writes it, as the ledger
// records it.
func policyItemOf(t *testing.T, p *policy.Policy) ledger.Item {
	t.Helper()
	sdk, err := (&PolicyStore{}).item(p)
	if err != nil {
		t.Fatal(err)
	}
	it, err := LedgerItem(sdk)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// reseal is a forger's edit of p: the change applied, the seal recomputed.
func reseal(t *testing.T, p *policy.Policy, edit func(*policy.Policy)) *policy.Policy {
	t.Helper()
	c := *p
	c.History = append([]policy.Change(nil), p.History...)
	edit(&c)
	s, err := c.ComputeSeal()
	if err != nil {
		t.Fatal(err)
	}
	c.Seal = s
	return &c
}

func TestLedgerVersionCheckChecksPolicies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	must := func(p *policy.Policy, err error) *policy.Policy {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := must(policy.New(policy.Spec{Source: "src", Signatures: []string{"sig-a"}, MaxPerRun: 10, ExpiresAt: now.Add(24 * time.Hour)}, "alice", now))
	suspended := must(v1.Suspend("dlqq-breaker", "3 of 10 came back", now.Add(time.Minute)))
	resumed := must(suspended.Resume("bob", "fixed upstream", 10, 3, now.Add(2*time.Minute)))
	revoked := must(resumed.Revoke("bob", "done", now.Add(3*time.Minute)))
	revokedSuspended := must(must(v1.Suspend("ops", "pause", now)).Revoke("ops", "stop", now))
	// A forger's version after the revoke: active again, the history
	// entry added, the chain right, sealed.
	reactivated := reseal(t, revoked, func(p *policy.Policy) {
		p.State, p.Version, p.PrevSeal = policy.StateActive, revoked.Version+1, revoked.Seal
		p.History = append(p.History, policy.Change{At: revoked.History[0].At, Actor: "eve", Action: "resumed", Note: "x"})
	})
	next := func(edit func(*policy.Policy)) *policy.Policy {
		return reseal(t, v1, func(p *policy.Policy) {
			p.Version, p.PrevSeal = 2, v1.Seal
			p.History = append(p.History, policy.Change{At: v1.History[0].At, Actor: "eve", Action: "suspended"})
			p.State = policy.StateSuspended
			edit(p)
		})
	}
	garbage := policyItemOf(t, v1)
	raw := strings.Replace(garbage.S(policyAttr), v1.Seal, "not-a-seal-of-anything", 1)
	garbage[policyAttr] = ledger.Str(raw)
	noPolicy := ledger.Item{KeyAttr: ledger.Str("#pol#src#" + v1.ID), VersionAttr: ledger.Num("2"), "seal": ledger.Str("x")}
	moved := policyItemOf(t, v1)
	moved[KeyAttr] = ledger.Str("#pol#other#" + v1.ID)

	ok := []struct {
		name       string
		prev, next *policy.Policy
	}{
		{"created", nil, v1},
		{"first ledgered at a later version (pre-ledger history)", nil, resumed},
		{"breaker trip (suspend)", v1, suspended},
		{"resume", suspended, resumed},
		{"revoke an active one", resumed, revoked},
		{"revoke a suspended one", must(v1.Suspend("ops", "pause", now)), revokedSuspended},
		{"revoke at once", v1, must(v1.Revoke("ops", "wrong", now))},
	}
	check := LedgerVersionCheck()
	for _, c := range ok {
		var prev ledger.Item
		if c.prev != nil {
			prev = policyItemOf(t, c.prev)
		}
		if err := check(prev, policyItemOf(t, c.next)); err != nil {
			t.Errorf("%s: a real policy transition refused: %v", c.name, err)
		}
	}

	bad := []struct {
		name       string
		prev, next ledger.Item
		want       string
	}{
		{"garbage seal", nil, garbage, "seal"},
		{"garbage seal as a next version", policyItemOf(t, v1), garbage, "seal"},
		{"no policy in the item (the review's forgery)", policyItemOf(t, v1), noPolicy, "policy"},
		{"key of another policy", nil, moved, "key"},
		{"revoked becomes active", policyItemOf(t, revoked), policyItemOf(t, reactivated), "revoked"},
		{"max_per_run changed, resealed", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.MaxPerRun = 10000 })), "settings"},
		{"selector widened, resealed", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.Source, p.Signatures = "src", nil; p.Classes = nil })), "settings"},
		{"creator changed", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.CreatedBy = "eve" })), "created_by"},
		{"creation time changed", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.CreatedAt = p.ExpiresAt })), "created_at"},
		{"id changed", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.ID = "pol-other" })), "id"},
		{"no history entry", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.History = p.History[:1] })), "history"},
		{"history rewritten", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.History[0].Actor = "eve" })), "history"},
		{"prev_seal not the version before", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.PrevSeal = "x" })), "prev_seal"},
		{"version skipped", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.Version = 3 })), "version"},
		{"state without its action", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.State = policy.StateRevoked })), "state"},
		{"unknown state", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.State = "armed" })), "state"},
		{"baseline moved without a resume", policyItemOf(t, v1), policyItemOf(t, next(func(p *policy.Policy) { p.BaselineSent = 100 })), "baseline"},
	}
	for _, c := range bad {
		err := check(c.prev, c.next)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
