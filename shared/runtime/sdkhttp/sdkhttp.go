// Package sdkhttp is the HTTP client every SDK client of this project
// sends with: the SDK's own, with request bodies that net/http cannot end
// in a write error after the answer came.
//
// smithy-go wraps a request body in a safe closer that implements
// io.WriterTo, and closes it as soon as the client's Do returns. net/http
// streams the body from a goroutine of its own and returns the answer as
// soon as it arrives, so that goroutine may still be in its last copy of
// the body when smithy closes it. The closed WriterTo returns (0, io.EOF),
// io.Copy hands that EOF up as an error, net/http takes it for a failed
// write and closes the connection, and reading the answer's body (a 200
// whose entries all succeeded) then fails with "use of closed network
// connection". The SDK retries a PutItem that was applied; redrive must
// count a SendMessageBatch whose messages were enqueued as possibly sent
// twice, and send it again (docs/emulators.md, "The SDK on loopback").
// A body that is only an io.ReadCloser is copied with Read, and a Read
// after the close is a clean EOF: the copy ends without an error, the
// connection stays up, and the answer is read whole.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Doer is the SDK's HTTP client interface (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client returns next with request bodies stripped of io.WriterTo; next
// nil is the SDK's default client.
func Client(next Doer) Doer {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	if c, ok := next.(plainBodies); ok {
		return c
	}
	if b, ok := next.(*awshttp.BuildableClient); ok {
		// Redrive keeps up to about 80 requests in flight to one
		// endpoint (a batch's marks, 25 at a time in each of its calls
		// in flight, while the next batch is claimed): idle connections
		// for them all, so that none is closed after its call and opened
		// again (a TLS handshake) for the next.
		next = b.WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, MaxIdleConnsPerHost) })
	}
	return plainBodies{next: next}
}

// MaxIdleConnsPerHost is the least number of idle connections per host the
// SDK's default client keeps (its own default is 10).
const MaxIdleConnsPerHost = 100

// Use returns cfg sending through Client(cfg.HTTPClient): call it on what
// config.LoadDefaultConfig returns (the loader needs its own client to add
// a custom CA bundle, AWS_CA_BUNDLE, to it).
func Use(cfg aws.Config) aws.Config {
	cfg.HTTPClient = Client(cfg.HTTPClient)
	return cfg
}

type plainBodies struct{ next Doer }

// Wraps reports whether c sends through Client.
func Wraps(c Doer) bool {
	_, ok := c.(plainBodies)
	return ok
}

func (c plainBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		if _, ok := r.Body.(io.WriterTo); ok {
			r.Body = readCloser{r.Body}
		}
	}
	return c.next.Do(r)
}

// readCloser hides every method of its ReadCloser but Read and Close.
type readCloser struct{ io.ReadCloser }
