package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
)

const asBootstrap = "DLQLOCAL_TEST_AS_BOOTSTRAP"

// fakeBootstrap is this test binary as a Lambda runtime client: it answers
// each event with itself, and exits (a crash) on the event "exit". On
// "hang" it never answers; on "slow:PATH" it creates PATH (it has the
// invocation), waits until PATH.go exists, then answers.
func fakeBootstrap() int {
	base := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/invocation/"
	for {
		resp, err := http.Get(base + "next")
		if err != nil {
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ev string
		_ = json.Unmarshal(body, &ev)
		switch {
		case ev == "exit":
			return 2
		case ev == "hang":
			select {}
		case strings.HasPrefix(ev, "slow:"):
			took := strings.TrimPrefix(ev, "slow:")
			if err := os.WriteFile(took, nil, 0o600); err != nil {
				return 1
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(took + ".go"); err == nil || time.Now().After(deadline) {
					break
				}
			}
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

// superviseFake supervises this test binary as a fake bootstrap of a new
// function with the given timeout; out has its output and the log.
func superviseFake(t *testing.T, st *embedded.Stack, timeout time.Duration) (*lambdatest.Supervised, *syncio.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := syncio.NewBuffer()
	log := slog.New(slog.NewJSONHandler(out, nil))
	sup, err := lambdatest.Supervise(context.Background(), st, lambdatest.Spec{Name: embedded.RandomName("fake"), Bootstrap: self, Env: []string{asBootstrap + "=1"}, Timeout: timeout, Configure: true}, out, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	return sup, out
}

func invokeFake(t *testing.T, st *embedded.Stack, sup *lambdatest.Supervised, payload string) (*lambda.InvokeOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return lambda.NewFromConfig(st.AWS).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(sup.Spec.Name), Payload: []byte(payload)})
}

// The bootstrap leads its own process group (a terminal's Ctrl-C does not
// reach it), and Close (here through localrunner's, which says that it
// waits) lets an invocation in flight finish and answer before it stops
// the process, which it does without a restart.
func TestSupervisorCloseLetsTheInvocationInFlightFinish(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	sup, out := superviseFake(t, st, 10*time.Minute)
	pid := sup.PID()
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("bootstrap %d is in process group %d (%v), want its own", pid, pgid, err)
	}
	took := filepath.Join(t.TempDir(), "took")
	payload := `"slow:` + took + `"`
	type result struct {
		o   *lambda.InvokeOutput
		err error
	}
	done := make(chan result, 1)
	go func() { o, err := invokeFake(t, st, sup, payload); done <- result{o, err} }()
	deadline := time.Now().Add(time.Minute)
	for { // until the bootstrap has the invocation
		if _, err := os.Stat(took); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bootstrap did not take the invocation:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The bootstrap answers once the stop has said it waits: the stop
	// must wait for it however slow the machine.
	progress := &releaseOnWrite{path: took + ".go"}
	(&localrunner.Local{Functions: map[string]*lambdatest.Supervised{"Fake": sup}, Progress: progress}).Close()
	if want := "stopping: waiting up to 30s for 1 invocations in flight to finish …\n"; progress.String() != want {
		t.Errorf("the stop said %q, want %q", progress.String(), want)
	}
	r := <-done
	if r.err != nil || r.o.FunctionError != nil || string(r.o.Payload) != payload {
		t.Fatalf("the invocation in flight at Close: %v %v %s\n%s", r.err, aws.ToString(r.o.FunctionError), r.o.Payload, out)
	}
	if strings.Contains(out.String(), "restarting") || sup.Restarts() != 0 {
		t.Fatalf("a clean stop restarted the bootstrap:\n%s", out)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("bootstrap %d still runs after Close", pid)
	}
}

// An invocation that runs past the function's timeout gets Lambda's
// timeout error, and its bootstrap is killed and restarted (TimeoutGrace
// later), so the next invocation is served instead of waiting behind it.
func TestSupervisorKillsABootstrapPastItsTimeout(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	sup, out := superviseFake(t, st, time.Second)
	first := sup.PID()
	o, err := invokeFake(t, st, sup, `"hang"`)
	if err != nil || aws.ToString(o.FunctionError) == "" || !strings.Contains(string(o.Payload), "Task timed out after 1.00 seconds") {
		t.Fatalf("a hung invocation answered %v %v %s", err, o, out)
	}
	deadline := time.Now().Add(time.Minute)
	for sup.Restarts() == 0 || sup.WaitPolled(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the hung bootstrap %d was not restarted:\n%s", first, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o, err := invokeFake(t, st, sup, `"next"`); err != nil || o.FunctionError != nil || string(o.Payload) != `"next"` {
		t.Fatalf("the invocation after the timeout: %v %v\n%s", err, o, out)
	}
	if sup.PID() == first || !strings.Contains(out.String(), `"msg":"the invocation ran past the function's timeout; the bootstrap is killed and restarted"`) {
		t.Fatalf("pid %d (first %d), log:\n%s", sup.PID(), first, out)
	}
}

// releaseOnWrite keeps what is written to it and, at the first write,
// creates path (a fake bootstrap waits for it).
type releaseOnWrite struct {
	path string
	strings.Builder
}

func (w *releaseOnWrite) Write(p []byte) (int, error) {
	if w.Len() == 0 {
		if err := os.WriteFile(w.path, nil, 0o600); err != nil {
			return 0, err
		}
	}
	return w.Builder.Write(p)
}
