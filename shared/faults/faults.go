// Package faults injects AWS failures through the SDK clients, for the soak
// and its test: DynamoDB throttling and 5xx, S3 503s, SQS SendMessageBatch
// partial failures, and process crashes at a chosen request.
//
// Throttles, 5xx and 503s are answered by the injector in place of the
// service, before the request reaches it: that is what those responses mean
// (the service did not apply the request), and the SDK's retryer sees
// exactly the response a real endpoint sends. A partial batch failure drops
// the failed entries from the request before it is sent and reports them in
// the response's Failed list, so a failed entry was never enqueued. The
// ambiguous case, a request applied whose response never arrives, is what a
// Crash produces.
package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// Kinds of injected faults, the keys of Counts.
const (
	DynamoDBThrottle = "dynamodb throttling (400)"
	DynamoDB5xx      = "dynamodb internal error (500)"
	S3SlowDown       = "s3 slow down (503)"
	SQSBatchEntry    = "sqs SendMessageBatch entry failed"
)

// Injector fails a share of requests. It is safe for concurrent use.
type Injector struct {
	rate float64
	// FailFirst fails the first request to DynamoDB and to S3 and the first
	// SendMessageBatch entry whatever the rate, so a short run is sure to
	// meet every kind of fault.
	FailFirst bool
	first     sync.Map // service → struct{}
	mu        sync.Mutex
	rng       *rand.Rand
	counts    sync.Map // kind → *atomic.Int64
	calls     sync.Map // service → *atomic.Int64
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

// HTTPClient wraps base: DynamoDB requests fail with a throttle or a 500,
// S3 requests with a 503 SlowDown, each at the injector's rate.
func (in *Injector) HTTPClient(base aws.HTTPClient) aws.HTTPClient {
	return doFunc(func(req *http.Request) (*http.Response, error) {
		svc := Service(req)
		in.add(&in.calls, svc)
		switch svc {
		case "dynamodb":
			if fail, which := in.roll(svc); fail {
				if which < 0.5 {
					in.add(&in.counts, DynamoDBThrottle)
					return respond(req, http.StatusBadRequest, "application/x-amz-json-1.0",
						`{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput (injected)."}`), nil
				}
				in.add(&in.counts, DynamoDB5xx)
				return respond(req, http.StatusInternalServerError, "application/x-amz-json-1.0",
					`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error (injected)."}`), nil
			}
		case "s3":
			if fail, _ := in.roll(svc); fail {
				in.add(&in.counts, S3SlowDown)
				return respond(req, http.StatusServiceUnavailable, "application/xml",
					`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate (injected).</Message><RequestId>faults</RequestId></Error>`), nil
			}
		}
		return base.Do(req)
	})
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
