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
)

// Model is the latency of one AWS call from a Lambda function in the
// same region, by kind of call. The emulators answer in microseconds;
// only the model says how long a function runs on AWS. The figures are
// assumptions (typical single-digit-millisecond DynamoDB calls, tens of
// milliseconds for an S3 PUT), not measurements; docs/operations.md
// "Storm capacity" states them.
type Model struct {
	DynamoDBRead     time.Duration // GetItem, BatchGetItem, Query
	DynamoDBWrite    time.Duration // PutItem, UpdateItem, DeleteItem
	DynamoDBTransact time.Duration // TransactWriteItems
	S3Put            time.Duration // PutObject
	S3Other          time.Duration // GET, HEAD, LIST
	KMSCall          time.Duration // Sign, GenerateMac, …
	Other            time.Duration
}

// DefaultModel is the model `make capacity` uses.
var DefaultModel = Model{
	DynamoDBRead: 5 * time.Millisecond, DynamoDBWrite: 6 * time.Millisecond, DynamoDBTransact: 10 * time.Millisecond,
	S3Put: 25 * time.Millisecond, S3Other: 15 * time.Millisecond, KMSCall: 10 * time.Millisecond, Other: 10 * time.Millisecond,
}

func (m Model) String() string {
	return fmt.Sprintf("DynamoDB read %s, write %s, TransactWriteItems %s; S3 PUT %s, other S3 %s; KMS %s; other %s",
		ms(m.DynamoDBRead), ms(m.DynamoDBWrite), ms(m.DynamoDBTransact), ms(m.S3Put), ms(m.S3Other), ms(m.KMSCall), ms(m.Other))
}

func ms(d time.Duration) string { return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond)) }

func (m Model) latency(op string) time.Duration {
	svc, name, _ := strings.Cut(op, " ")
	switch svc {
	case "dynamodb":
		switch name {
		case "PutItem", "UpdateItem", "DeleteItem":
			return m.DynamoDBWrite
		case "TransactWriteItems":
			return m.DynamoDBTransact
		}
		return m.DynamoDBRead
	case "s3":
		if name == "PutObject" {
			return m.S3Put
		}
		return m.S3Other
	case "kms":
		return m.KMSCall
	}
	return m.Other
}

// Calls is an HTTP client that adds the model's latency to every request
// and counts the requests by operation, and the bytes of every S3
// PutObject.
type Calls struct {
	Base  aws.HTTPClient
	Model Model

	mu       sync.Mutex
	ops      map[string]int
	putBytes int64
}

// NewCalls wraps base.
func NewCalls(base aws.HTTPClient, m Model) *Calls {
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
	time.Sleep(c.Model.latency(op))
	return c.Base.Do(req)
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
