package dlqctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ledgerFixture is the embedded stack with the ledger function running
// in-process on the table's stream: records are written through the
// store, drained into the ledger and anchored by a digest.
type ledgerFixture struct {
	t      *testing.T
	st     *embedded.Stack
	fns    *localrunner.Functions
	poller *localrunner.StreamPoller
	store  *dynamostore.Store
	table  string
	// now is dlqctl's clock (nil: the real time, which the ledger's
	// entries carry).
	now func() time.Time
	// partitionBytes is dlqctl's App.PartitionBytes (0: its default);
	// objectConcurrency its App.ObjectConcurrency.
	partitionBytes    int64
	objectConcurrency int
	// kms, when set, is dlqctl's KMS client (countVerifyMac).
	kms *kms.Client
}

func newLedgerFixture(t *testing.T) *ledgerFixture {
	t.Helper()
	st := embedded.ForTest(t, embedded.Options{})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	fns, err := localrunner.NewFunctions(st, nil, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture writes its records by hand, without writer proofs: its
	// ledger does not say they are on, nor record writer keys
	// (writerkeys_test.go turns them on).
	fns.Ledger.Config.WriterProofs, fns.Ledger.Config.WriterKeys = false, nil
	fns.LedgerConfig.Ledger.WriterProofs, fns.LedgerConfig.Ledger.WriterKeys = false, nil
	p := fns.LedgerPoller(st.Clients, fns.Ledger.HandleStream)
	p.BatchSize = 1000 // one segment a shard a drain
	return &ledgerFixture{t: t, st: st, fns: fns, poller: p, table: st.Names["QuarantineTable"],
		store: dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])}
}

func (l *ledgerFixture) create(prefix string) *quarantine.Record {
	l.t.Helper()
	r := storetest.Record(l.t, storetest.UniqueID(prefix))
	if err := l.store.Create(context.Background(), r); err != nil {
		l.t.Fatal(err)
	}
	return r
}

// next writes r's next version, made by a real transition, in place of r,
// as the functions do, and returns it.
func (l *ledgerFixture) next(r *quarantine.Record, transition func(*quarantine.Record) (*quarantine.Record, error)) *quarantine.Record {
	l.t.Helper()
	n, err := transition(r)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.store.Replace(context.Background(), r, n); err != nil {
		l.t.Fatal(err)
	}
	return n
}

// park and unpark are the operator's transitions.
func park(r *quarantine.Record) (*quarantine.Record, error) {
	return r.ParkManual("operator:test", "by hand", r.LastSeen.Add(time.Minute))
}

func unpark(r *quarantine.Record) (*quarantine.Record, error) {
	// As a source whose four_eyes leaves parked out unparks: one person.
	return r.Unpark(quarantine.WithApproval("operator:test", quarantine.FourEyesOff), "back", r.StatusSince.Add(time.Minute))
}

// rewrite puts r back with its failure reason changed and its seal
// recomputed, through the SDK: a record rewritten behind the functions by
// someone who may write the table.
func (l *ledgerFixture) rewrite(r *quarantine.Record) {
	l.t.Helper()
	forged := *r
	forged.FailureReason = "nothing to see"
	if err := quarantine.SealRecord(&forged); err != nil {
		l.t.Fatal(err)
	}
	l.put(&forged)
}

// put writes r to the table through the SDK, as it is.
func (l *ledgerFixture) put(r *quarantine.Record) {
	l.t.Helper()
	item, err := dynamostore.Marshal(r)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.st.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
		l.t.Fatal(err)
	}
}

// streamed creates a record of prefix and lets the ledger take its change
// in (not yet anchored by a digest).
func (l *ledgerFixture) streamed(prefix string) {
	l.t.Helper()
	l.create(prefix)
	l.drain()
}

// anchored creates a record of prefix, lets the ledger take it in and
// signs a digest over it.
func (l *ledgerFixture) anchored(prefix string) {
	l.t.Helper()
	l.streamed(prefix)
	l.digest()
}

func (l *ledgerFixture) drain() {
	l.t.Helper()
	if _, err := l.poller.Drain(context.Background()); err != nil {
		l.t.Fatalf("drain: %v", err)
	}
}

