package dlqctl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

var newestLine = regexp.MustCompile(`(?m)^ledger: newest digest #(\d+), SHA-256 ([0-9a-f]{64}), signed (\S+) \(record (\d+):([0-9a-f]{64}) for verify --offline --expect-digest\)$`)

// exportPrinting exports the ledger and returns the directory and the
// N:SHA256 of the newest digest as ledger export printed it.
func (l *ledgerFixture) exportPrinting() (dir, expect string) {
	l.t.Helper()
	dir = filepath.Join(l.t.TempDir(), "export")
	out, errOut, code := l.run(false, "ledger", "export", dir)
	m := newestLine.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != m[4] || m[2] != m[5] {
		l.t.Fatalf("ledger export (exit %d): %s%s", code, out, errOut)
	}
	return dir, m[1] + ":" + m[2]
}

// filterTable keeps the lines of DIR/table.jsonl that keep says to keep.
func filterTable(t *testing.T, dir string, keep func(id string) bool) {
	t.Helper()
	path := filepath.Join(dir, dlqctl.ExportTable)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		it, err := dl.ParseItem(line)
		if err != nil {
			t.Fatal(err)
		}
		if keep(it.S(dl.KeyAttr)) {
			out = append(append(out, line...), '\n')
		}
	}
	writeFile(t, path, out)
}

