package dynamostore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ledgerItemOf is r as the ledger holds it.
func ledgerItemOf(t testing.TB, r *quarantine.Record) ledger.Item {
	t.Helper()
	return storetest.LedgerItem(t, r)
}

// claimedPair is a sealed record of body quarantined at now (version 1)
// and its claim by ops (version 2).
func claimedPair(t testing.TB, now time.Time, body string) (r, next *quarantine.Record) {
	t.Helper()
	r = &quarantine.Record{DLQID: "src#k", Source: "src", IdempotencyKey: "k", KeyOrigin: quarantine.KeyFromBodyHash,
		Status: quarantine.StatusQuarantined, StatusSince: quarantine.At(now), Body: body, BodyEncoding: quarantine.EncodingUTF8,
		BodySHA256: quarantine.BodySHA256([]byte(body)), BodySize: int64(len(body)), AttemptCount: 1, RedriveCap: 3, Version: 1,
		Attempts:  []quarantine.Attempt{{At: quarantine.At(now), Stage: "consumer", Reason: "x", Actor: "ingest", Kind: quarantine.AttemptArrival}},
		FirstSeen: quarantine.At(now), LastSeen: quarantine.At(now)}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	next, err := r.Claim("ops", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return r, next
}

func TestLedgerVersionCheckDecodesAndChecksTransitions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r, next := claimedPair(t, now, `{"a":1}`)
	check := dynamostore.LedgerVersionCheck()
	v1, v2 := ledgerItemOf(t, r), ledgerItemOf(t, next)
	if err := check(nil, v1); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if err := check(v1, v2); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	forged := next.Clone()
	forged.Body = `{"a":2}`
	forged.BodySHA256 = quarantine.BodySHA256([]byte(forged.Body))
	if err := quarantine.SealRecord(forged); err != nil {
		t.Fatal(err)
	}
	if err := check(v1, ledgerItemOf(t, forged)); err == nil || !strings.Contains(err.Error(), "BodySHA256") {
		t.Fatalf("a forged version 2 re-sealed: %v", err)
	}
	bad := ledger.Item{"dlq_id": ledger.Str("src#k"), "version": ledger.Str("two")}
	if err := check(v1, bad); err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("an item that is no record: %v", err)
	}
	if err := check(nil, ledger.Item{"dlq_id": ledger.Str("#pol#src#p")}); err == nil || !strings.Contains(err.Error(), "not a sealed policy") {
		t.Fatalf("a policy item without its policy: %v", err)
	}
}

// BenchmarkLedgerVersionCheck is the hook's cost per ledgered version
// (Verify calls it once per version; the previous one is decoded once).
func BenchmarkLedgerVersionCheck(b *testing.B) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r, next := claimedPair(b, now, strings.Repeat(`{"a":1}`, 100))
	v1, v2 := ledgerItemOf(b, r), ledgerItemOf(b, next)
	check := dynamostore.LedgerVersionCheck()
	for b.Loop() {
		if err := check(nil, v1); err != nil {
			b.Fatal(err)
		}
		if err := check(v1, v2); err != nil {
			b.Fatal(err)
		}
	}
}
