package dlqctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture is a stack with a known data set: source "orders", fixed times.
type fixture struct {
	st    *embedded.Stack
	store *dynamostore.Store
	clock *clock.Fake
	ids   map[string]string
	// function is the redrive function the commands use (startRedrive).
	function string
	// clients, when set, are the CLI's clients (readOnly).
	clients *awsclients.Clients
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	f := &fixture{st: st, store: dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"]),
		clock: clock.NewFake(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)), ids: map[string]string{}}
	src := &quarantine.Source{Name: "orders", ARN: "arn:aws:sqs:us-east-1:000000000000:orders", IdempotencyPointer: "/id", RedriveCap: 3}
	q := ingest.NewQuarantiner(f.store, s3store.New(st.Clients.S3, st.Names["PayloadBucket"], ""), f.clock.Now,
		ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"orders": src}})
	add := func(id, reason string) {
		attrs := map[string]quarantine.Attribute{}
		if reason != "" {
			attrs[quarantine.AttrFailureReason] = quarantine.Attribute{DataType: "String", StringValue: reason}
		}
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m-" + id, SourceARN: src.ARN, Attributes: attrs, Body: []byte(`{"id":"` + id + `","secret":"PAYLOAD-VALUE-` + id + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		f.ids[id] = out.Record.DLQID
		f.clock.Advance(time.Minute)
	}
	for _, id := range []string{"o1", "o2", "o3", "o4", "o5"} {
		add(id, "timeout calling billing")
	}
	add("o6", "card declined")
	add("o7", "card declined")
	add("o8", "")
	add("o9", "")
	add("p1", "fraud hold")
	// p1 is parked, then archived.
	r, _ := f.store.Get(ctx, f.ids["p1"])
	parked, err := r.ParkManual("test", "fraud team", f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Replace(ctx, r, parked); err != nil {
		t.Fatal(err)
	}
	sw := sweeper.New(f.store, dynamostore.NewLister(st.Clients.DynamoDB, st.Names["QuarantineTable"]), s3store.New(st.Clients.S3, st.Names["PayloadBucket"], ""),
		s3store.Archiver{API: st.Clients.S3}, nil, f.clock.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		sweeper.Config{Bucket: st.Names["ArchiveBucket"], Retention: 3650 * 24 * time.Hour})
	if rep, err := sw.Run(ctx); err != nil || len(rep.Archived) != 1 {
		t.Fatalf("archive p1: %+v %v", rep, err)
	}
	return f
}

func (f *fixture) app(stdin string, now func() time.Time) (*dlqctl.App, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(stdin), &out, &errw)
	a.Now = now
	a.IsTerminal = func() bool { return false }
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		c := f.st.Clients
		if f.clients != nil {
			c = f.clients
		}
		return &dlqctl.Clients{Clients: c, Lambda: lambda.NewFromConfig(f.st.AWS),
			CloudFormation: cloudformation.NewFromConfig(f.st.AWS), STS: sts.NewFromConfig(f.st.AWS), Local: true}, nil
	}
	return a, &out, &errw
}

func (f *fixture) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return f.runAt(t, f.clock.Now(), args...)
}

func (f *fixture) runAt(t *testing.T, now time.Time, args ...string) (string, string, int) {
	t.Helper()
	a, out, errw := f.app("", func() time.Time { return now })
	base := []string{"--table", f.st.Names["QuarantineTable"], "--payload-bucket", f.st.Names["PayloadBucket"], "--actor", "alice"}
	if f.function != "" {
		base = append(base, "--function", f.function)
	}
	code := a.Main(context.Background(), append(base, args...))
	return out.String(), errw.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from %s:\n%s", name, path, got)
	}
}

func TestCommandsOnAKnownDataSet(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, oneOperator(t, ordersSources))
	f.readOnly(t)

	out, _, code := f.run(t, "ls")
	if code != 0 {
		t.Fatalf("ls exit %d", code)
	}
	golden(t, "ls", out)

	out, _, code = f.run(t, "ls", "--status", "all", "--class", "exhausted", "-o", "json")
	var sums []dlqctl.Summary
	if err := json.Unmarshal([]byte(out), &sums); err != nil || code != 0 {
		t.Fatalf("ls json: %v %s", err, out)
	}
	if len(sums) != 10 {
		t.Fatalf("ls json: %d records", len(sums))
	}

	out, _, code = f.run(t, "buckets")
	if code != 0 {
		t.Fatalf("buckets exit %d", code)
	}
	golden(t, "buckets", out)
	var buckets []dlqctl.Bucket
	out, _, _ = f.run(t, "buckets", "-o", "json")
	if err := json.Unmarshal([]byte(out), &buckets); err != nil || len(buckets) != 3 || !buckets[0].Dominant || buckets[0].Count != 5 || buckets[1].Dominant {
		t.Fatalf("buckets json: %v %s", err, out)
	}

	out, _, code = f.run(t, "show", f.ids["o6"])
	if code != 0 || strings.Contains(out, "PAYLOAD-VALUE") || !strings.Contains(out, "(verifies)") {
		t.Fatalf("show without --payload (exit %d):\n%s", code, out)
	}
	out, _, code = f.run(t, "show", f.ids["o6"], "--payload")
	if code != 0 || !strings.Contains(out, "PAYLOAD-VALUE-o6") {
		t.Fatalf("show --payload (exit %d):\n%s", code, out)
	}
	r, _ := f.store.Get(context.Background(), f.ids["o6"])
	if len(r.Reads) != 1 || r.ReadCount != 1 || r.Reads[0].Actor != "unverified:alice" || quarantine.Verify(r) != nil {
		t.Fatalf("the payload read was not recorded: %+v", r.Reads)
	}
	if last := r.Attempts[len(r.Attempts)-1]; last.Stage == quarantine.StageAudit {
		t.Fatalf("the payload read is in the failure history: %+v", last)
	}
	if out, _, _ = f.run(t, "show", f.ids["o6"]); !strings.Contains(out, "payload reads (1, newest 1 kept)") {
		t.Fatalf("show does not list the payload read:\n%s", out)
	}

	out, _, code = f.run(t, "verify", "--no-ledger")
	if code != 0 || !strings.Contains(out, "verified 10 records (1 archived stub): 0 problems") {
		t.Fatalf("verify (exit %d): %s", code, out)
	}

	if _, _, code = f.run(t, "park", f.ids["o9"], "--reason", "needs a human"); code != 0 {
		t.Fatalf("park exit %d", code)
	}
	if _, errOut, code := f.run(t, "park", f.ids["o9"], "--reason", "again"); code != 1 || !strings.Contains(errOut, "is PARKED") {
		t.Fatalf("park twice: %d %s", code, errOut)
	}
	if _, _, code = f.run(t, "unpark", f.ids["o9"], "--reason", "fixed upstream"); code != 0 {
		t.Fatalf("unpark exit %d", code)
	}
	r, _ = f.store.Get(context.Background(), f.ids["o9"])
	if r.Status != quarantine.StatusQuarantined || !strings.Contains(r.Attempts[len(r.Attempts)-2].Reason, "needs a human") {
		t.Fatalf("park/unpark history: %+v", r.Attempts)
	}
	if _, errOut, code := f.run(t, "park", f.ids["o8"]); code != 2 || !strings.Contains(errOut, "--reason is required") {
		t.Fatalf("park without reason: %d %s", code, errOut)
	}
	if _, errOut, code := f.run(t, "show", "orders#nope"); code != 1 || !strings.Contains(errOut, "no record") {
		t.Fatalf("show missing: %d %s", code, errOut)
	}
	if out, _, code := f.run(t, "ls", "--status", "RESOLVED"); code != 0 || !strings.Contains(out, "no records match") {
		t.Fatalf("empty ls: %d %s", code, out)
	}
	if _, errOut, code := f.run(t, "--table", "no-such-table", "ls"); code != 1 || !strings.Contains(errOut, `table "no-such-table" not found`) {
		t.Fatalf("missing table: %d %s", code, errOut)
	}
}

// verify catches a record changed behind the store's back, and an archive
// object swapped for another (even with the stub re-sealed to match).
func TestVerifyDetectsTampering(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	table := f.st.Names["QuarantineTable"]
	r, _ := f.store.Get(ctx, f.ids["o2"])
	item, _ := dynamostore.Marshal(r)
	item["failure_class"] = &ddbtypes.AttributeValueMemberS{Value: "validation"}
	if _, err := f.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	stub, _ := f.store.Get(ctx, f.ids["p1"])
	forged := []byte(`{"format":1,"record":{}}`)
	put, err := f.st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(stub.Archive.Bucket), Key: aws.String(stub.Archive.Key), Body: bytes.NewReader(forged)})
	if err != nil {
		t.Fatal(err)
	}
	swapped := stub.Clone()
	swapped.Archive.VersionID = aws.ToString(put.VersionId)
	swapped.Archive.SHA256 = quarantine.BodySHA256(forged)
	if err := quarantine.SealRecord(swapped); err != nil {
		t.Fatal(err)
	}
	swappedItem, err := dynamostore.Marshal(swapped) // re-sealed and written straight to the table
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: swappedItem}); err != nil {
		t.Fatal(err)
	}
	out, _, code := f.run(t, "verify", "--no-ledger")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d, want %d:\n%s", code, dlqctl.ExitMismatch, out)
	}
	for _, want := range []string{"MISMATCH " + f.ids["o2"] + ": record", "MISMATCH " + f.ids["p1"] + ": archive key holds versions"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify output lacks %q:\n%s", want, out)
		}
	}
}

// dlqctl policy add, ls, rm and resume: each change recorded in the
// policy's sealed history; bad policies are usage errors. The changes go
// through the redrive function: the CLI's own clients refuse every
// DynamoDB write.
func TestPolicyCommands(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, oneOperator(t, ordersSources))
	f.readOnly(t)
	// The function checks the expiry against its own clock, the real one
	// (the fixture's is a month behind): policies are added at the real now.
	if _, errOut, code := f.run(t, "policy", "add", "--source", "orders", "--max-per-run", "5"); code != 2 || !strings.Contains(errOut, "--expires") {
		t.Fatalf("add without --expires (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.run(t, "policy", "add", "--source", "orders", "--class", "poison", "--min-age", "10m", "--max-per-run", "5", "--expires", "24h"); code != 2 || !strings.Contains(errOut, "exhausted records only") {
		t.Fatalf("a poison policy (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.run(t, "policy", "add", "--source", "orders", "--max-per-run", "5", "--expires", "24h"); code != 2 || !strings.Contains(errOut, "must be narrow") {
		t.Fatalf("an unbounded policy (exit %d): %s", code, errOut)
	}
	out, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "orders", "--signature", "consumer|timeout|v#", "--max-per-run", "5", "--expires", "24h", "--note", "INC-1")
	if code != 0 || !strings.Contains(out, "created by unverified:alice for orders") {
		t.Fatalf("add (exit %d): %s %s", code, out, errOut)
	}
	id := strings.Fields(out)[1]
	if !strings.HasPrefix(id, "pol-") {
		t.Fatalf("policy id %q", id)
	}
	out, _, code = f.run(t, "policy", "ls", "--source", "orders")
	if code != 0 || !strings.Contains(out, id+"  active") || !strings.Contains(out, "created by unverified:alice") {
		t.Fatalf("ls (exit %d):\n%s", code, out)
	}
	if _, errOut, code := f.run(t, "policy", "rm", id, "--source", "orders"); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("rm without a reason (exit %d): %s", code, errOut)
	}
	if out, errOut, code := f.run(t, "policy", "rm", id, "--source", "orders", "--reason", "outage over"); code != 0 || !strings.Contains(out, "revoked by alice") {
		t.Fatalf("rm (exit %d): %s %s", code, out, errOut)
	}
	if _, errOut, code := f.run(t, "policy", "resume", id, "--source", "orders", "--reason", "again"); code != 1 || !strings.Contains(errOut, "only a suspended policy") {
		t.Fatalf("resume a revoked policy (exit %d): %s", code, errOut)
	}
	// A policy its breaker suspended (test setup, straight to the table)
	// is resumed.
	out, _, _ = f.runAt(t, time.Now(), "policy", "add", "--source", "orders", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h")
	id2 := strings.Fields(out)[1]
	ps := dynamostore.NewPolicyStore(f.st.Clients.DynamoDB, f.st.Names["QuarantineTable"])
	p2, err := ps.Get(context.Background(), "orders", id2)
	if err != nil {
		t.Fatal(err)
	}
	susp, err := p2.Suspend(quarantine.ActorBreaker, "9 of 10 came back", time.Now())
	if err != nil || ps.Replace(context.Background(), susp, p2.Version) != nil {
		t.Fatalf("suspend: %v", err)
	}
	if out, errOut, code := f.run(t, "policy", "resume", id2, "--source", "orders", "--reason", "consumer fixed"); code != 0 || out != "policy "+id2+" resumed by alice\n" {
		t.Fatalf("resume a suspended policy (exit %d): %s %s", code, out, errOut)
	}
	if p2, _ = ps.Get(context.Background(), "orders", id2); p2.State != "active" || p2.History[len(p2.History)-1].Actor != "unverified:alice" {
		t.Fatalf("after resume: %+v", p2)
	}
	if _, errOut, code := f.run(t, "policy", "rm", "pol-000000000000", "--source", "orders", "--reason", "r"); code != 1 || !strings.Contains(errOut, `no policy "pol-000000000000" for orders`) {
		t.Fatalf("rm of no policy (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "nope", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h"); code != 1 || !strings.Contains(errOut, `--source "nope": source is not configured`) {
		t.Fatalf("add for a source the function does not configure (exit %d): %s", code, errOut)
	}
	out, _, code = f.run(t, "policy", "ls", "--source", "orders", "-o", "json")
	var rows []struct {
		ID      string                                 `json:"id"`
		State   string                                 `json:"state"`
		History []struct{ Actor, Action, Note string } `json:"history"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].ID != id || rows[0].State != "revoked" || len(rows[0].History) != 2 ||
		rows[0].History[0].Note != "INC-1" || rows[0].History[1].Action != "revoked" || rows[0].History[1].Note != "outage over" {
		t.Fatalf("ls -o json (exit %d):\n%s", code, out)
	}
}

