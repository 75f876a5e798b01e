package dynamostore

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// TestLayoutIsStable pins every key format byte for byte: existing items,
// and the template's indexes, depend on them.
func TestLayoutIsStable(t *testing.T) {
	at := time.Date(2026, 11, 29, 13, 7, 0, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		key  quarantine.CounterKey
		want string
		ttl  int64
	}{
		{quarantine.StateCounterKey("inv", quarantine.StatusParked, quarantine.ClassPoison, 3), "#ctr#inv#state#PARKED#poison#3", 0},
		{quarantine.OpenCounterKey("inv", "consumer|timeout|v#", 0), "#ctr#inv#open#consumer|timeout|v##0", 0},
		{quarantine.BucketCounterKey("inv", quarantine.CounterArrivals, at, 7), "#ctr#inv#arrivals#2026-11-29T12:07#7", at.Add(48 * time.Hour).Unix()},
		{quarantine.BucketCounterKey("inv", quarantine.CounterResolved, at.Add(30*time.Second), 1), "#ctr#inv#resolved#2026-11-29T12:07#1", at.Add(48 * time.Hour).Unix()},
		{quarantine.HeldCounterKey("inv", 5), "#ctr#inv#held#5", 0},
		{quarantine.PolicyCounterKey("inv", "p1", quarantine.CounterPolicySent, 2), "#ctr#inv#policy-sent#p1#2", 0},
		{quarantine.PolicyCounterKey("inv", "p1", quarantine.CounterPolicyCameBack, 2), "#ctr#inv#policy-cameback#p1#2", 0},
	} {
		if got := CounterItemKey(c.key); got != c.want {
			t.Errorf("key %+v = %q, want %q", c.key, got, c.want)
		}
		if got := counterExpiry(c.key); got != c.ttl {
			t.Errorf("expiry of %q = %d, want %d", c.want, got, c.ttl)
		}
	}
	if got := OpenCounterPartition("inv"); got != "CTR#OPEN#inv" {
		t.Errorf("open partition = %q", got)
	}
	if got, p := policyKey("inv", "p1"), PolicyPartition("inv"); got != "#pol#inv#p1" || p != "#pol#inv" {
		t.Errorf("policy key %q, partition %q", got, p)
	}
	for id, want := range map[string]bool{"inv#k": true, "#ctr#inv#held#0": false, "#pol#inv#p1": false, "": false} {
		if IsRecordKey(id) != want {
			t.Errorf("IsRecordKey(%q) = %v", id, !want)
		}
	}
}