// Issue 25: a copy cut short (its newest digest, that digest's segment
// and the record it ledgered removed, the counters left out) with
// export.json edited to match, or deleted, verifies clean on its own
// (nothing in it is signed after its end), but --expect-digest of the
// digest the export printed names it, exit 3.
func TestVerifyOfflineExpectDigestNamesACopyCutShort(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.create("b")
	l.drain()
	l.digest()
	c := l.create("c")
	l.drain()
	l.digest()
	clean, expect := l.exportPrinting()
	if !strings.HasPrefix(expect, "3:") {
		t.Fatalf("export printed %s, want digest 3", expect)
	}
	if out, code := l.offline(clean, "--expect-digest", expect); code != 0 || !strings.Contains(out, "--expect-digest: digest 3 is in it") {
		t.Fatalf("the whole copy (exit %d):\n%s", code, out)
	}
	cut := func(t *testing.T, info func(dir string)) string {
		dir := filepath.Join(t.TempDir(), "copy")
		if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
			t.Fatal(err)
		}
		x := tamperable{t: t, dir: dir}
		two, three := x.digest(2), x.digest(3)
		kept := map[string]bool{}
		for _, h := range two.Shards {
			kept[h.SegmentKey] = true
		}
		for _, h := range three.Shards {
			if !kept[h.SegmentKey] {
				if err := os.Remove(x.path(h.SegmentKey)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.Remove(x.path(dl.DigestKey(3))); err != nil {
			t.Fatal(err)
		}
		filterTable(t, dir, func(id string) bool { return id != c.DLQID && !strings.HasPrefix(id, "#") })
		info(dir)
		return dir
	}
	for name, info := range map[string]func(dir string){
		"export.json edited": func(dir string) {
			writeFile(t, filepath.Join(dir, dlqctl.ExportInfoFile), []byte(`{"exported_at":"`+time.Now().UTC().Format(time.RFC3339)+
				`","ledger_read_start":"`+time.Now().UTC().Format(time.RFC3339)+`","table_scan_end":"`+time.Now().UTC().Format(time.RFC3339)+`","newest_digest":2}`))
		},
		"export.json deleted": func(dir string) {
			if err := os.Remove(filepath.Join(dir, dlqctl.ExportInfoFile)); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := cut(t, info)
			out, code := l.offline(dir)
			if code != 0 {
				t.Fatalf("the cut copy on its own (exit %d):\n%s", code, out)
			}
			mustContain(t, out, "the copy's completeness is unproven", "ledger: newest digest #2, ")
			out, code = l.offline(dir, "--expect-digest", expect)
			if code != dlqctl.ExitMismatch {
				t.Fatalf("--expect-digest %s (exit %d):\n%s", expect, code, out)
			}
			mustContain(t, out, "  MISMATCH ledger/digests/000000000003.json: expect-digest: --expect-digest "+expect+": digest 3 is not in the copy (its newest digest is #2)")
		})
	}
	// Malformed, it is a usage error.
	for _, bad := range []string{"3", "0:" + expect[2:], "3:abc"} {
		if _, errOut, code := l.run(true, "verify", "--offline", clean, "--public-key", filepath.Join(clean, "public-key.der"), "--expect-digest", bad); code != dlqctl.ExitUsage || !strings.Contains(errOut, "--expect-digest") {
			t.Errorf("--expect-digest %q: exit %d %s", bad, code, errOut)
		}
	}
	// Online it checks the bucket: digest 3 is there.
	if out, _, code := l.run(false, "verify", "--expect-digest", expect); code != 0 {
		t.Fatalf("online --expect-digest (exit %d):\n%s", code, out)
	}
	if out, _, code := l.run(false, "verify", "--expect-digest", "4:"+expect[2:]); code != dlqctl.ExitMismatch || !strings.Contains(out, "expect-digest: ") {
		t.Fatalf("online --expect-digest of a digest not written (exit %d):\n%s", code, out)
	}
}

// Issue 25: --as-of judges the copy as of a time the auditor gives: more
// than the digest age after its newest digest is digest-stale.
func TestVerifyOfflineAsOf(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	dir, _ := l.exportPrinting()
	d := tamperable{t: t, dir: dir}.digest(1)
	at, err := time.Parse(time.RFC3339Nano, d.At)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := l.offline(dir, "--as-of", at.Add(70*time.Minute).Format(time.RFC3339)); code != 0 {
		t.Fatalf("as of 70 minutes after the digest (exit %d):\n%s", code, out)
	}
	out, code := l.offline(dir, "--as-of", at.Add(76*time.Minute).Format(time.RFC3339))
	if code != dlqctl.ExitMismatch {
		t.Fatalf("as of 76 minutes after the digest (exit %d):\n%s", code, out)
	}
	mustContain(t, out, "  MISMATCH ledger/digests/000000000001.json: digest-stale: the newest signed digest (#1) is ", "more than 1h15m0s", "(--as-of)")
	for _, args := range [][]string{
		{"verify", "--offline", dir, "--public-key", filepath.Join(dir, "public-key.der"), "--as-of", "yesterday"},
		{"verify", "--offline", dir, "--public-key", filepath.Join(dir, "public-key.der"), "--signing-key-arn", "alias/x"},
	} {
		if _, errOut, code := l.run(true, args...); code != dlqctl.ExitUsage {
			t.Errorf("%v: exit %d %s", args, code, errOut)
		}
	}
	for _, flag := range []string{"--as-of", "--signing-key-arn"} {
		if _, errOut, code := l.run(false, "verify", flag, "2026-12-01T00:00:00Z"); code != dlqctl.ExitUsage || !strings.Contains(errOut, flag+" goes with --offline") {
			t.Errorf("online %s: exit %d %s", flag, code, errOut)
		}
	}
}

// foreignKeyID signs with the ledger's key but names another in the
// digests' key_id.
type foreignKeyID struct{ ledger.Signer }

const otherKey = "arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000"

func (foreignKeyID) KeyID() string { return otherKey }

// Issue 25: a digest whose key_id is not the configured key (signed with
// the right one) is named online; offline with --signing-key-arn, and
// without it a note says it was not checked.
func TestVerifyNamesADigestNamingAnotherKey(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.fns.Ledger.Signer = foreignKeyID{l.fns.Ledger.Signer}
	l.anchored("b")
	out, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	mustContain(t, out, "  MISMATCH ledger/digests/000000000002.json: digest-key: digest 2 names key_id \""+otherKey+"\", not the signing key arn:aws:kms:")
	if strings.Contains(out, "000000000001.json: digest-key") || strings.Contains(out, "digest-signature") {
		t.Fatalf("digest 1 names the key, and both verify:\n%s", out)
	}
	dir := l.export()
	keyARN := regexp.MustCompile(`trust: key (arn:aws:kms:\S+),`).FindStringSubmatch(out)
	if keyARN == nil {
		t.Fatalf("no key ARN in:\n%s", out)
	}
	off, code := l.offline(dir)
	if code != 0 || !strings.Contains(off, "the digests' key_id was not checked (--signing-key-arn ARN checks it)") {
		t.Fatalf("offline without --signing-key-arn (exit %d):\n%s", code, off)
	}
	off, code = l.offline(dir, "--signing-key-arn", keyARN[1])
	if code != dlqctl.ExitMismatch || !strings.Contains(off, "  MISMATCH ledger/digests/000000000002.json: digest-key: ") {
		t.Fatalf("offline --signing-key-arn (exit %d):\n%s", code, off)
	}
}

// counterKey is a state counter's key in the table.
func (l *ledgerFixture) counterKey() string {
	l.t.Helper()
	out, err := l.st.Clients.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		l.t.Fatal(err)
	}
	for _, it := range out.Items {
		if k, _ := it[dynamostore.KeyAttr].(*ddbtypes.AttributeValueMemberS); k != nil && strings.HasPrefix(k.Value, "#ctr#") && strings.Contains(k.Value, "#state#") {
			return k.Value
		}
	}
	l.t.Fatal("no state counter in the table")
	return ""
}

