package sdkhttp_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// smithyBody is a request body as smithy-go builds it: its safe closer,
// which implements io.WriterTo.
func smithyBody(t *testing.T) io.ReadCloser {
	t.Helper()
	req := smithyhttp.NewStackRequest().(*smithyhttp.Request)
	req.URL.Scheme, req.URL.Host = "https", "example.com"
	r, err := req.SetStream(bytes.NewReader([]byte("payload")))
	if err != nil {
		t.Fatal(err)
	}
	built := r.Build(context.Background())
	if _, ok := built.Body.(io.WriterTo); !ok {
		t.Fatalf("smithy's request body %T is no io.WriterTo: the race below cannot happen, and this package is not needed", built.Body)
	}
	return built.Body
}

// capture is a Doer that keeps the body it was handed.
type capture struct{ body io.ReadCloser }

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	c.body = r.Body
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// The race, step by step: net/http's last copy of a request body (the
// check for bytes past its length, io.Copy to io.Discard) runs after
// smithy closed the body because the answer had come. smithy's body then
// fails the copy with io.EOF, which net/http takes for a write error (it
// closes the connection the answer is still being read from); the body
// the client hands on ends the copy cleanly.
func TestACopyAfterTheCloseIsACleanEnd(t *testing.T) {
	t.Parallel()
	raw := smithyBody(t)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, raw); !errors.Is(err, io.EOF) {
		t.Fatalf("a copy of smithy's closed body = %v; want io.EOF (if smithy changed, re-check docs/emulators.md)", err)
	}

	var c capture
	req, _ := http.NewRequest(http.MethodPost, "https://example.com", nil)
	req.Body = smithyBody(t)
	if _, err := sdkhttp.Client(&c).Do(req); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.body.(io.WriterTo); ok {
		t.Fatalf("the body handed on is %T, an io.WriterTo", c.body)
	}
	if err := req.Body.Close(); err != nil { // smithy closes the request's body
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, c.body); n != 0 || err != nil {
		t.Fatalf("a copy of the closed body handed on = %d, %v; want 0, nil", n, err)
	}
	// Read whole before the close, it is the same bytes.
	req.Body = smithyBody(t)
	if _, err := sdkhttp.Client(&c).Do(req); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c.body); err != nil || string(b) != "payload" {
		t.Fatalf("the body handed on reads %q, %v", b, err)
	}
	if sdkhttp.Client(sdkhttp.Client(&c)) != sdkhttp.Client(&c) {
		t.Error("Client wraps a client twice")
	}
}

// earlyAnswer answers every call 200 with answer at once and keeps the
// request's body, as net/http does when an answer arrives while its write
// goroutine is still in the body: that goroutine's last step, the copy of
// what is left past the body's length into io.Discard, is the test's to
// run, after the SDK call returned (and smithy closed the body).
type earlyAnswer struct {
	answer string
	bodies chan io.ReadCloser
}

func (e *earlyAnswer) Do(r *http.Request) (*http.Response, error) {
	e.bodies <- r.Body
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(e.answer)), ContentLength: int64(len(e.answer))}, nil
}

// sendBatch sends ten entries of body with client, SDK retries off (a
// failure would be redrive's "possibly sent").
func sendBatch(t *testing.T, client sdkhttp.Doer, endpoint, body string) error {
	t.Helper()
	api := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: client,
		Credentials: credentials.NewStaticCredentialsProvider("x", "y", ""), Retryer: retry.AddWithMaxAttempts(retry.NewStandard(), 1)})
	var entries []sqstypes.SendMessageBatchRequestEntry
	for j := range 10 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(body)})
	}
	out, err := api.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(endpoint + "/q"), Entries: entries})
	if err == nil && len(out.Successful) != 10 {
		err = fmt.Errorf("%d of 10 entries successful", len(out.Successful))
	}
	return err
}

// batchAnswer is SQS's answer to sendBatch: every entry successful.
func batchAnswer(body string) string {
	var b strings.Builder
	b.WriteString(`{"Successful":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"Id":"%d","MessageId":"m-%d","MD5OfMessageBody":"%x"}`, i, i, md5.Sum([]byte(body)))
	}
	b.WriteString(`],"Failed":[]}`)
	return b.String()
}

// The race through a real SQS client: SendMessageBatch is answered 200,
// every entry successful, while net/http's write goroutine has its last
// copy of the body still to run. With the SDK's body that copy fails
// (net/http would close the connection the answer is read from, and the
// call fail: "possibly sent", sent again); with this package's client it
// ends cleanly.
func TestAnAnswerBeforeTheLastCopyLeavesTheCallWhole(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 1024)
	for _, c := range []struct {
		name    string
		wrap    func(sdkhttp.Doer) sdkhttp.Doer
		wantEOF bool
	}{
		{"the SDK's body", func(d sdkhttp.Doer) sdkhttp.Doer { return d }, true},
		{"this package's client", sdkhttp.Client, false},
	} {
		e := &earlyAnswer{answer: batchAnswer(body), bodies: make(chan io.ReadCloser, 1)}
		if err := sendBatch(t, c.wrap(e), "https://sqs.us-east-1.amazonaws.com", body); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := io.Copy(io.Discard, <-e.bodies) // net/http's check for bytes past the length
		if gotEOF := errors.Is(err, io.EOF); gotEOF != c.wantEOF {
			t.Errorf("%s: the last copy after the answer = %v; want io.EOF %v", c.name, err, c.wantEOF)
		}
	}
}

// Through net/http on loopback, the client's bodies reach SQS whole: each
// call once, its ten entries intact, answered as a success.
func TestBodiesArriveWholeOnLoopback(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("y", 8<<10)
	answer := batchAnswer(body)
	var calls, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength || strings.Count(string(b), body) != 10 {
			bad.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	const n = 50
	client := sdkhttp.Client(nil)
	for i := range n {
		if err := sendBatch(t, client, srv.URL, body); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if calls.Load() != n || bad.Load() != 0 {
		t.Fatalf("%d calls reached the server for %d batches, %d of them not whole", calls.Load(), n, bad.Load())
	}
}

// The race in net/http itself: a server that sends an answer's headers at
// once and its body a moment later (the client's write goroutine is then
// still on the request when Do returns and smithy closes the body), many
// calls at a time. With this package's client none fails; the SDK's own
// client's failures are logged (their number depends on the machine).
func TestTheRaceOnLoopback(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("z", 1024)
	answer := batchAnswer(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(2 * time.Millisecond)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	run := func(client sdkhttp.Doer) (failed int64, last error) {
		var n atomic.Int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 60 {
					if err := sendBatch(t, client, srv.URL, body); err != nil {
						n.Add(1)
						mu.Lock()
						last = err
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		return n.Load(), last
	}
	if failed, last := run(sdkhttp.Client(nil)); failed > 0 {
		t.Errorf("%d of 960 answered batches failed with this package's client; the last: %v", failed, last)
	}
	failed, last := run(awshttp.NewBuildableClient())
	t.Logf("the SDK's own client: %d of 960 answered batches failed (the last: %v)", failed, last)
}
