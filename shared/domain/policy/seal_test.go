package policy

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// pinnedPolicy is a policy with every field fixed, so its seal is a
// constant: a change to the seal function or the policy's JSON shows here.
func pinnedPolicy() *Policy {
	at := quarantine.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return &Policy{
		ID: "pol-000000000001", Source: "orders", Classes: []quarantine.Class{quarantine.ClassExhausted},
		Signatures: []string{"sig-a"}, MinAgeSeconds: 60, MaxPerRun: 10, RatePerSecond: 2,
		ExpiresAt: at, CreatedBy: "alice", CreatedAt: at, Threshold: DefaultThreshold, MinSample: DefaultMinSample,
		State: StateActive, Version: 1,
		History: []Change{{At: at, Actor: "alice", Action: "created", Note: "pin"}},
	}
}

func TestSealIsPinned(t *testing.T) {
	t.Parallel()
	p := pinnedPolicy()
	if err := p.seal(); err != nil {
		t.Fatal(err)
	}
	const want = "37a91c9f24bc2c6e4c656015497c80489a67bf94b42f99610bcacfa82a6d6dda"
	if p.Seal != want {
		t.Fatalf("seal = %s, want %s", p.Seal, want)
	}
	if err := p.Verify(); err != nil {
		t.Fatal(err)
	}
	p.SuspendedReason = "changed"
	if err := p.Verify(); err == nil {
		t.Fatal("Verify accepted a changed policy")
	}
}
