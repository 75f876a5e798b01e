package sigv4front

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The AWS SigV4 test suite's header-signed requests, as published in
// awslabs/aws-c-auth (tests/aws-signing-test-suite/v4/*/header-signed-
// request.txt): credentials AKIDEXAMPLE, region us-east-1, service
// "service", signed at 20150830T123600Z. They are a second, independent
// proof of the verifier, next to the SDK. The suite's path cases (get-utf8,
// get-space, the dot-segment ones) are left out: the suite encodes the path
// once, while Lambda, like every service but S3, encodes the already
// encoded path again, as the SDK does (TestVerifyAcceptsSDKSignedRequests
// covers such paths).
const (
	suiteKey    = "AKIDEXAMPLE"
	suiteSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	suiteToken  = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
	suiteAuthz  = "Authorization:AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
)

var suiteTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

var suiteCases = []struct{ name, raw string }{
	{"get-vanilla", "GET / HTTP/1.1\nHost:example.amazonaws.com\nX-Amz-Date:20150830T123600Z\n" +
		suiteAuthz + "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\n\n"},
	{"get-vanilla-query-order-key-case", "GET /?Param2=value2&Param1=value1 HTTP/1.1\nHost:example.amazonaws.com\n" +
		suiteAuthz + "SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500\nX-Amz-Date:20150830T123600Z\n\n"},
	{"get-vanilla-query-unreserved", "GET /?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz HTTP/1.1\nHost:example.amazonaws.com\n" +
		suiteAuthz + "SignedHeaders=host;x-amz-date, Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197\nX-Amz-Date:20150830T123600Z\n\n"},
	{"get-header-value-trim", "GET / HTTP/1.1\nHost:example.amazonaws.com\nMy-Header1: value1\nMy-Header2: \"a   b   c\"\n" +
		suiteAuthz + "SignedHeaders=host;my-header1;my-header2;x-amz-date, Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736\nX-Amz-Date:20150830T123600Z\n\n"},
	{"get-header-key-duplicate", "GET / HTTP/1.1\nHost:example.amazonaws.com\nMy-Header1:value2\nMy-Header1:value2\nMy-Header1:value1\n" +
		suiteAuthz + "SignedHeaders=host;my-header1;x-amz-date, Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea\nX-Amz-Date:20150830T123600Z\n\n"},
	{"get-header-value-order", "GET / HTTP/1.1\nHost:example.amazonaws.com\nMy-Header1:value4\nMy-Header1:value1\nMy-Header1:value3\nMy-Header1:value2\n" +
		suiteAuthz + "SignedHeaders=host;my-header1;x-amz-date, Signature=08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01\nX-Amz-Date:20150830T123600Z\n\n"},
	{"post-header-key-sort", "POST / HTTP/1.1\nHost:example.amazonaws.com\nMy-Header1:value1\n" +
		suiteAuthz + "SignedHeaders=host;my-header1;x-amz-date, Signature=c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c\nX-Amz-Date:20150830T123600Z\n\n"},
	{"get-vanilla-with-session-token", "GET / HTTP/1.1\nHost:example.amazonaws.com\n" +
		suiteAuthz + "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8\nX-Amz-Date:20150830T123600Z\nX-Amz-Security-Token:" + suiteToken + "\n\n"},
	{"post-x-www-form-urlencoded", "POST / HTTP/1.1\nContent-Type:application/x-www-form-urlencoded\nHost:example.amazonaws.com\nContent-Length:13\nx-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n" +
		suiteAuthz + "SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, Signature=d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b\nX-Amz-Date:20150830T123600Z\n\nParam1=value1"},
}

func TestVerifyAcceptsTheAWSTestSuite(t *testing.T) {
	t.Parallel()
	for _, tc := range suiteCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			token := ""
			if strings.Contains(tc.raw, "X-Amz-Security-Token") {
				token = suiteToken
			}
			store := mustStore(t, Identity{Name: "example", AccessKeyID: suiteKey, SecretAccessKey: suiteSecret, SessionToken: token})
			r, body := readRequest(t, tc.raw)
			if _, ref := verify(r, body, store, "us-east-1", "service", suiteTime); ref != nil {
				t.Fatalf("refused: %s", ref.message)
			}
			// The same request with one byte of its signature changed fails.
			r, body = readRequest(t, strings.Replace(tc.raw, "Signature=", "Signature=0", 1))
			if _, ref := verify(r, body, store, "us-east-1", "service", suiteTime); ref == nil || ref.reason != "signature" {
				t.Fatalf("altered signature: got %+v, want a signature mismatch", ref)
			}
		})
	}
}

func TestCanonicalRequestOfGetVanilla(t *testing.T) {
	t.Parallel()
	r, _ := readRequest(t, suiteCases[0].raw)
	got := canonicalRequest(r, []string{"host", "x-amz-date"}, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	want := "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got != want {
		t.Fatalf("canonical request\n got %q\nwant %q", got, want)
	}
}