func (l *ledgerFixture) digest() {
	l.t.Helper()
	if rep, err := l.fns.Ledger.Digest(context.Background()); err != nil || !rep.Written {
		l.t.Fatalf("digest: %+v %v", rep, err)
	}
}

// run runs dlqctl on the stack's clients (offline: a Connect that fails
// the test), now being the real time (the ledger's entries carry it).
func (l *ledgerFixture) run(offline bool, args ...string) (string, string, int) {
	l.t.Helper()
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.IsTerminal = func() bool { return false }
	if l.now != nil {
		a.Now = l.now
	}
	a.PartitionBytes, a.ObjectConcurrency = l.partitionBytes, l.objectConcurrency
	a.CheckpointResample = -1 // a checkpoint's reads counted exactly: none at random but its one sample
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		if offline {
			l.t.Errorf("an offline command connected to AWS: %v", args)
			return nil, errors.New("no AWS call offline")
		}
		clients := l.st.Clients
		if l.kms != nil {
			c := *clients
			c.KMS = l.kms
			clients = &c
		}
		return &dlqctl.Clients{Clients: clients, Lambda: lambda.NewFromConfig(l.st.AWS),
			CloudFormation: cloudformation.NewFromConfig(l.st.AWS), STS: sts.NewFromConfig(l.st.AWS), Local: true}, nil
	}
	base := []string{"--actor", "alice", "--table", l.table}
	if !offline {
		base = append(base, "--ledger-bucket", l.fns.LedgerConfig.Bucket, "--signing-key", l.fns.LedgerConfig.SigningKey)
	} else {
		base = append(base, "--ledger-bucket", "", "--signing-key", "")
	}
	code := a.Main(context.Background(), append(base, args...))
	return out.String(), errw.String(), code
}

// export writes the ledger's export into a new directory.
func (l *ledgerFixture) export() string {
	l.t.Helper()
	dir := filepath.Join(l.t.TempDir(), "export")
	out, errOut, code := l.run(false, "ledger", "export", dir)
	if code != 0 || !strings.HasPrefix(out, "exported ") {
		l.t.Fatalf("ledger export (exit %d): %s%s", code, out, errOut)
	}
	return dir
}

func (l *ledgerFixture) offline(dir string, args ...string) (string, int) {
	l.t.Helper()
	out, errOut, code := l.run(true, append([]string{"verify", "--offline", dir, "--public-key", filepath.Join(dir, "public-key.der")}, args...)...)
	if code != 0 && code != dlqctl.ExitMismatch {
		l.t.Fatalf("verify --offline (exit %d): %s%s", code, out, errOut)
	}
	return out, code
}

var signedAgo = regexp.MustCompile(`signed [0-9hms.]+ ago`)

