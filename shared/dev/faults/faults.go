// Package faults injects AWS failures through the SDK clients, for the soak
// and its test: DynamoDB throttling and 5xx, S3 503s, SQS SendMessageBatch
// partial failures, writes applied whose answer is lost, and process
// crashes at a chosen request.
//
// Throttles, 5xx and 503s are answered by the injector in place of the
// service, before the request reaches it: that is what those responses mean
// (the service did not apply the request), and the SDK's retryer sees
// exactly the response a real endpoint sends. A partial batch failure drops
// the failed entries from the request before it is sent and reports them in
// the response's Failed list, so a failed entry was never enqueued.
//
// The ambiguous case, a request applied whose answer is lost, comes in two
// forms. In a live process (LostRate): a DynamoDB write (PutItem,
// UpdateItem, DeleteItem, TransactWriteItems), an S3 PutObject or an SQS
// SendMessageBatch is forwarded to the service, which applies it, and its
// response is thrown away; the caller gets a 500 of that service or a
// transport timeout instead, both of which the SDK's retryer retries, so
// the retry meets the state the first try left (a conditional write fails
// its condition, a batch is enqueued twice). On DynamoDB the SDK's
// automatic ClientRequestToken makes its retry of a TransactWriteItems
// succeed idempotently; the emulator ignores the token
// (docs/emulators.md), so here the retry fails its condition, which is
// what DynamoDB does too once the SDK's attempts are spent and the caller
// retries: the harder case. And in a dying process: a Crash.
package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
)

// Kinds of injected faults, the keys of Counts.
const (
	DynamoDBThrottle = "dynamodb throttling (400)"
	DynamoDB5xx      = "dynamodb internal error (500)"
	S3SlowDown       = "s3 slow down (503)"
	SQSBatchEntry    = "sqs SendMessageBatch entry failed"

	// Applied, then the answer is lost: the caller gets a 500 or a timeout.
	DynamoDBWriteLost500     = "dynamodb write applied, answer lost (500)"
	DynamoDBWriteLostTimeout = "dynamodb write applied, answer lost (timeout)"
	S3PutLost500             = "s3 PutObject applied, answer lost (500)"
	S3PutLostTimeout         = "s3 PutObject applied, answer lost (timeout)"
	SQSBatchLost500          = "sqs SendMessageBatch applied, answer lost (500)"
	SQSBatchLostTimeout      = "sqs SendMessageBatch applied, answer lost (timeout)"
)

// LostKinds are the applied-but-unanswered kinds, in pairs (500, timeout)
// by service.
var LostKinds = []string{DynamoDBWriteLost500, DynamoDBWriteLostTimeout, S3PutLost500, S3PutLostTimeout, SQSBatchLost500, SQSBatchLostTimeout}

// Injector fails a share of requests. It is safe for concurrent use.
type Injector struct {
	rate float64
	// FailFirst fails the first request to DynamoDB and to S3 and the first
	// SendMessageBatch entry whatever the rate, so a short run is sure to
	// meet every kind of fault.
	FailFirst bool
	// LostRate (0..1) is the share of DynamoDB writes, S3 PutObjects and
	// SQS SendMessageBatch calls that are applied and then answered with a
	// 500 or a timeout (half each). With FailFirst, the first two such
	// requests of each service meet one of each.
	LostRate float64
	first    sync.Map // service → struct{}
	mu       sync.Mutex
	rng      *rand.Rand
	counts   sync.Map // kind → *atomic.Int64
	calls    sync.Map // service → *atomic.Int64
}

// New returns an Injector that fails rate (0..1) of eligible requests, drawn
// from a seeded generator.
func New(rate float64, seed uint64) *Injector {
	return &Injector{rate: rate, rng: rand.New(rand.NewPCG(seed, seed^0x5bd1e995))}
}

