// Package latency adds AWS's per-call latency to the SDK clients of the
// benchmarks: the emulators answer in microseconds, so on them alone the
// CPU work around each call weighs as it never does against AWS, and the
// waits that decide a run's throughput on AWS do not exist. The model's
// figures and their sources are in docs/performance.md.
package latency

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/faults"
)

// Model is a median latency per call, by "service Operation" (as
// faults.Operation names a request: "dynamodb PutItem", "s3 PutObject",
// "kms Sign") or, failing that, by service; each call draws uniformly
// within ±Jitter of it.
type Model struct {
	By     map[string]time.Duration
	Jitter float64
}

// AWS is the model of calls from a Lambda function to services in its
// region (docs/performance.md says where each figure comes from).
var AWS = Model{Jitter: 0.3, By: map[string]time.Duration{
	"dynamodb":                    6 * time.Millisecond,
	"dynamodb Query":              8 * time.Millisecond,
	"dynamodb Scan":               8 * time.Millisecond,
	"dynamodb BatchGetItem":       8 * time.Millisecond,
	"dynamodb BatchWriteItem":     8 * time.Millisecond,
	"dynamodb TransactWriteItems": 10 * time.Millisecond,
	"sqs":                         15 * time.Millisecond,
	"s3":                          25 * time.Millisecond,
	"kms":                         8 * time.Millisecond,
	"kms Sign":                    15 * time.Millisecond,
	"monitoring":                  15 * time.Millisecond,
	"lambda":                      20 * time.Millisecond,
	"sts":                         15 * time.Millisecond,
}}

// Median is the model's median for op ("service Operation"); 0 when the
// model has none for it or its service.
func (m Model) Median(op string) time.Duration {
	if d, ok := m.By[op]; ok {
		return d
	}
	svc, _, _ := strings.Cut(op, " ")
	return m.By[svc]
}

// Waiter sleeps the model's latency for one call at a time; it is safe for
// concurrent use.
type Waiter struct {
	m   Model
	mu  sync.Mutex
	rng *rand.Rand
}

// Waiter returns a Waiter drawing from a generator seeded with seed.
func (m Model) Waiter(seed uint64) *Waiter {
	return &Waiter{m: m, rng: rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))}
}

// Wait sleeps one draw of op's latency ("service Operation").
func (w *Waiter) Wait(op string) {
	d := w.m.Median(op)
	if d <= 0 {
		return
	}
	w.mu.Lock()
	f := 1 + w.m.Jitter*(2*w.rng.Float64()-1)
	w.mu.Unlock()
	time.Sleep(time.Duration(float64(d) * f))
}

// Client returns base with the model's latency before each request, drawn
// from a generator seeded with seed.
func (m Model) Client(base aws.HTTPClient, seed uint64) aws.HTTPClient {
	if base == nil {
		base = http.DefaultClient
	}
	return &client{w: m.Waiter(seed), base: base}
}

type client struct {
	w    *Waiter
	base aws.HTTPClient
}

func (c *client) Do(req *http.Request) (*http.Response, error) {
	c.w.Wait(faults.Operation(req))
	return c.base.Do(req)
}