// firstLines are verify's two summary lines, the digest's age left out.
func firstLines(out string) string {
	lines := strings.SplitN(out, "\n", 3)
	if len(lines) < 2 {
		return out
	}
	return lines[0] + "\n" + signedAgo.ReplaceAllString(lines[1], "signed … ago")
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

// A clean ledger: online and offline verify find nothing and count the
// same; -o json carries the ledger's part.
func TestVerifyLedgerClean(t *testing.T) {
	l := newLedgerFixture(t)
	a, _ := l.create("a"), l.create("b")
	l.next(a, park)
	l.drain()
	l.digest()
	out, errOut, code := l.run(false, "verify")
	if code != 0 {
		t.Fatalf("verify (exit %d): %s%s", code, out, errOut)
	}
	want := regexp.MustCompile(`^verified 2 records \(0 archived stubs\): 0 problems\nledger: 3 versions in 1 segment of 1 shard, 1 digest \(newest #1, signed [0-9hms.]+ ago\): 0 problems\n` +
		`ledger: newest digest #1, SHA-256 ([0-9a-f]{64}), signed \S+Z \(record 1:([0-9a-f]{64}) for verify --offline --expect-digest\)\n` +
		`counters: [1-9][0-9]* counters? recounted from the ledger up to the checkpoints(; not recounted: [^\n]*)?: 0 problems\n` +
		`trust: table \S+ \(flag --table\), ledger bucket \S+ \(flag --ledger-bucket\), signing key \S+ \(flag --signing-key\)\n` +
		`trust: key arn:aws:kms:\S+, public key SHA-256 [0-9a-f]{64} \(not pinned: record it and pass --key-fingerprint\)\n$`)
	if !want.MatchString(out) {
		t.Fatalf("verify:\n%s", out)
	}
	dir := l.export()
	off, code := l.offline(dir)
	if code != 0 || firstLines(off) != firstLines(out) {
		t.Fatalf("offline (exit %d) says\n%s\nonline says\n%s", code, off, out)
	}
	js, _, code := l.run(false, "verify", "-o", "json")
	mustContain(t, js, `"versions": 3`, `"segments": 1`, `"shards": 1`, `"digests": 1`, `"newest_digest": 1`, `"newest_digest_age_seconds"`, `"public_key": "signing key `)
	if code != 0 {
		t.Fatalf("verify -o json exit %d", code)
	}
	// A ledger that cannot be read, or a key that is not the stack's, is
	// an error, never a pass.
	if out, errOut, code := l.run(false, "--ledger-bucket", "no-such-bucket", "verify"); code != dlqctl.ExitFailure || !strings.Contains(errOut, "ledger bucket no-such-bucket") {
		t.Fatalf("unreadable ledger (exit %d): %s%s", code, out, errOut)
	}
	if out, errOut, code := l.run(false, "--signing-key", "alias/no-such-key", "verify"); code != dlqctl.ExitFailure || !strings.Contains(errOut, "signing key alias/no-such-key") {
		t.Fatalf("unknown key (exit %d): %s%s", code, out, errOut)
	}
}

// A record rewritten and re-sealed through the SDK after the ledger saw
// it (and the ledger saw the rewrite too), and a record deleted: each
// named, online and offline.
func TestVerifyLedgerNamesRewriteAndDeletion(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	a, b := l.create("a"), l.create("b")
	l.anchored("c")
	l.rewrite(a)
	if _, err := l.st.Clients.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(l.table),
		Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: b.DLQID}}}); err != nil {
		t.Fatal(err)
	}
	l.drain()
	out, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	mustContain(t, out, "verified 2 records (0 archived stubs): 2 problems\n", "): 2 problems\n",
		"  MISMATCH "+a.DLQID+": rewritten: ", "  MISMATCH "+b.DLQID+": deleted ", "  not yet anchored: 2 changes, oldest ")
	off, code := l.offline(l.export())
	if code != dlqctl.ExitMismatch || firstLines(off) != firstLines(out) {
		t.Fatalf("offline (exit %d):\n%s", code, off)
	}
}