func (in *Injector) roll(svc string) (bool, float64) {
	in.mu.Lock()
	fail, which := in.rng.Float64() < in.rate, in.rng.Float64()
	in.mu.Unlock()
	if in.FailFirst {
		if _, seen := in.first.LoadOrStore(svc, struct{}{}); !seen {
			fail = true
		}
	}
	return fail, which
}

func (in *Injector) add(m *sync.Map, k string) {
	v, _ := m.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func snapshot(m *sync.Map) map[string]int64 {
	out := map[string]int64{}
	m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Counts returns how many faults of each kind were injected.
func (in *Injector) Counts() map[string]int64 { return snapshot(&in.counts) }

// Calls returns how many HTTP requests each service received through the
// injector (faults included).
func (in *Injector) Calls() map[string]int64 { return snapshot(&in.calls) }

// lose decides whether an eligible request of svc is applied and its
// answer lost, and which kind (the 500 or the timeout) it meets.
func (in *Injector) lose(k500, kTimeout string) (string, bool) {
	if in.FailFirst {
		for _, k := range []string{k500, kTimeout} {
			if _, seen := in.first.LoadOrStore(k, struct{}{}); !seen {
				return k, true
			}
		}
	}
	in.mu.Lock()
	lost, which := in.rng.Float64() < in.LostRate, in.rng.Float64()
	in.mu.Unlock()
	if !lost {
		return "", false
	}
	if which < 0.5 {
		return k500, true
	}
	return kTimeout, true
}

// dynamoDBWrites are the DynamoDB operations that change the table.
var dynamoDBWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true, "BatchWriteItem": true}

// lostKinds names the applied-but-unanswered kinds a request is eligible
// for, if any.
func lostKinds(svc string, req *http.Request) (k500, kTimeout string, ok bool) {
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch {
	case svc == "dynamodb" && dynamoDBWrites[op]:
		return DynamoDBWriteLost500, DynamoDBWriteLostTimeout, true
	case svc == "sqs" && op == "SendMessageBatch":
		return SQSBatchLost500, SQSBatchLostTimeout, true
	case svc == "s3" && req.Method == http.MethodPut && req.URL.Query().Get("x-id") == "PutObject":
		return S3PutLost500, S3PutLostTimeout, true
	}
	return "", "", false
}

// Timeout is the transport error of a request whose answer did not arrive
// in time (a net.Error, as the SDK's HTTP client returns, which its
// retryer retries).
type Timeout struct{}

func (Timeout) Error() string   { return "injected: no answer in time (the request was applied)" }
func (Timeout) Timeout() bool   { return true }
func (Timeout) Temporary() bool { return true }

// loseAnswer forwards req to base (the service applies it), throws the
// response away and answers with kind's error instead.
func (in *Injector) loseAnswer(base aws.HTTPClient, req *http.Request, svc, kind string) (*http.Response, error) {
	resp, err := base.Do(req)
	if err != nil {
		return resp, err // it did not get there: nothing to lose
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	in.add(&in.counts, kind)
	if strings.HasSuffix(kind, "(timeout)") {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: Timeout{}}
	}
	switch svc {
	case "dynamodb":
		return respond(req, http.StatusInternalServerError, "application/x-amz-json-1.0",
			`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error (injected, the request was applied)."}`), nil
	case "sqs":
		r := respond(req, http.StatusInternalServerError, "application/x-amz-json-1.0",
			`{"__type":"com.amazonaws.sqs#InternalError","message":"We encountered an internal error. Please try again. (injected, the request was applied)"}`)
		r.Header.Set("X-Amzn-Query-Error", "InternalError;Receiver")
		return r, nil
	}
	return respond(req, http.StatusInternalServerError, "application/xml",
		`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again. (injected, the request was applied)</Message><RequestId>faults</RequestId></Error>`), nil
}

// HTTPClient wraps base: DynamoDB requests fail with a throttle or a 500,
// S3 requests with a 503 SlowDown, each at the injector's rate and before
// the service sees them; DynamoDB writes, S3 PutObjects and SQS
// SendMessageBatch calls that get through are applied and lose their
// answer at LostRate.
func (in *Injector) HTTPClient(base aws.HTTPClient) aws.HTTPClient {
	return doFunc(func(req *http.Request) (*http.Response, error) {
		if resp := in.notApplied(req); resp != nil {
			return resp, nil
		}
		svc := Service(req)
		if k500, kTimeout, ok := lostKinds(svc, req); ok {
			if kind, lost := in.lose(k500, kTimeout); lost {
				return in.loseAnswer(base, req, svc, kind)
			}
		}
		return base.Do(req)
	})
}

// notApplied answers req in place of the service with a fault that means
// the service did not apply it, at the injector's rate (nil: no fault).
func (in *Injector) notApplied(req *http.Request) *http.Response {
	svc := Service(req)
	in.add(&in.calls, svc)
	switch svc {
	case "dynamodb":
		if fail, which := in.roll(svc); fail {
			if which < 0.5 {
				in.add(&in.counts, DynamoDBThrottle)
				return respond(req, http.StatusBadRequest, "application/x-amz-json-1.0",
					`{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput (injected)."}`)
			}
			in.add(&in.counts, DynamoDB5xx)
			return respond(req, http.StatusInternalServerError, "application/x-amz-json-1.0",
				`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error (injected)."}`)
		}
	case "s3":
		if fail, _ := in.roll(svc); fail {
			in.add(&in.counts, S3SlowDown)
			return respond(req, http.StatusServiceUnavailable, "application/xml",
				`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate (injected).</Message><RequestId>faults</RequestId></Error>`)
		}
	}
	return nil
}

// Service is the SigV4 service name of a signed request ("dynamodb", "s3",
// "sqs", "monitoring", …), read from its credential scope.
func Service(req *http.Request) string {
	auth := req.Header.Get("Authorization")
	i := strings.Index(auth, "Credential=")
	if i < 0 {
		return ""
	}
	scope := strings.SplitN(auth[i+len("Credential="):], ",", 2)[0]
	parts := strings.Split(scope, "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[3]
}

// Operation names a signed request: its service and operation ("dynamodb
// PutItem", "s3 PutObject", "kms Sign"; an S3 request without an x-id,
// such as ListObjectsV2, by its method: "s3 GET").
func Operation(req *http.Request) string {
	svc := Service(req)
	if t := req.Header.Get("X-Amz-Target"); t != "" {
		return svc + " " + t[strings.LastIndexByte(t, '.')+1:]
	}
	if id := req.URL.Query().Get("x-id"); id != "" {
		return svc + " " + id
	}
	return svc + " " + req.Method
}

func respond(req *http.Request, status int, contentType, body string) *http.Response {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("X-Amzn-Requestid", "injected-fault")
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)), Request: req,
	}
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// APIOption adds the SendMessageBatch partial failures to a client's
// middleware stack (aws.Config.APIOptions): each entry fails at the
// injector's rate, is left out of the request and is reported in Failed
// with a server-side code, as SQS reports an entry it did not enqueue.
func (in *Injector) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dlqq-faults-partial-batch",
		func(ctx context.Context, input middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			p, ok := input.Parameters.(*sqs.SendMessageBatchInput)
			if !ok {
				return next.HandleInitialize(ctx, input)
			}
			var keep []sqstypes.SendMessageBatchRequestEntry
			var failed []sqstypes.BatchResultErrorEntry
			for _, e := range p.Entries {
				if fail, _ := in.roll("sqs-batch-entry"); fail {
					in.add(&in.counts, SQSBatchEntry)
					failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"),
						Message: aws.String("injected partial failure"), SenderFault: false})
					continue
				}
				keep = append(keep, e)
			}
			if len(failed) == 0 {
				return next.HandleInitialize(ctx, input)
			}
			if len(keep) == 0 {
				return middleware.InitializeOutput{Result: &sqs.SendMessageBatchOutput{Failed: failed}}, middleware.Metadata{}, nil
			}
			cp := *p
			cp.Entries = keep
			input.Parameters = &cp
			out, md, err := next.HandleInitialize(ctx, input)
			if err == nil {
				if o, ok := out.Result.(*sqs.SendMessageBatchOutput); ok {
					o.Failed = append(o.Failed, failed...)
				}
			}
			return out, md, err
		}), middleware.After)
}

