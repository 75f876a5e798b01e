package dlqctl_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// R2-5: a change made while verify reads (after its ledger read began)
// is not yet ledgered however long the table scan takes.
func TestVerifyLedgerGraceRunsFromTheLedgerRead(t *testing.T) {
	l := newLedgerFixture(t)
	l.readNotStreamed("a")
	// The first reading of the clock (before the ledger read) is now;
	// every later one is 10 minutes on: a long scan.
	var calls atomic.Int64
	start := time.Now()
	l.now = func() time.Time {
		if calls.Add(1) == 1 {
			return start
		}
		return start.Add(10 * time.Minute)
	}
	out, _, code := l.run(false, "verify")
	if code != 0 || strings.Contains(out, "MISMATCH") || !strings.Contains(out, "not yet ledgered: 1 item") {
		t.Fatalf("a change made as the ledger read began, the scan ending 10 minutes later (exit %d):\n%s", code, out)
	}
}

// R2-3, issue 25: an export says when it was taken (export.json), but
// that file is not signed: verify --offline judges the copy as of
// --as-of (the auditor's own record of when it was taken), or now, and
// export.json is only information.
func TestVerifyOfflineJudgesTheCopyAsOfItsExport(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.streamed("b")
	dir := l.export()
	exported := time.Now().UTC().Format(time.RFC3339Nano)
	var ex map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, dlqctl.ExportInfoFile))
	if err != nil || json.Unmarshal(raw, &ex) != nil {
		t.Fatalf("export.json: %v %s", err, raw)
	}
	for _, k := range []string{"exported_at", "ledger_read_start", "table_scan_end"} {
		if s, _ := ex[k].(string); s == "" {
			t.Errorf("export.json %s missing: %s", k, raw)
		}
	}
	if n, _ := ex["newest_digest"].(float64); n != 1 {
		t.Errorf("export.json newest_digest: %s", raw)
	}
	// A year later.
	l.now = func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
	out, code := l.offline(dir, "--as-of", exported)
	if code != 0 {
		t.Fatalf("a year-old copy --as-of its export (exit %d):\n%s", code, out)
	}
	mustContain(t, out, "export.json (unsigned, not trusted) says the copy was exported at ", "the copy is judged as of "+exported[:19])
	out, code = l.offline(dir)
	if code != dlqctl.ExitMismatch {
		t.Fatalf("a year-old copy judged as of now (exit %d):\n%s", code, out)
	}
	mustContain(t, out, "  MISMATCH ledger/digests/000000000001.json: digest-stale: ", "the copy is judged as of now")
	// Without export.json: the same.
	if err := os.Remove(filepath.Join(dir, dlqctl.ExportInfoFile)); err != nil {
		t.Fatal(err)
	}
	if out, code := l.offline(dir, "--as-of", exported); code != 0 || strings.Contains(out, "export.json") {
		t.Fatalf("a year-old copy without export.json --as-of its export (exit %d):\n%s", code, out)
	}
	if out, code := l.offline(dir); code != dlqctl.ExitMismatch || !strings.Contains(out, "digest-stale") {
		t.Fatalf("a year-old copy without export.json, as of now (exit %d):\n%s", code, out)
	}
}

// R2-3: a copy whose newest digest was already old when it was exported
// (a stopped schedule, or a copy cut short) is named, unless
// --max-digest-age allows it or turns the check off.
func TestVerifyOfflineMaxDigestAge(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.now = func() time.Time { return time.Now().Add(2 * time.Hour) } // exported 2 hours after the digest
	dir := l.export()
	out, code := l.offline(dir)
	if code != dlqctl.ExitMismatch || !strings.Contains(out, "digest-stale") {
		t.Fatalf("exit %d, want digest-stale:\n%s", code, out)
	}
	for _, age := range []string{"3h", "0"} {
		if out, code := l.offline(dir, "--max-digest-age", age); code != 0 {
			t.Errorf("--max-digest-age %s: exit %d:\n%s", age, code, out)
		}
	}
	if _, errOut, code := l.run(true, "verify", "--offline", dir, "--public-key", filepath.Join(dir, "public-key.der"), "--max-digest-age", "-1m"); code != dlqctl.ExitUsage {
		t.Errorf("--max-digest-age -1m: exit %d %s", code, errOut)
	}
}

// R2-3 (R2-7): the copy holds payloads: files 0600, directories 0700.
func TestLedgerExportIsPrivate(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	dir := l.export()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// R2-4: verify prints the ids of the pre-ledger records, as it prints
// the pending ones.
func TestVerifyPrintsPreLedgerIDs(t *testing.T) {
	l := newLedgerFixture(t)
	a := l.create("a")
	b := l.create("b")
	if _, err := l.fns.Ledger.Baseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.digest()
	out, _, code := l.run(false, "verify")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	mustContain(t, out, "pre-ledger: 2 records", "pre-ledger: "+a.DLQID+", unproven before ", "pre-ledger: "+b.DLQID+", unproven before ")
}

// R2-3: a copy that holds fewer digests than its export.json says it was
// exported with was cut short after the export: named.
func TestVerifyOfflineNamesDigestsDroppedFromTheCopy(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.create("b")
	l.drain()
	l.digest()
	dir := l.export()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(ledger.DigestKey(2)))); err != nil {
		t.Fatal(err)
	}
	out, code := l.offline(dir)
	if code != dlqctl.ExitMismatch || !strings.Contains(out, "digest-gap: the copy's newest digest is #1; export.json says it was exported with #2") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
