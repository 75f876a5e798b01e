package lambdatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/sigv4front"
)

// Endpoint is a local operator endpoint: an HTTP server on loopback that
// checks each request's SigV4 signature against local identities, as a
// Lambda function URL with AuthType AWS_IAM does, and only then invokes a
// function through st's Lambda API with the function URL event
// (sigv4front).
type Endpoint struct {
	// URL is the endpoint ("http://127.0.0.1:PORT/").
	URL        string
	Identities []sigv4front.Identity
	server     *http.Server
}

// ServeEndpoint fronts function on st with the default local identities
// (operator-a, operator-b, auditor; sigv4front.DefaultIdentities).
func ServeEndpoint(st *embedded.Stack, function string, log *slog.Logger) (*Endpoint, error) {
	return ServeFront(st, sigv4front.LambdaInvoke(lambda.NewFromConfig(st.AWS), function), log)
}

// ServeFront is ServeEndpoint for a function called by invoke (the
// demo's operator function runs in process: redrive.Service.OperatorHandler).
//
// operator-a signs with the stack's own key (embedded.AccessKey), the one
// the local S3 (versitygw) knows, so that a shell with build/local.env
// reaches every service as operator-a; operator-b and the auditor have
// keys of their own, which only the endpoint and kumo take.
func ServeFront(st *embedded.Stack, invoke func(ctx context.Context, payload []byte) ([]byte, error), log *slog.Logger) (*Endpoint, error) {
	ids := sigv4front.DefaultIdentities(st.Env.Account)
	ids[0].AccessKeyID, ids[0].SecretAccessKey = embedded.AccessKey, embedded.SecretKey
	store, err := sigv4front.NewStore(ids...)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	front, err := sigv4front.New(sigv4front.Config{Store: store, Region: st.AWS.Region, Account: st.Env.Account,
		Invoke: invoke, Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &Endpoint{URL: "http://" + ln.Addr().String() + "/", Identities: ids, server: &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = e.server.Serve(ln) }()
	return e, nil
}

// ServeHandler is ServeFront for an operator entry point called in
// process (redrive.Service.OperatorHandler).
func ServeHandler(st *embedded.Stack, handler func(context.Context, json.RawMessage) (events.LambdaFunctionURLResponse, error), log *slog.Logger) (*Endpoint, error) {
	return ServeFront(st, func(ctx context.Context, payload []byte) ([]byte, error) {
		resp, err := handler(ctx, payload)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	}, log)
}

// Identity is the local identity named name.
func (e *Endpoint) Identity(name string) (sigv4front.Identity, error) {
	for _, id := range e.Identities {
		if id.Name == name {
			return id, nil
		}
	}
	return sigv4front.Identity{}, fmt.Errorf("no local identity %q", name)
}

// Config is st's AWS configuration with name's credentials: what a
// client signing as that identity uses.
func (e *Endpoint) Config(st *embedded.Stack, name string) (aws.Config, error) {
	id, err := e.Identity(name)
	if err != nil {
		return aws.Config{}, err
	}
	cfg := st.AWS.Copy()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken)
	return cfg, nil
}

// Client is a client of the endpoint signing as the identity name.
func (e *Endpoint) Client(st *embedded.Stack, name string) (sigv4front.Client, error) {
	id, err := e.Identity(name)
	return sigv4front.Client{URL: e.URL, Identity: id, Region: st.AWS.Region}, err
}

// Close stops the server.
func (e *Endpoint) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.server.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		_ = e.server.Close()
	}
}

// OperatorForTest builds ./functions/operator, starts it on st with the
// environment the template gives logicalID (the operator function's is
// the redrive function's), fronts it with a local operator endpoint, and
// stops both when the test ends.
func OperatorForTest(tb testing.TB, st *embedded.Stack, logicalID string, timeout time.Duration, extra ...string) (*Function, *Endpoint) {
	tb.Helper()
	fn := ForTest(tb, st, "operator", logicalID, timeout, extra...)
	e, err := ServeEndpoint(st, fn.Name, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	return fn, e
}
