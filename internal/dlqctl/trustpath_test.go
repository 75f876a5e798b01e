package dlqctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// The operator commands that change a record or read its payload (park,
// unpark, show --payload, fix) go through the redrive function: these
// helpers run its real bootstrap, built once for the package, and give the
// CLI clients that refuse every DynamoDB write and every request to the
// payload bucket, so a test fails if the CLI process makes one.

var bootstrap struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bootstrap.dir != "" {
		_ = os.RemoveAll(bootstrap.dir)
	}
	os.Exit(code)
}

// redriveBootstrap builds ./functions/redrive once for the package.
func redriveBootstrap(t *testing.T) string {
	t.Helper()
	bootstrap.once.Do(func() {
		if bootstrap.dir, bootstrap.err = os.MkdirTemp("", "dlqctl-redrive-"); bootstrap.err == nil {
			bootstrap.path, bootstrap.err = lambdatest.Build(context.Background(), "redrive", bootstrap.dir)
		}
	})
	if bootstrap.err != nil {
		t.Fatal(bootstrap.err)
	}
	return bootstrap.path
}

// startRedrive runs the redrive function on f's stack, with the template's
// environment and, when sources is not "", that SOURCES, configured in the
// Lambda API as a deployment would; f's commands then use it (--function).
func (f *fixture) startRedrive(t *testing.T, sources string) string {
	t.Helper()
	env, err := lambdatest.Env(f.st, "RedriveFunction")
	if err != nil {
		t.Fatal(err)
	}
	if sources != "" {
		env = append(env, "SOURCES="+sources)
	}
	fn, err := lambdatest.Supervise(context.Background(), f.st, lambdatest.Spec{
		Name: embedded.RandomName("redrive"), Bootstrap: redriveBootstrap(t), Env: env, Timeout: 60 * time.Second, Configure: true,
	}, io.Discard, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Close)
	f.function = fn.Spec.Name
	return fn.Spec.Name
}

// ordersSources is the SOURCES of the fixture's source "orders".
const ordersSources = `{"orders":{"arn":"arn:aws:sqs:us-east-1:000000000000:orders","dlq":"orders-dlq","idempotency_pointer":"/id","redrive_cap":3}}`

// dynamoWrites are the DynamoDB operations that write.
var dynamoWrites = []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"}

// readOnlyHTTP refuses, without sending them, the DynamoDB writes and the
// requests to the payload bucket (path-style, as against the emulator) of
// the CLI process, and counts them.
type readOnlyHTTP struct {
	base    aws.HTTPClient
	bucket  string
	mu      sync.Mutex
	refused []string
}

var errRefused = errors.New("refused by the test: the CLI may not write the table or read the payload bucket")

func (h *readOnlyHTTP) Do(req *http.Request) (*http.Response, error) {
	what := ""
	target := req.Header.Get("X-Amz-Target")
	for _, op := range dynamoWrites {
		if target == "DynamoDB_20120810."+op {
			what = "dynamodb " + op
		}
	}
	if h.bucket != "" && (req.URL.Path == "/"+h.bucket || strings.HasPrefix(req.URL.Path, "/"+h.bucket+"/")) {
		what = "s3 " + req.Method + " " + req.URL.Path
	}
	if what != "" {
		h.mu.Lock()
		h.refused = append(h.refused, what)
		h.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", what, errRefused)
	}
	return h.base.Do(req)
}

// Refused is what the CLI tried and was refused.
func (h *readOnlyHTTP) Refused() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.refused...)
}

// readOnly makes f's CLI clients refuse DynamoDB writes and payload-bucket
// requests; the test fails at its end if any was tried.
func (f *fixture) readOnly(t *testing.T) {
	t.Helper()
	cfg := f.st.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	h := &readOnlyHTTP{base: base, bucket: f.st.Names["PayloadBucket"]}
	cfg.HTTPClient = h
	f.clients = awsclients.New(cfg, awsclients.Options{Local: true})
	t.Cleanup(func() {
		if r := h.Refused(); len(r) > 0 {
			t.Errorf("the CLI process tried %d calls an operator needs no permission for: %v", len(r), r)
		}
	})
}

