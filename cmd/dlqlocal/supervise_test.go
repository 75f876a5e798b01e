package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
)

const asBootstrap = "DLQLOCAL_TEST_AS_BOOTSTRAP"

// fakeBootstrap is this test binary as a Lambda runtime client: it answers
// each event with itself, and exits (a crash) on the event "exit".
func fakeBootstrap() int {
	base := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/invocation/"
	for {
		resp, err := http.Get(base + "next")
		if err != nil {
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) == `"exit"` {
			return 2
		}
		r, err := http.Post(base+resp.Header.Get("Lambda-Runtime-Aws-Request-Id")+"/response", "application/json", bytes.NewReader(body))
		if err != nil {
			return 1
		}
		r.Body.Close()
	}
}

// A bootstrap that exits during an invocation fails that invocation at once
// with Runtime.ExitError (not after the function's timeout), is restarted,
// and serves the next one; Close stops it for good.
func TestSupervisorRestartsACrashedBootstrap(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := syncio.NewBuffer()
	log := slog.New(slog.NewJSONHandler(out, nil))
	name := embedded.RandomName("fake")
	sup, err := lambdatest.Supervise(context.Background(), st, lambdatest.Spec{Name: name, Bootstrap: self, Env: []string{asBootstrap + "=1"}, Timeout: 10 * time.Minute}, out, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	api := lambda.NewFromConfig(st.AWS)
	invoke := func(payload string) *lambda.InvokeOutput {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		o, err := api.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte(payload)})
		if err != nil {
			t.Fatalf("invoke %s: %v\n%s", payload, err, out)
		}
		return o
	}
	if o := invoke(`"one"`); o.FunctionError != nil || string(o.Payload) != `"one"` {
		t.Fatalf("first invoke: %v %s", aws.ToString(o.FunctionError), o.Payload)
	}
	first := sup.PID()
	if o := invoke(`"exit"`); aws.ToString(o.FunctionError) == "" || !strings.Contains(string(o.Payload), `"errorType":"Runtime.ExitError"`) {
		t.Fatalf("a crash mid-invocation answered %v %s", aws.ToString(o.FunctionError), o.Payload)
	}
	if o := invoke(`"two"`); o.FunctionError != nil || string(o.Payload) != `"two"` {
		t.Fatalf("invoke after the crash: %v %s", aws.ToString(o.FunctionError), o.Payload)
	}
	if sup.Restarts() != 1 || sup.PID() == first || !strings.Contains(out.String(), `"msg":"bootstrap exited; restarting it"`) {
		t.Fatalf("restarts %d, pid %d (first %d), log:\n%s", sup.Restarts(), sup.PID(), first, out)
	}
	last := sup.PID()
	sup.Close()
	if syscall.Kill(last, 0) == nil {
		t.Errorf("bootstrap %d still runs after Close", last)
	}
}
