package dlqctl_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A payload read recorded a moment ago (a new sealed version that the
// stream has not delivered to the ledger yet) is not yet ledgered, not a
// rewrite: verify must not report a legitimate change made while it runs
// as tampering. FAILS today: ledger.Verify's grace looks only at
// status_since and last_seen, which a payload read (NotePayloadRead),
// like every change that keeps the status, leaves as they were; so the
// read is named "rewritten" and verify exits 3.
func TestVerifyLedgerGraceCoversAPayloadReadNotYetStreamed(t *testing.T) {
	l := newLedgerFixture(t)
	a := l.create("a")
	l.drain()
	l.digest()
	read, err := a.NotePayloadRead("alice", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.store.Replace(context.Background(), a, read); err != nil {
		t.Fatal(err)
	}
	// Not drained: the stream's lag, seconds in production.
	out, _, code := l.run(false, "verify")
	if code != 0 || strings.Contains(out, "MISMATCH") || !strings.Contains(out, "not yet ledgered: 1 item") {
		t.Fatalf("a payload read made a second ago (exit %d):\n%s", code, out)
	}
}