// parkedAtCap parks record id as poison at its cap, as runs that replayed
// it cap times would have (test setup, written straight to the store).
func parkedAtCap(t *testing.T, store quarantine.Store, id string) {
	t.Helper()
	ctx := context.Background()
	r, err := store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r.RedriveCount = r.RedriveCap // re-sealed in place: a transition refuses a record that does not verify
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	p, err := r.ParkPoison("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, r, p); err != nil {
		t.Fatal(err)
	}
}

// park, unpark, show --payload and fix work end to end through the real
// redrive function while the CLI's own clients refuse every DynamoDB write
// and every request to the payload bucket: a claim-checked body and its
// attributes are shown (loaded by the function), the read is recorded
// once per show, a diff that needs a claim-checked body says so without
// --payload and is shown with it, an unpark at the cap says the cap was
// raised, and a missing record is named.
func TestOperatorCommandsNeedNoTableWriteNorPayloadRead(t *testing.T) {
	ctx := context.Background()
	v := newInventory(t)
	v.startRedrive(t, oneOperator(t, v.sources))
	v.readOnly(t)
	fn, _ := v.st.Template.GetServerlessFunctionWithName("RedriveFunction")
	cfg, err := sources.Parse(fn.Environment.Variables["SOURCES"])
	if err != nil {
		t.Fatal(err)
	}
	srcs, _ := sources.Build(cfg)
	q := ingest.NewQuarantiner(v.store, s3store.New(v.st.Clients.S3, v.st.Names["PayloadBucket"], ""), nil, ingest.QuarantinerConfig{Sources: srcs, BodyInlineMax: 64})
	bad := `{"event_id":"tp-1","ndc":"NDC?SECRET","lot":"LOT-SECRET-9","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m-tp-1", Body: []byte(bad), SourceARN: v.srcARN,
		Attributes: map[string]quarantine.Attribute{"tenant": {DataType: "String", StringValue: "TENANT-SECRET"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Record.DLQID
	if out.Record.BodyRef == nil {
		t.Fatal("the test needs a claim-checked body")
	}

	stdout, errOut, code := v.run(t, "show", id, "--payload")
	if code != 0 || !strings.Contains(stdout, "payload (read recorded as unverified:alice):\n"+bad+"\n") || !strings.Contains(stdout, "attribute tenant (String): TENANT-SECRET") {
		t.Fatalf("show --payload of a claim-checked body (exit %d):\n%s%s", code, stdout, errOut)
	}
	stdout, _, code = v.run(t, "show", id, "--payload", "-o", "json")
	var doc struct {
		Record  quarantine.Record `json:"record"`
		Payload string            `json:"payload"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 || doc.Payload != bad || doc.Record.ReadCount != 2 {
		t.Fatalf("show --payload -o json (exit %d): %v\n%s", code, err, stdout)
	}
	if r, _ := v.store.Get(ctx, id); r.ReadCount != 2 || len(r.Reads) != 2 || r.Reads[1].Actor != "unverified:alice" || quarantine.Verify(r) != nil {
		t.Fatalf("reads recorded: %d %+v", r.ReadCount, r.Reads)
	}

	good := strings.Replace(bad, "NDC?SECRET", "12345-678-90", 1)
	file := filepath.Join(t.TempDir(), "good.json")
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, errOut, code := v.run(t, "fix", id, "--payload-file", file, "--reason", "NDC typo"); code != 0 {
		t.Fatalf("fix (exit %d): %s%s", code, stdout, errOut)
	}
	stdout, _, code = v.run(t, "show", id, "--diff")
	if code != 0 || !strings.Contains(stdout, "a body it compares is claim-checked in S3, which dlqctl does not read; --payload shows the diff") || strings.Contains(stdout, "replace  /ndc") {
		t.Fatalf("show --diff of a claim-checked original (exit %d):\n%s", code, stdout)
	}
	stdout, _, code = v.run(t, "show", id, "--diff", "--payload")
	if code != 0 || !strings.Contains(stdout, `replace  /ndc = "12345-678-90"`) || !strings.Contains(stdout, "correction 1:\n"+good) {
		t.Fatalf("show --diff --payload (exit %d):\n%s", code, stdout)
	}

	parkedAtCap(t, v.store, id)
	stdout, errOut, code = v.run(t, "unpark", id, "--reason", "one more try")
	if code != 0 || !strings.Contains(stdout, id+" is QUARANTINED\n") || !strings.Contains(stdout, "its redrive cap was raised from 3 to 4") {
		t.Fatalf("unpark at the cap (exit %d):\n%s%s", code, stdout, errOut)
	}
	stdout, errOut, code = v.run(t, "park", id, "--reason", "again")
	if r, _ := v.store.Get(ctx, id); code != 0 || stdout != id+" is PARKED\n" || r.Status != quarantine.StatusParked || r.Attempts[len(r.Attempts)-1].Actor != "unverified:alice" {
		t.Fatalf("park (exit %d):\n%s%s", code, stdout, errOut)
	}
	if _, errOut, code := v.run(t, "park", v.source+"#nope", "--reason", "r"); code != 1 || !strings.Contains(errOut, `no record "`+v.source+`#nope"`) {
		t.Fatalf("park of no record (exit %d): %s", code, errOut)
	}
	if _, errOut, code := v.run(t, "unpark", "orders#o1", "--reason", "r"); code != 1 || !strings.Contains(errOut, `source "orders": source is not configured`) {
		t.Fatalf("unpark of a source the function does not configure (exit %d): %s", code, errOut)
	}
}