// ErrCrashed is what every request of a crashed process gets.
var ErrCrashed = errors.New("injected crash: the process is gone")

// Crash is one process's network: at its at-th request the process dies.
// That request either reaches AWS with its response lost (applied) or never
// leaves; every later request fails at once, so nothing after the crash
// point has any effect, as after a real crash. cancel stops the process's
// work.
type Crash struct {
	base    aws.HTTPClient
	at      int64
	applied bool
	cancel  context.CancelFunc
	n       atomic.Int64
	crashed atomic.Bool
	// Point describes the request the crash hit, once it has.
	point atomic.Value
}

// NewCrash returns a process network over base that crashes at request at
// (never when at ≤ 0). applied says whether that request reaches AWS.
func NewCrash(base aws.HTTPClient, at int64, applied bool, cancel context.CancelFunc) *Crash {
	return &Crash{base: base, at: at, applied: applied, cancel: cancel}
}

// Do implements aws.HTTPClient.
func (c *Crash) Do(req *http.Request) (*http.Response, error) {
	if c.crashed.Load() {
		return nil, ErrCrashed
	}
	if c.n.Add(1) != c.at {
		return c.base.Do(req)
	}
	c.crashed.Store(true)
	what := Service(req) + " " + req.Header.Get("X-Amz-Target") + " " + req.Method + " " + req.URL.Path
	if c.applied {
		if resp, err := c.base.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		what += " (applied, response lost)"
	} else {
		what += " (never sent)"
	}
	c.point.Store(what)
	c.cancel()
	return nil, ErrCrashed
}

