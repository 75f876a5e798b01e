package dlqctl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
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