// The read-only clients of these tests do refuse a write and a payload
// object, so the tests above would see one.
func TestReadOnlyClientsRefuse(t *testing.T) {
	f := newFixture(t)
	cfg := f.st.AWS.Copy()
	h := &readOnlyHTTP{base: http.DefaultClient, bucket: f.st.Names["PayloadBucket"]}
	if cfg.HTTPClient != nil {
		h.base = cfg.HTTPClient
	}
	cfg.HTTPClient = h
	c := awsclients.New(cfg, awsclients.Options{Local: true})
	ctx := context.Background()
	store := dynamostore.New(c.DynamoDB, f.st.Names["QuarantineTable"])
	r, err := store.Get(ctx, f.ids["o1"])
	if err != nil {
		t.Fatalf("a read was refused: %v", err)
	}
	parked, err := r.ParkManual("alice", "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, r, parked); !errors.Is(err, errRefused) {
		t.Fatalf("a write: %v, want refused", err)
	}
	if _, err := s3store.New(c.S3, f.st.Names["PayloadBucket"], "").PutPayload(ctx, "k", []byte("x")); !errors.Is(err, errRefused) {
		t.Fatalf("a payload object: %v, want refused", err)
	}
	// (The SDK retries a refused call: each is refused every time.)
	got := strings.Join(h.Refused(), ",")
	if !strings.Contains(got, "dynamodb ") || !strings.Contains(got, "s3 PUT /"+f.st.Names["PayloadBucket"]+"/k") {
		t.Fatalf("refused %s", got)
	}
}

// oneOperator is sources with every source's four_eyes empty: high-risk
// actions (fix, policy add, a parked replay) run on one request. The
// tests of what those commands do use it; the four-eyes tests
// (identity_test.go) go through the operator endpoint with two operators.
func oneOperator(t *testing.T, sources string) string {
	t.Helper()
	var m map[string]map[string]any
	if err := json.Unmarshal([]byte(sources), &m); err != nil {
		t.Fatal(err)
	}
	for _, s := range m {
		s["four_eyes"] = []string{}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