// TestVerifyAcceptsSDKSignedRequests signs requests of every awkward shape
// with the SDK's signer (Sign), sends them through a real HTTP encoding and
// verifies them on the other side; each then fails once altered in a
// signed part, and still passes with an unsigned header added.
func TestVerifyAcceptsSDKSignedRequests(t *testing.T) {
	t.Parallel()
	user := Identity{Name: "u", AccessKeyID: "AKIAEXAMPLEUSER00001", SecretAccessKey: "user/secret+key", Account: "111122223333"}
	role := Identity{Name: "r", AccessKeyID: "ASIAEXAMPLEROLE00001", SecretAccessKey: "role-secret", SessionToken: "FQoGZXIvYXdzEXAMPLE//token=="}
	store := mustStore(t, user, role)
	signedAt := time.Date(2026, 12, 1, 23, 58, 30, 0, time.UTC)

	cases := []struct {
		name, method, target, contentType, body string
		header                                  http.Header
		id                                      Identity
	}{
		{name: "get root", method: "GET", target: "http://127.0.0.1:8080/", id: user},
		{name: "get no path", method: "GET", target: "http://127.0.0.1:8080", id: user},
		{name: "post json", method: "POST", target: "http://127.0.0.1:8080/ops/redrive", contentType: "application/json", body: `{"id":"q-1","yes":true}`, id: user},
		{name: "empty post", method: "POST", target: "http://127.0.0.1:8080/ops/list", id: user},
		{name: "reserved path", method: "GET", target: "http://127.0.0.1:8080/a b/(c)/d!e*f'g/%2Fslash/é/~x", id: user},
		{name: "awkward query", method: "GET", target: "http://127.0.0.1:8080/q?b=2&a=2&a=1&sp=a%20b&plus=a+b&slash=a/b&dash=a-b&u=%C3%A9&empty=&flag", id: user},
		{name: "repeated and spaced headers", method: "PUT", target: "http://127.0.0.1:8080/h", contentType: "text/plain", body: "x",
			header: http.Header{"X-Dlqq-Trace": {"  one   two ", "three"}, "Content-Encoding": {"identity"}}, id: user},
		{name: "role session", method: "POST", target: "http://localhost:9000/ops/approve?id=7", contentType: "application/json", body: `{}`, id: role},
		{name: "binary body", method: "POST", target: "http://127.0.0.1:8080/bin", contentType: "application/octet-stream", body: "\x00\xff\xfe", id: user},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := signed(t, tc.id.Credentials(), "us-east-1", signedAt, tc.method, tc.target, tc.contentType, tc.body, tc.header)
			r, body := roundTrip(t, req)
			now := signedAt.Add(90 * time.Second) // across midnight: the scope date is the signing date
			got, ref := verify(r, body, store, "us-east-1", service, now)
			if ref != nil {
				t.Fatalf("refused: %s (%s)", ref.message, ref.reason)
			}
			if got.Name != tc.id.Name {
				t.Fatalf("identity %q, want %q", got.Name, tc.id.Name)
			}

			r, body = roundTrip(t, signed(t, tc.id.Credentials(), "us-east-1", signedAt, tc.method, tc.target, tc.contentType, tc.body, tc.header))
			r.Header.Set("X-Unsigned", "added on the way")
			r.Header.Set("User-Agent", "changed")
			if _, ref := verify(r, body, store, "us-east-1", service, now); ref != nil {
				t.Fatalf("an unsigned header broke the signature: %s", ref.message)
			}

			alterations := map[string]func(r *http.Request, body []byte) []byte{
				"method": func(r *http.Request, body []byte) []byte { r.Method = "DELETE"; return body },
				"path":   func(r *http.Request, body []byte) []byte { r.URL.Path += "x"; r.URL.RawPath = ""; return body },
				"query":  func(r *http.Request, body []byte) []byte { r.URL.RawQuery += "&extra=1"; return body },
				"host":   func(r *http.Request, body []byte) []byte { r.Host = "127.0.0.1:8081"; return body },
				"body":   func(r *http.Request, body []byte) []byte { return append(body, ' ') },
				"date": func(r *http.Request, body []byte) []byte {
					r.Header.Set("X-Amz-Date", signedAt.Add(time.Second).Format(amzDateLayout))
					return body
				},
			}
			for what, alter := range alterations {
				r, body := roundTrip(t, signed(t, tc.id.Credentials(), "us-east-1", signedAt, tc.method, tc.target, tc.contentType, tc.body, tc.header))
				body = alter(r, body)
				if _, ref := verify(r, body, store, "us-east-1", service, now); ref == nil || ref.reason != "signature" {
					t.Errorf("altered %s: got %+v, want a signature mismatch", what, ref)
				}
			}
		})
	}
}

func TestSignRefusesABodyTheRequestDoesNotCarry(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest("POST", "http://127.0.0.1:8080/ops", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(context.Background(), req, []byte(`{"other":1}`), aws.Credentials{AccessKeyID: "AKIA", SecretAccessKey: "s"}, "eu-west-1", suiteTime); err == nil {
		t.Fatal("Sign signed a body the request does not send")
	}
	if req.Header.Get("Authorization") != "" {
		t.Fatal("Sign left an Authorization header after refusing")
	}
}

func TestCanonicalQuerySortsAfterEncoding(t *testing.T) {
	t.Parallel()
	// '/' sorts after '-' but "%2F" before it: the encoded order wins.
	r, _ := http.NewRequest("GET", "http://h/?v=a-b&v=a/b&k=%20+", nil)
	if got, want := canonicalQuery(r.URL.Query()), "k=%20%20&v=a%2Fb&v=a-b"; got != want {
		t.Fatalf("canonical query %q, want %q", got, want)
	}
}

// signed returns a request signed by the SDK (through Sign) at signedAt.
func signed(t testing.TB, creds aws.Credentials, region string, signedAt time.Time, method, target, contentType, body string, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	if err := Sign(context.Background(), req, []byte(body), creds, region, signedAt); err != nil {
		t.Fatal(err)
	}
	return req
}

// roundTrip writes req as a client would send it and reads it back as a
// server receives it, with its body.
func roundTrip(t testing.TB, req *http.Request) (*http.Request, []byte) {
	t.Helper()
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		t.Fatal(err)
	}
	return readRequest(t, wire.String())
}

func readRequest(t testing.TB, raw string) (*http.Request, []byte) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.RemoteAddr = "192.0.2.10:54321"
	return r, body
}
