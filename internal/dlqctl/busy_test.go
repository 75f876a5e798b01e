package dlqctl_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

// busyLambda answers the first n invocations as Lambda does when a
// function's reserved concurrency is taken, then with report.
func busyLambda(t *testing.T, n int32, report string) (*lambda.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(report))
	}))
	t.Cleanup(srv.Close)
	c := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{},
		RetryMaxAttempts: 1})
	return c, &calls
}

func busyApp(t *testing.T, c *lambda.Client, wait time.Duration) (*dlqctl.App, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.IsTerminal = func() bool { return false }
	a.BusyWait = wait
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) { return &dlqctl.Clients{Lambda: c}, nil }
	return a, &out, &errw
}

// A park during a redrive run (the function's one slot taken) waits for
// the run and goes through, saying why it waits; past BusyWait it fails
// naming the busy function.
func TestARequestWaitsForABusyRedriveFunction(t *testing.T) {
	c, calls := busyLambda(t, 2, `{"record":{"dlq_id":"orders#k1","status":"PARKED"}}`)
	a, out, errw := busyApp(t, c, 3*time.Second)
	if code := a.Main(context.Background(), []string{"park", "orders#k1", "--reason", "stop it", "--actor", "alice"}); code != 0 {
		t.Fatalf("park exit %d: %s %s", code, out, errw)
	}
	if calls.Load() != 3 || !strings.Contains(errw.String(), "the redrive function is busy") || strings.Count(errw.String(), "busy") != 1 {
		t.Fatalf("%d invocations; stderr %q", calls.Load(), errw)
	}
	c, _ = busyLambda(t, 1000, `{}`)
	a, out, errw = busyApp(t, c, time.Second)
	if code := a.Main(context.Background(), []string{"park", "orders#k1", "--reason", "stop it", "--actor", "alice"}); code == 0 || !strings.Contains(errw.String(), "stayed busy for 1s") {
		t.Fatalf("exit %d: %s %s", code, out, errw)
	}
}