// Issue 25: the counters are recounted from the ledger: the lifecycle,
// also with counting behind the ledger, verifies with no problem; a
// counter rewritten in the table is counter-drift, online and offline.
func TestVerifyRecountsTheCounters(t *testing.T) {
	l := newLedgerFixture(t)
	a := l.create("a")
	l.next(a, park)
	l.anchored("b")
	out, _, code := l.run(false, "verify")
	if code != 0 || !regexp.MustCompile(`(?m)^counters: \d+ counters recounted from the ledger up to the checkpoints.*: 0 problems$`).MatchString(out) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// Counting behind the ledger: a segment ledgered, not counted.
	counts := l.fns.Ledger.Counts
	l.fns.Ledger.Counts = nil
	l.anchored("c")
	out, _, code = l.run(false, "verify")
	if code != 0 || !strings.Contains(out, "; 1 segment not counted yet") {
		t.Fatalf("counting behind (exit %d):\n%s", code, out)
	}
	if off, code := l.offline(l.export()); code != 0 || !strings.Contains(off, "; 1 segment not counted yet") {
		t.Fatalf("counting behind, offline (exit %d):\n%s", code, off)
	}
	l.fns.Ledger.Counts = counts
	l.streamed("d")
	out, _, code = l.run(false, "verify")
	if code != 0 || strings.Contains(out, "not counted yet") {
		t.Fatalf("counted up (exit %d):\n%s", code, out)
	}
	key := l.counterKey()
	if _, err := l.st.Clients.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(l.table),
		Key:              map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: key}},
		UpdateExpression: aws.String("ADD n :n"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: "3"}}}); err != nil {
		t.Fatal(err)
	}
	out, _, code = l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("a counter rewritten (exit %d):\n%s", code, out)
	}
	mustContain(t, out, "  MISMATCH "+key+": counter-drift: the ledgered changes count ", "counters: ", ": 1 problem\n")
	off, code := l.offline(l.export())
	if code != dlqctl.ExitMismatch || !strings.Contains(off, "  MISMATCH "+key+": counter-drift: ") {
		t.Fatalf("offline (exit %d):\n%s", code, off)
	}
}

// docs/ledger.md's offline commands, run as it shows them: the export
// prints the digest to record, and verify --offline with it, the export's
// time and the key's ARN passes, checking each.
func TestDocsLedgerOfflineCommands(t *testing.T) {
	raw, err := os.ReadFile("../../docs/ledger.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "**Offline, without AWS credentials.**")
	_, after, ok2 := strings.Cut(after, "```\n")
	block, _, ok3 := strings.Cut(after, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/ledger.md has no offline command block")
	}
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "./dlqctl ledger export ") || !strings.Contains(lines[1], " --expect-digest ") {
		t.Fatalf("the offline block:\n%s", block)
	}
	l := newLedgerFixture(t)
	l.anchored("a")
	t.Chdir(t.TempDir())
	args := func(line string) []string {
		return strings.Fields(os.ExpandEnv(strings.ReplaceAll(strings.TrimPrefix(line, "./dlqctl "), `"`, "")))
	}
	out, errOut, code := l.run(false, args(lines[0])...)
	m := newestLine.FindStringSubmatch(out)
	key := regexp.MustCompile(`(?m)^trust: key (arn:aws:kms:\S+),`).FindStringSubmatch(out)
	times := copyLine.FindStringSubmatch(out) // ledgerreadstart_test.go
	if code != 0 || m == nil || key == nil || times == nil {
		t.Fatalf("%s (exit %d):\n%s%s", lines[0], code, out, errOut)
	}
	t.Setenv("DIGEST", m[4]+":"+m[5])
	t.Setenv("READ_START", times[3])
	t.Setenv("EXPORTED_AT", times[4])
	t.Setenv("KEY_ARN", key[1])
	out, errOut, code = l.run(true, args(lines[1])...)
	if code != 0 || !strings.Contains(out, "--expect-digest: digest 1 is in it") || strings.Contains(out, "key_id was not checked") || !strings.Contains(out, "(--as-of)") ||
		!strings.Contains(out, "the grace runs back from "+times[3]+" (--read-start") {
		t.Fatalf("%s (exit %d):\n%s%s", lines[1], code, out, errOut)
	}
}