// An operator command on a record changed behind its seal never re-seals
// it: park, unpark and show --payload hold it as found and fail with the
// mismatch code; verify names it, ls leaves it out and ls --held lists it.
func TestOperatorCommandsHoldATamperedRecord(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, ordersSources)
	f.readOnly(t)
	ctx := context.Background()
	table := f.st.Names["QuarantineTable"]
	id := f.ids["o3"]
	r, _ := f.store.Get(ctx, id)
	item, _ := dynamostore.Marshal(r)
	item["redrive_cap"] = &ddbtypes.AttributeValueMemberN{Value: "50"}
	if _, err := f.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	found, _ := f.store.Get(ctx, id)
	for _, args := range [][]string{{"show", id, "--payload"}, {"park", id, "--reason", "look"}, {"show", id, "--payload"}} {
		out, errOut, code := f.run(t, args...)
		if code != dlqctl.ExitMismatch || !strings.Contains(errOut, "fails verification (seal_mismatch): held as found") || strings.Contains(out, "PAYLOAD-VALUE") {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	after, _ := f.store.Get(ctx, id)
	if after.Seal != found.Seal || after.Version != found.Version || len(after.Attempts) != len(found.Attempts) || after.Status != quarantine.StatusQuarantined {
		t.Fatal("an operator command changed the tampered record")
	}
	out, _, code := f.run(t, "verify", "--no-ledger")
	if code != dlqctl.ExitMismatch || !strings.Contains(out, "MISMATCH "+id+": record") || !strings.Contains(out, "HELD "+id+": version 1, seal_mismatch") {
		t.Fatalf("verify (exit %d):\n%s", code, out)
	}
	if out, _, _ := f.run(t, "ls"); strings.Contains(out, id) || !strings.Contains(out, f.ids["o4"]) {
		t.Fatalf("ls lists the held record:\n%s", out)
	}
	if out, _, code := f.run(t, "ls", "--held"); code != 0 || !strings.Contains(out, id) || strings.Contains(out, f.ids["o4"]) {
		t.Fatalf("ls --held (exit %d):\n%s", code, out)
	}
}

// dlqctl redrive without --yes changes nothing; with --yes it drives the
// real redrive function (its bootstrap on kumo's Runtime API) end to end.
func TestRedriveDrivesTheRealFunction(t *testing.T) {
	ctx := context.Background()
	v := newInventory(t)
	st, source, store := v.st, v.source, v.store
	var ids []string
	for i := range 12 {
		body := `{"event_id":"e` + string(rune('a'+i)) + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
		ids = append(ids, v.add(t, "m"+string(rune('a'+i)), body).DLQID)
		time.Sleep(time.Millisecond) // distinct first_seen (docs/emulators.md)
	}
	bin, err := lambdatest.Build(ctx, "redrive", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, err := lambdatest.Env(st, "RedriveFunction")
	if err != nil {
		t.Fatal(err)
	}
	name := embedded.RandomName("redrive")
	// A second registered source, a target a run may replay into.
	target := embedded.RandomName("target")
	var srcs map[string]any
	if err := json.Unmarshal([]byte(oneOperator(t, v.sources)), &srcs); err != nil {
		t.Fatal(err)
	}
	srcs[target] = map[string]any{"arn": "arn:aws:sqs:us-east-1:000000000000:" + target, "dlq": target + "-dlq", "four_eyes": []string{}}
	both, err := json.Marshal(srcs)
	if err != nil {
		t.Fatal(err)
	}
	lf, err := lambdatest.Start(ctx, st, name, bin, append(env, "SOURCES="+string(both)), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()

	f := v.fixture
	seals := func() string {
		var b strings.Builder
		for _, id := range ids {
			r, _ := store.Get(ctx, id)
			b.WriteString(r.Seal)
		}
		return b.String()
	}
	depth := func() string {
		out, _ := st.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]),
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
		return out.Attributes["ApproximateNumberOfMessages"]
	}
	before := seals()
	out, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--max", "10", "--batch-size", "4")
	if code != dlqctl.ExitNotExecuted || !strings.Contains(errOut, "would redrive 10") || !strings.Contains(errOut, "dlqctl: not executed: pass --yes") {
		t.Fatalf("dry run (exit %d): %s %s", code, out, errOut)
	}
	if seals() != before || depth() != "0" {
		t.Fatal("redrive without --yes changed something")
	}
	// The plan of a replay into another queue names it.
	out, errOut, code = f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--target", target, "--max", "10")
	if code != dlqctl.ExitNotExecuted || !strings.Contains(errOut, "would redrive 10 into "+target+" (not their own source)") {
		t.Fatalf("dry run into another queue (exit %d): %s %s", code, out, errOut)
	}
	if seals() != before || depth() != "0" {
		t.Fatal("redrive --target without --yes changed something")
	}
	out, errOut, code = f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--max", "10", "--batch-size", "4", "--yes")
	if code != 0 || !strings.Contains(out, "redriven 10") || !strings.Contains(errOut, "progress: 10/10 of the plan") {
		t.Fatalf("redrive --yes (exit %d): %s %s", code, out, errOut)
	}
	if depth() != "10" {
		t.Fatalf("source queue holds %s messages, want 10", depth())
	}
	// On a terminal, --yes: the progress bar (redrawn with \r on stderr)
	// ends its line before the summary.
	term, termOut, termErr := f.app("", time.Now)
	term.IsTerminal = func() bool { return true }
	code = term.Main(ctx, []string{"--table", st.Names["QuarantineTable"], "--actor", "alice", "redrive", "--function", name, "--source", source, "--max", "2", "--yes"})
	bar := "\r[" + strings.Repeat("#", 30) + "] 2/2 redriven 2"
	if code != 0 || !strings.Contains(termOut.String(), "redriven 2,") || !strings.Contains(termErr.String(), bar) || !strings.HasSuffix(termErr.String(), bar+"\n") {
		t.Fatalf("redrive --yes on a terminal (exit %d): stdout %q, stderr %q: want the bar, its line ended", code, termOut, termErr)
	}
	if depth() != "12" {
		t.Fatalf("source queue holds %s messages, want 12", depth())
	}
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", "no-such-function", "--source", source, "--yes"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing function: %d %s", code, errOut)
	}
	// The function's request errors name the flags the user typed.
	// (This function's configuration holds no SOURCES: dlqctl cannot
	// check the source, the function refuses it.)
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", "nope"); code != 1 ||
		!strings.Contains(errOut, `redrive function refused the request: --source "nope": source is not configured`) {
		t.Fatalf("an unknown source (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--target", "nowhere"); code != 1 ||
		!strings.Contains(errOut, `--target "nowhere" is not a registered source`) {
		t.Fatalf("a target no source names (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--target", source); code != 1 ||
		!strings.Contains(errOut, `--target "`+source+`" is the source itself`) {
		t.Fatalf("the source as its own target (exit %d): %s", code, errOut)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--id", "other#k"); code != 1 ||
		!strings.Contains(errOut, `--id "other#k" does not belong to source`) || strings.Contains(errOut, "ids[") {
		t.Fatalf("an id of another source (exit %d): %s", code, errOut)
	}
	someJSON := filepath.Join(t.TempDir(), "some.json")
	if err := os.WriteFile(someJSON, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "fix", source+"#nope", "--function", name, "--payload-file", someJSON, "--reason", "r"); code != 1 ||
		!strings.Contains(errOut, `ID "`+source+`#nope" names no record`) {
		t.Fatalf("fix of no record (exit %d): %s", code, errOut)
	}

	// dlqctl fix: through the same function, so through the same gate.
	bad := `{"event_id":"fx","ndc":"NDC?12","lot":"LOT-SECRET-7","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	m := v.add(t, "mfx", bad)
	id := m.DLQID
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stillBad := write("still-bad.json", strings.Replace(bad, "NDC?12", "12", 1))
	if _, errOut, code := f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", stillBad, "--reason", "typo"); code != 1 || !strings.Contains(errOut, "fails the current schema") {
		t.Fatalf("fix with an invalid payload (exit %d): %s", code, errOut)
	}
	if r, _ := store.Get(ctx, id); r.Version != m.Version {
		t.Fatal("a refused fix changed the record")
	}
	if _, errOut, code := f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", stillBad); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("fix without --reason (exit %d): %s", code, errOut)
	}
	good := strings.Replace(bad, "NDC?12", "12345-678-90", 1)
	out, errOut, code = f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", write("good.json", good), "--reason", "NDC typo")
	if code != 0 || !strings.Contains(out, "correction 1 of "+id+" stored by unverified:alice") {
		t.Fatalf("fix (exit %d): %s %s", code, out, errOut)
	}
	r, _ := store.Get(ctx, id)
	if r.Body != bad || len(r.Corrections) != 1 || r.Corrections[0].Body != good || quarantine.Verify(r) != nil {
		t.Fatal("the fix did not store the correction beside the original")
	}
	out, errOut, code = f.runAt(t, time.Now(), "show", id, "--diff")
	if code != 0 || !strings.Contains(out, "replace  /ndc\n") || !strings.Contains(out, "1 correction(s)") || strings.Contains(out, "12345-678-90") || strings.Contains(out, "LOT-SECRET-7") {
		t.Fatalf("show --diff (exit %d), want paths without values:\n%s %s", code, out, errOut)
	}
	out, _, code = f.runAt(t, time.Now(), "--function", name, "show", id, "--diff", "--payload")
	if code != 0 || !strings.Contains(out, `replace  /ndc = "12345-678-90"`) || !strings.Contains(out, "correction 1:\n"+good) {
		t.Fatalf("show --diff --payload (exit %d):\n%s", code, out)
	}
}