// Verify checks the keys in partitions when the ledger and the table are
// larger than one (App.PartitionBytes, here 1 KiB): online and offline it
// reports what one partition reports, line for line, and leaves no file
// behind in TMPDIR.
func TestVerifyInPartitionsReportsWhatOnePartitionReports(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	l := newLedgerFixture(t)
	ctx := context.Background()
	a := l.create("a")
	a2 := l.next(a, park)
	l.next(a2, unpark)
	b := l.create("b")
	for _, p := range []string{"c", "d", "e", "f"} {
		l.create(p)
	}
	l.anchored("g")
	l.rewrite(a2)
	if _, err := l.st.Clients.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(l.table),
		Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: b.DLQID}}}); err != nil {
		t.Fatal(err)
	}
	l.drain()
	l.digest()
	export := l.export()
	one, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d:\n%s", code, one)
	}
	mustContain(t, one, "  MISMATCH "+a.DLQID+": ", "  MISMATCH "+b.DLQID+": deleted ")
	oneOff, _ := l.offline(export)
	l.partitionBytes = 1 << 10
	many, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch || signedAgo.ReplaceAllString(many, "") != signedAgo.ReplaceAllString(one, "") {
		t.Fatalf("in partitions (exit %d):\n%s\nin one:\n%s", code, many, one)
	}
	if manyOff, _ := l.offline(export); signedAgo.ReplaceAllString(manyOff, "") != signedAgo.ReplaceAllString(oneOff, "") {
		t.Fatalf("offline in partitions:\n%s\nin one:\n%s", manyOff, oneOff)
	}
	js, _, _ := l.run(false, "verify", "-o", "json")
	var rep struct {
		Ledger struct{ Partitions int } `json:"ledger"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Ledger.Partitions < 4 {
		t.Fatalf("partitions %d (%v):\n%s", rep.Ledger.Partitions, err, js)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}

// An insider moves a shard's head item forward, so that the ledger would
// skip the changes after it: it ledgers them all the same (late), and
// verify names the tampering.
func TestTheLedgerRebuildsAHeadMovedForward(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	a := l.create("a")
	l.drain()
	l.digest()
	heads := 0
	items, err := l.st.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items.Items {
		id := it["dlq_id"].(*ddbtypes.AttributeValueMemberS).Value
		if !strings.HasPrefix(id, dynamostore.LedgerHeadPrefix) {
			continue
		}
		heads++
		if _, err := l.st.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.table),
			Key:                       map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: id}},
			UpdateExpression:          aws.String("SET last_seq = :s"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("9", 40)}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if heads == 0 {
		t.Fatal("no head item to move")
	}
	a2 := l.next(a, park)
	fresh := l.create("f")
	l.drain()
	out, _, code := l.run(false, "verify")
	// The ledger proves a head it did not write itself against the bucket
	// before writing after it (issue 25): the moved head is not proven, so
	// it is rebuilt from the chain, every later change is ledgered after
	// the chain's real end, and nothing is lost or named.
	if code != dlqctl.ExitOK {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	if strings.Contains(out, a2.DLQID) || strings.Contains(out, fresh.DLQID) {
		t.Fatalf("the records written after the head moved are ledgered, and not named:\n%s", out)
	}
	after, err := l.st.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range after.Items {
		id := it["dlq_id"].(*ddbtypes.AttributeValueMemberS).Value
		if strings.HasPrefix(id, dynamostore.LedgerHeadPrefix) && it["last_seq"].(*ddbtypes.AttributeValueMemberS).Value == strings.Repeat("9", 40) {
			t.Fatalf("head %s still says what was written behind the ledger", id)
		}
	}
}

// Changes ledgered after the newest digest are not yet anchored: said,
// with their age, and not a problem.
func TestVerifyLedgerNotYetAnchored(t *testing.T) {
	l := newLedgerFixture(t)
	a := l.create("a")
	l.drain()
	l.digest()
	l.next(a, park)
	l.streamed("b")
	out, _, code := l.run(false, "verify")
	if code != 0 {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	mustContain(t, out, ": 0 problems\nledger: 3 versions in 2 segments of 1 shard, 1 digest (newest #1, signed ", "  not yet anchored: 2 changes, oldest ")
	if !regexp.MustCompile(`not yet anchored: 2 changes, oldest [0-9hms.]+ old\n`).MatchString(out) {
		t.Fatalf("no age:\n%s", out)
	}
}

// A copy whose newest digests were left out leaves changes waiting for a
// digest: past an hour, verify says so in a note, and a newest digest
// older than the ledger's hourly bound (75 minutes) is a problem: the
// ledger signs one at least hourly, so a copy exported without its newest
// digests, or after the digest schedule stopped, does not verify.
func TestVerifyOfflineNotesAStaleAnchor(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("a")
	l.streamed("b")
	if out, code := l.offline(l.export()); code != 0 || strings.Contains(out, "changes have waited") {
		t.Fatalf("fresh (exit %d):\n%s", code, out)
	}
	// Exported 2 hours later (verify --offline judges a copy as of its
	// export, not as of the day it runs).
	l.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	out, code := l.offline(l.export())
	if code != 3 {
		t.Fatalf("exit %d, want 3 (a stale digest):\n%s", code, out)
	}
	mustContain(t, out, "digest-stale: the newest signed digest (#1) is 2h0m", "  not yet anchored: 1 change, oldest 2h", "  note: changes have waited 2h", "lacks its newest digests")
}

func TestVerifyLedgerSettings(t *testing.T) {
	l := &ledgerFixture{t: t}
	for _, args := range [][]string{
		{"verify"},                           // no ledger bucket
		{"verify", "--offline", t.TempDir()}, // no public key
		{"verify", "--public-key", "k.der"},
		{"ledger", "export", t.TempDir()},
	} {
		_, errOut, code := l.run(true, args...)
		if code != dlqctl.ExitUsage {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
