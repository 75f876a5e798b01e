package capacity

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/latency"
)

// describe is the model as `make capacity` prints it: each median, by
// "service Operation" or service, sorted.
func describe(m latency.Model) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m.By)) {
		parts = append(parts, fmt.Sprintf("%s %g ms", k, float64(m.By[k])/float64(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// Calls is an HTTP client that adds the model's median latency to every
// request (latency.Model.Median: the same figures as the benchmarks',
// without their jitter, so that a projection is repeatable) and counts the
// requests by operation, and the bytes of every S3 PutObject.
type Calls struct {
	Base  aws.HTTPClient
	Model latency.Model

	mu       sync.Mutex
	ops      map[string]int
	putBytes int64
}

// NewCalls wraps base.
func NewCalls(base aws.HTTPClient, m latency.Model) *Calls {
	if base == nil {
		base = http.DefaultClient
	}
	return &Calls{Base: base, Model: m, ops: map[string]int{}}
}

// Do implements aws.HTTPClient.
func (c *Calls) Do(req *http.Request) (*http.Response, error) {
	op := s3Operation(req, faults.Operation(req))
	c.mu.Lock()
	c.ops[op]++
	if op == "s3 PutObject" && req.ContentLength > 0 {
		c.putBytes += req.ContentLength
	}
	c.mu.Unlock()
	time.Sleep(c.Model.Median(op))
	return c.Base.Do(req)
}

// Unmodelled lists the calls made so far that m has no latency for (they
// waited nothing, so the durations would be short of AWS's), sorted, with
// their counts ("" when none).
func (c *Calls) Unmodelled(m latency.Model) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	missing := map[string]int{}
	for op, n := range c.ops {
		if m.Median(op) == 0 {
			missing[op] = n
		}
	}
	return Snapshot{Ops: missing}.String()
}

// s3Operation names an S3 request the SDK sends without an x-id by its
// method and subresource, so that it is priced right: "s3 GET" may be a
// GetObject, a ListObjectsV2 or a GetObjectRetention, "s3 PUT" a
// PutObjectTagging.
func s3Operation(req *http.Request, op string) string {
	method, ok := strings.CutPrefix(op, "s3 ")
	if !ok || strings.ContainsAny(method, "abcdefghijklmnopqrstuvwxyz") {
		return op // not S3, or named by its x-id
	}
	q := req.URL.Query()
	sub := func(name, get, put string) (string, bool) {
		if _, ok := q[name]; !ok {
			return "", false
		}
		if method == http.MethodGet {
			return get, true
		}
		return put, true
	}
	if q.Get("list-type") == "2" {
		return "s3 ListObjectsV2"
	}
	for _, s := range []struct{ q, get, put string }{
		{"versions", "ListObjectVersions", "ListObjectVersions"},
		{"tagging", "GetObjectTagging", "PutObjectTagging"},
		{"retention", "GetObjectRetention", "PutObjectRetention"},
		{"legal-hold", "GetObjectLegalHold", "PutObjectLegalHold"},
	} {
		if name, ok := sub(s.q, s.get, s.put); ok {
			return "s3 " + name
		}
	}
	switch method {
	case http.MethodGet:
		return "s3 GetObject" // the SDK lists with list-type=2
	case http.MethodHead:
		return "s3 HeadObject"
	case http.MethodDelete:
		return "s3 DeleteObject"
	case http.MethodPut:
		return "s3 PutObject"
	}
	return op
}

// Snapshot is what a Calls has counted so far.
type Snapshot struct {
	Ops        map[string]int
	S3PutBytes int64
}

// Snapshot returns the counts so far.
func (c *Calls) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{Ops: maps.Clone(c.ops), S3PutBytes: c.putBytes}
}

// Sub is what happened between earlier and s.
func (s Snapshot) Sub(earlier Snapshot) Snapshot {
	out := Snapshot{Ops: map[string]int{}, S3PutBytes: s.S3PutBytes - earlier.S3PutBytes}
	for k, v := range s.Ops {
		if d := v - earlier.Ops[k]; d != 0 {
			out.Ops[k] = d
		}
	}
	return out
}

// String lists the operations, sorted.
func (s Snapshot) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Ops)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.Ops[k]))
	}
	return strings.Join(parts, ", ")
}