// Crashed reports whether the crash happened, and at which request.
func (c *Crash) Crashed() (bool, string) {
	p, _ := c.point.Load().(string)
	return c.crashed.Load(), p
}

// Requests is how many requests the process made (the crashing one included).
func (c *Crash) Requests() int64 { return c.n.Load() }

// LoseAnswers is an HTTP client that forwards every request and, for the
// first N whose X-Amz-Target is Target, throws the answer away and returns
// a DynamoDB 500 instead: the request was applied, and the SDK retries it.
// Tests use it to make a write applied-but-unanswered deterministically.
type LoseAnswers struct {
	Base   aws.HTTPClient
	Target string
	N      int
	mu     sync.Mutex
	lost   int
}

// Do implements aws.HTTPClient.
func (l *LoseAnswers) Do(req *http.Request) (*http.Response, error) {
	resp, err := l.Base.Do(req)
	if err != nil || req.Header.Get("X-Amz-Target") != l.Target {
		return resp, err
	}
	l.mu.Lock()
	lose := l.lost < l.N
	if lose {
		l.lost++
	}
	l.mu.Unlock()
	if !lose {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return respond(req, http.StatusInternalServerError, "application/x-amz-json-1.0",
		`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost (injected)"}`), nil
}

// LoseDynamoDBAnswers returns a DynamoDB client on cfg (against the
// emulator) that loses the answers of the first n calls of operation (a
// DynamoDB target such as "TransactWriteItems"), and the LoseAnswers that
// counts them.
func LoseDynamoDBAnswers(cfg aws.Config, operation string, n int) (*dynamodb.Client, *LoseAnswers) {
	cfg = cfg.Copy()
	lose := &LoseAnswers{Base: cfg.HTTPClient, Target: "DynamoDB_20120810." + operation, N: n}
	if lose.Base == nil {
		lose.Base = http.DefaultClient
	}
	cfg.HTTPClient = lose
	return awsclients.New(cfg, awsclients.Options{Local: true}).DynamoDB, lose
}

// Lost is how many answers were thrown away.
func (l *LoseAnswers) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}
