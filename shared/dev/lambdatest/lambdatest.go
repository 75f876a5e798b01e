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
	"syscall"
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

// Spec is a function to create in kumo and the bootstrap that serves it.
type Spec struct {
	Name      string
	Bootstrap string
	// Env is the function's configuration (NAME=value), given to the
	// bootstrap; with Configure it is also the function's Environment in
	// the Lambda API.
	Env        []string
	Timeout    time.Duration
	MemorySize int
	// Configure sets Env, Timeout and MemorySize on the function in the
	// Lambda API, as a deployment would (Start leaves them unset).
	Configure bool
}

// Create creates the function s names in kumo (any small zip: kumo runs
// nothing itself), without starting anything to serve it.
func Create(ctx context.Context, st *embedded.Stack, s Spec) error {
	return create(ctx, lambda.NewFromConfig(st.AWS), s)
}

func create(ctx context.Context, api *lambda.Client, s Spec) error {
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("bootstrap")
	_, _ = w.Write([]byte("#!/bin/sh\n"))
	_ = zw.Close()
	in := &lambda.CreateFunctionInput{
		FunctionName: aws.String(s.Name), Runtime: types.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role:    aws.String("arn:aws:iam::000000000000:role/" + s.Name),
		Code:    &types.FunctionCode{ZipFile: zbuf.Bytes()},
		Timeout: aws.Int32(int32(s.Timeout / time.Second)),
	}
	if s.Configure {
		vars := map[string]string{}
		for _, kv := range s.Env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		in.Environment = &types.Environment{Variables: vars}
		if s.MemorySize > 0 {
			in.MemorySize = aws.Int32(int32(s.MemorySize))
		}
	}
	_, err := api.CreateFunction(ctx, in)
	var exists *types.ResourceConflictException
	if errors.As(err, &exists) {
		// Kept from an earlier run (dlqlocal local -data): deploy afresh,
		// as a stack update replaces a function's code and configuration.
		if _, err := api.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: aws.String(s.Name)}); err != nil {
			return fmt.Errorf("replace function %s: %w", s.Name, err)
		}
		_, err = api.CreateFunction(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("create function %s: %w", s.Name, err)
	}
	return nil
}

// runtimeProxy forwards a bootstrap's Runtime API calls to kumo and calls
// polled on each poll for the next invocation.
func runtimeProxy(endpoint string, polled func()) (*http.Server, string, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, "", err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed bootstrap drops its long poll
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			polled()
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	return srv, l.Addr().String(), nil
}

// command is the bootstrap process for s, its Runtime API at addr.
func command(st *embedded.Stack, s Spec, addr string, out io.Writer) *exec.Cmd {
	mem := s.MemorySize
	if mem == 0 {
		mem = 256
	}
	cmd := exec.Command(s.Bootstrap)
	cmd.Env = append(append(append(os.Environ(), st.Environ()...),
		"AWS_LAMBDA_RUNTIME_API="+addr+"/_runtime/"+s.Name,
		"AWS_LAMBDA_FUNCTION_NAME="+s.Name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", mem),
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	), s.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a terminal's Ctrl-C (SIGINT to the foreground
	// group) reaches dlqlocal, which stops the bootstraps in order, and not
	// the bootstraps mid-invocation.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Start creates the function in kumo (any small zip: kumo runs nothing
// itself), execs bootstrap with AWS_LAMBDA_RUNTIME_API pointing at kumo
// through a recording proxy, and waits for its first poll.
func Start(ctx context.Context, st *embedded.Stack, name, bootstrap string, env []string, timeout time.Duration) (*Function, error) {
	api := lambda.NewFromConfig(st.AWS)
	s := Spec{Name: name, Bootstrap: bootstrap, Env: env, Timeout: timeout}
	if err := create(ctx, api, s); err != nil {
		return nil, err
	}
	polled := make(chan time.Time, 1)
	var once sync.Once
	f := &Function{Name: name, api: api, done: make(chan struct{}), output: syncio.NewBuffer()}
	proxy, addr, err := runtimeProxy(st.Endpoint, func() { once.Do(func() { polled <- time.Now() }) })
	if err != nil {
		return nil, err
	}
	f.proxy = proxy
	f.cmd = command(st, s, addr, f.output)
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

// FromTemplate is the Spec of the function with the given logical id as the
// template deploys it: its FunctionName, environment, Timeout and
// MemorySize, configured in the Lambda API.
func FromTemplate(st *embedded.Stack, logicalID, bootstrap string) (Spec, error) {
	fn, err := st.Template.GetServerlessFunctionWithName(logicalID)
	if err != nil {
		return Spec{}, err
	}
	env, err := Env(st, logicalID)
	if err != nil {
		return Spec{}, err
	}
	s := Spec{Name: st.Names[logicalID], Bootstrap: bootstrap, Env: env, Timeout: 3 * time.Second, Configure: true}
	if fn.FunctionName != nil {
		s.Name = *fn.FunctionName
	}
	if s.Name == "" {
		return Spec{}, fmt.Errorf("function %s has no name", logicalID)
	}
	if fn.Timeout != nil {
		s.Timeout = time.Duration(*fn.Timeout) * time.Second
	}
	if fn.MemorySize != nil {
		s.MemorySize = *fn.MemorySize
	}
	return s, nil
}

// BuildAll compiles ./functions/<name> for each name, in one go build, with
// the Lambda build flags, and returns each bootstrap's path (dir/<name>).
func BuildAll(ctx context.Context, dir string, names ...string) (map[string]string, error) {
	root := filepath.Join(filepath.Dir(template.Path()), "..")
	args := []string{"-o", dir + string(filepath.Separator)}
	out := map[string]string{}
	for _, n := range names {
		args = append(args, "./functions/"+n)
		out[n] = filepath.Join(dir, n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if b, err := Command(ctx, root, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %w: %s", strings.Join(names, ", "), err, b)
	}
	return out, nil
}
