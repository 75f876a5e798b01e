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
	l.readNotStreamed("a")
	out, _, code := l.run(false, "verify")
	if code != 0 || strings.Contains(out, "MISMATCH") || !strings.Contains(out, "not yet ledgered: 1 item") {
		t.Fatalf("a payload read made a second ago (exit %d):\n%s", code, out)
	}
}

// readNotStreamed creates a record of prefix, ledgers and digests it, then
// records a payload read of it now that the stream has not delivered yet
// (the stream's lag, seconds in production): a new sealed version the
// ledger has not seen.
func (l *ledgerFixture) readNotStreamed(prefix string) {
	l.t.Helper()
	a := l.create(prefix)
	l.drain()
	l.digest()
	read, err := a.NotePayloadRead("alice", time.Now())
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.store.Replace(context.Background(), a, read); err != nil {
		l.t.Fatal(err)
	}
}
