// Package lambdatest runs a function's real bootstrap binary as a Lambda
// runtime client against kumo's Runtime API and invokes it through the
// Lambda Invoke API, the way the console and `aws lambda invoke` do. It also
// measures the start-up time to the first Runtime API poll.
package lambdatest

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// Build compiles ./functions/<name> for this machine with the Lambda build
// flags (those of `make build`) and returns the bootstrap path.
func Build(ctx context.Context, name, dir string) (string, error) {
	out := filepath.Join(dir, name, "bootstrap")
	root := filepath.Join(filepath.Dir(template.Path()), "..")
	if b, err := Command(ctx, root, "-o", out, "./functions/"+name).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", name, err, b)
	}
	return out, nil
}

// Command returns `go build` with the Lambda build flags, run in dir. Leading
// NAME=value arguments are set in its environment.
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	env := append(os.Environ(), "CGO_ENABLED=0")
	for len(args) > 0 && strings.Contains(args[0], "=") && !strings.HasPrefix(args[0], "-") {
		env, args = append(env, args[0]), args[1:]
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w -buildid="}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// Function is a bootstrap process serving one function on kumo.
type Function struct {
	Name string
	// StartUp is the time from exec to the first Runtime API poll.
	StartUp time.Duration

	api    *lambda.Client
	cmd    *exec.Cmd
	done   chan struct{}
	proxy  *http.Server
	output *syncio.Buffer
}

// Start creates the function in kumo (any small zip: kumo runs nothing
// itself), execs bootstrap with AWS_LAMBDA_RUNTIME_API pointing at kumo
// through a recording proxy, and waits for its first poll.
func Start(ctx context.Context, st *embedded.Stack, name, bootstrap string, env []string, timeout time.Duration) (*Function, error) {
	api := lambda.NewFromConfig(st.AWS)
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("bootstrap")
	_, _ = w.Write([]byte("#!/bin/sh\n"))
	_ = zw.Close()
	if _, err := api.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Runtime: types.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role:    aws.String("arn:aws:iam::000000000000:role/" + name),
		Code:    &types.FunctionCode{ZipFile: zbuf.Bytes()},
		Timeout: aws.Int32(int32(timeout / time.Second)),
	}); err != nil {
		return nil, fmt.Errorf("create function %s: %w", name, err)
	}

	target, err := url.Parse(st.Endpoint)
	if err != nil {
		return nil, err
	}
	polled := make(chan time.Time, 1)
	var once sync.Once
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed bootstrap drops its long poll
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Function{Name: name, api: api, done: make(chan struct{}), output: syncio.NewBuffer()}
	f.proxy = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			once.Do(func() { polled <- time.Now() })
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = f.proxy.Serve(l) }()

	f.cmd = exec.Command(bootstrap)
	f.cmd.Env = append(append(append(os.Environ(), st.Environ()...),
		"AWS_LAMBDA_RUNTIME_API="+l.Addr().String()+"/_runtime/"+name,
		"AWS_LAMBDA_FUNCTION_NAME="+name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	), env...)
	f.cmd.Stdout, f.cmd.Stderr = f.output, f.output
	start := time.Now()
	if err := f.cmd.Start(); err != nil {
		f.proxy.Close()
		return nil, fmt.Errorf("start bootstrap: %w", err)
	}
	go func() { _ = f.cmd.Wait(); close(f.done) }()
	select {
	case at := <-polled:
		f.StartUp = at.Sub(start)
		return f, nil
	case <-f.done:
		f.proxy.Close()
		return nil, fmt.Errorf("bootstrap exited before its first poll: %s", f.Output())
	case <-time.After(30 * time.Second):
		f.Close()
		return nil, errors.New("bootstrap did not poll within 30s")
	case <-ctx.Done():
		f.Close()
		return nil, ctx.Err()
	}
}

// Invoke calls the function synchronously through the Lambda API.
func (f *Function) Invoke(ctx context.Context, payload []byte) (*lambda.InvokeOutput, error) {
	return f.api.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(f.Name), Payload: payload})
}

// Output is what the bootstrap printed (its logs and EMF lines).
func (f *Function) Output() string {
	return f.output.String()
}

// Close stops the bootstrap.
func (f *Function) Close() {
	_ = f.cmd.Process.Kill()
	<-f.done
	_ = f.proxy.Close()
}

// Env returns the environment the template gives the function with the
// given logical id, as NAME=value pairs for Start.
func Env(st *embedded.Stack, logicalID string) ([]string, error) {
	fn, err := st.Template.GetServerlessFunctionWithName(logicalID)
	if err != nil {
		return nil, err
	}
	var env []string
	if fn.Environment != nil {
		for k, v := range fn.Environment.Variables {
			env = append(env, k+"="+v)
		}
	}
	return env, nil
}
