package sigv4front

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	testAccount = "000000000000"
	testRegion  = "eu-west-1"
)

var testNow = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

// testIdentities are the default users and a role session.
func testIdentities() (a, b, auditor, session Identity) {
	ids := DefaultIdentities(testAccount)
	session = Identity{
		Name:            "alice",
		AccessKeyID:     "ASIAQ3EXAMPLESESSION",
		SecretAccessKey: "session/secret+alice",
		SessionToken:    "IQoJb3JpZ2luX2VjEXAMPLE//session==",
		ARN:             "arn:aws:sts::" + testAccount + ":assumed-role/Ops/alice",
		Account:         testAccount,
		UserID:          "AROAQ3EXAMPLEROLEID00:alice",
		MayInvoke:       true,
	}
	return ids[0], ids[1], ids[2], session
}

// fakeFunction records the events it gets and gives one answer, or the
// answer of respond when set.
type fakeFunction struct {
	answer  []byte
	err     error
	respond func(payload []byte) ([]byte, error)

	mu     sync.Mutex
	events [][]byte
}

func (f *fakeFunction) invoke(_ context.Context, payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, payload)
	if f.respond != nil {
		return f.respond(payload)
	}
	return f.answer, f.err
}

func (f *fakeFunction) calls() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events
}

func newTestFront(t testing.TB, fn *fakeFunction) *Front {
	t.Helper()
	a, b, auditor, session := testIdentities()
	front, err := New(Config{
		Store:   mustStore(t, a, b, auditor, session),
		Region:  testRegion,
		Account: testAccount,
		Now:     func() time.Time { return testNow },
		Invoke:  fn.invoke,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return front
}

// serve sends r, as a server receives it, through front.
func serve(front *Front, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	front.ServeHTTP(rec, r)
	return rec
}

func TestFrontPassesEachCallerToTheFunction(t *testing.T) {
	t.Parallel()
	a, b, _, session := testIdentities()
	cases := []struct {
		id       Identity
		signedAt time.Time
	}{
		{a, testNow},
		{b, testNow.Add(-5 * time.Minute)}, // the oldest signature AWS still takes
		{session, testNow.Add(5 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.id.Name, func(t *testing.T) {
			t.Parallel()
			fn := &fakeFunction{answer: []byte(`{"statusCode":200,"body":"{\"ok\":true}"}`)}
			front := newTestFront(t, fn)
			body := `{"action":"redrive","id":"q-1"}`
			r, _ := roundTrip(t, signed(t, tc.id.Credentials(), testRegion, tc.signedAt, "POST",
				"http://127.0.0.1:4599/ops/redrive?dry=1&dry=2&note=a%20b", "application/json", body, http.Header{"Cookie": {"a=1; b=2"}}))
			rec := serve(front, r)
			if rec.Code != http.StatusOK || rec.Body.String() != `{"ok":true}` {
				t.Fatalf("answer %d %q", rec.Code, rec.Body)
			}
			calls := fn.calls()
			if len(calls) != 1 {
				t.Fatalf("%d invocations, want 1", len(calls))
			}
			var ev events.LambdaFunctionURLRequest
			if err := json.Unmarshal(calls[0], &ev); err != nil {
				t.Fatal(err)
			}
			wantIAM := events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccessKey: tc.id.AccessKeyID, AccountID: tc.id.Account, CallerID: tc.id.UserID, UserARN: tc.id.ARN, UserID: tc.id.UserID,
			}
			if ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil || *ev.RequestContext.Authorizer.IAM != wantIAM {
				t.Fatalf("authorizer %+v, want iam %+v", ev.RequestContext.Authorizer, wantIAM)
			}
			ctx := ev.RequestContext
			checks := []struct {
				what      string
				got, want any
			}{
				{"version", ev.Version, "2.0"},
				{"rawPath", ev.RawPath, "/ops/redrive"},
				{"rawQueryString", ev.RawQueryString, "dry=1&dry=2&note=a%20b"},
				{"queryStringParameters", ev.QueryStringParameters["dry"] + "|" + ev.QueryStringParameters["note"], "1,2|a b"},
				{"cookies", strings.Join(ev.Cookies, "|"), "a=1|b=2"},
				{"body", ev.Body, body},
				{"isBase64Encoded", ev.IsBase64Encoded, false},
				{"header content-type", ev.Headers["content-type"], "application/json"},
				{"header x-amz-date", ev.Headers["x-amz-date"], tc.signedAt.Format(amzDateLayout)},
				{"header host", ev.Headers["host"], "127.0.0.1:4599"},
				{"header x-forwarded-for", ev.Headers["x-forwarded-for"], "192.0.2.10"},
				{"header x-forwarded-port", ev.Headers["x-forwarded-port"], "4599"},
				{"header cookie", ev.Headers["cookie"], ""},
				{"accountId", ctx.AccountID, testAccount},
				{"apiId", ctx.APIID, front.cfg.URLID},
				{"domainName", ctx.DomainName, front.cfg.URLID + ".lambda-url." + testRegion + ".on.aws"},
				{"domainPrefix", ctx.DomainPrefix, front.cfg.URLID},
				{"requestId", ctx.RequestID, rec.Header().Get("x-amzn-RequestId")},
				{"time", ctx.Time, "01/Dec/2026:10:30:00 +0000"},
				{"timeEpoch", ctx.TimeEpoch, testNow.UnixMilli()},
				{"http", ctx.HTTP, events.LambdaFunctionURLRequestContextHTTPDescription{
					Method: "POST", Path: "/ops/redrive", Protocol: "HTTP/1.1", SourceIP: "192.0.2.10", UserAgent: "Go-http-client/1.1"}},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
			if len(ctx.RequestID) != 36 || len(front.cfg.URLID) != 32 {
				t.Errorf("requestId %q or url id %q malformed", ctx.RequestID, front.cfg.URLID)
			}
		})
	}
}

func TestFrontRefusesWithoutInvoking(t *testing.T) {
	t.Parallel()
	a, _, auditor, session := testIdentities()
	const body = `{"action":"redrive"}`
	send := func(t *testing.T, creds aws.Credentials, region string, signedAt time.Time) *http.Request {
		r, _ := roundTrip(t, signed(t, creds, region, signedAt, "POST", "http://127.0.0.1:4599/ops", "application/json", body, nil))
		return r
	}
	withSecret := func(id Identity, secret string) aws.Credentials {
		c := id.Credentials()
		c.SecretAccessKey = secret
		return c
	}
	withToken := func(id Identity, token string) aws.Credentials {
		c := id.Credentials()
		c.SessionToken = token
		return c
	}
	const (
		forbiddenBody  = `{"Message":"Forbidden. For troubleshooting Function URL authorization issues, see: https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"}`
		mismatchBody   = `{"message":"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}`
		invalidKeyBody = `{"message":"The security token included in the request is invalid."}`
	)
	cases := []struct {
		name     string
		request  func(t *testing.T) *http.Request
		status   int
		errType  string
		wantBody string
	}{
		{"bad signature", func(t *testing.T) *http.Request {
			return send(t, withSecret(a, "not-the-secret"), testRegion, testNow)
		}, 403, "InvalidSignatureException", mismatchBody},
		{"tampered body", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(body, "redrive", "purge!!", 1)))
			return r
		}, 403, "InvalidSignatureException", mismatchBody},
		{"unknown access key", func(t *testing.T) *http.Request {
			return send(t, aws.Credentials{AccessKeyID: "AKIAUNKNOWNUNKNOWN00", SecretAccessKey: "x"}, testRegion, testNow)
		}, 403, "UnrecognizedClientException", invalidKeyBody},
		{"wrong region", func(t *testing.T) *http.Request {
			return send(t, a.Credentials(), "us-east-1", testNow)
		}, 403, "InvalidSignatureException", `{"message":"Credential should be scoped to a valid region, not 'us-east-1'. "}`},
		{"wrong service", func(t *testing.T) *http.Request {
			req := signed(t, a.Credentials(), testRegion, testNow, "POST", "http://127.0.0.1:4599/ops", "application/json", body, nil)
			if err := v4.NewSigner().SignHTTP(context.Background(), a.Credentials(), req, req.Header.Get("X-Amz-Content-Sha256"), "execute-api", testRegion, testNow); err != nil {
				t.Fatal(err)
			}
			r, _ := roundTrip(t, req)
			return r
		}, 403, "InvalidSignatureException", `{"message":"Credential should be scoped to correct service: 'lambda'. "}`},
		{"missing authorization", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Del("Authorization")
			return r
		}, 403, "AccessDeniedException", forbiddenBody},
		{"incomplete authorization", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+a.AccessKeyID+"/20261201/"+testRegion+"/lambda/aws4_request")
			return r
		}, 403, "IncompleteSignatureException", `{"message":"Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization=AWS4-HMAC-SHA256 Credential=` + a.AccessKeyID + `/20261201/` + testRegion + `/lambda/aws4_request"}`},
		{"missing X-Amz-Date", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Del("X-Amz-Date")
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIA/20261201/eu-west-1/lambda/aws4_request, SignedHeaders=host, Signature=00")
			return r
		}, 403, "IncompleteSignatureException", `{"message":"Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. Authorization=AWS4-HMAC-SHA256 Credential=AKIA/20261201/eu-west-1/lambda/aws4_request, SignedHeaders=host, Signature=00"}`},
		{"another scheme", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Set("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x")
			return r
		}, 403, "IncompleteSignatureException", `{"message":"Authorization header algorithm only supports 'AWS4-HMAC-SHA256'"}`},
		{"malformed parameter", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential "+a.AccessKeyID)
			return r
		}, 403, "IncompleteSignatureException", `{"message":"'Credential ` + a.AccessKeyID + `' not a valid key=value pair (missing equal-sign) in Authorization header: 'AWS4-HMAC-SHA256 Credential ` + a.AccessKeyID + `'."}`},
		{"host not signed", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), ";host;", ";", 1))
			return r
		}, 403, "IncompleteSignatureException", `{"message":"'Host' must be a 'SignedHeader' in the AWS Authorization."}`},
		{"date not in the scope's day", func(t *testing.T) *http.Request {
			r := send(t, a.Credentials(), testRegion, testNow)
			r.Header.Set("X-Amz-Date", "20261202T103000Z")
			return r
		}, 403, "InvalidSignatureException", `{"message":"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '20261201' != '20261202', from '20261202T103000Z'."}`},
		{"expired", func(t *testing.T) *http.Request {
			return send(t, a.Credentials(), testRegion, testNow.Add(-5*time.Minute-time.Second))
		}, 403, "InvalidSignatureException", `{"message":"Signature expired: 20261201T102459Z is now earlier than 20261201T102500Z (20261201T103000Z - 5 min.)"}`},
		{"from the future", func(t *testing.T) *http.Request {
			return send(t, a.Credentials(), testRegion, testNow.Add(5*time.Minute+time.Second))
		}, 403, "InvalidSignatureException", `{"message":"Signature not yet current: 20261201T103501Z is still later than 20261201T103500Z (20261201T103000Z + 5 min.)"}`},
		{"wrong session token", func(t *testing.T) *http.Request {
			return send(t, withToken(session, "IQoJb3JpZ2luX2VjEXAMPLE//other=="), testRegion, testNow)
		}, 403, "UnrecognizedClientException", invalidKeyBody},
		{"session token missing", func(t *testing.T) *http.Request {
			return send(t, withToken(session, ""), testRegion, testNow)
		}, 403, "UnrecognizedClientException", invalidKeyBody},
		{"session token with long-term keys", func(t *testing.T) *http.Request {
			return send(t, withToken(a, "IQoJb3JpZ2luX2VjEXAMPLE//session=="), testRegion, testNow)
		}, 403, "UnrecognizedClientException", invalidKeyBody},
		{"auditor", func(t *testing.T) *http.Request {
			return send(t, auditor.Credentials(), testRegion, testNow)
		}, 403, "AccessDeniedException", forbiddenBody},
		{"body over 6 MB", func(t *testing.T) *http.Request {
			return httptest.NewRequest("POST", "http://127.0.0.1:4599/ops", strings.NewReader(strings.Repeat("x", MaxPayload+1)))
		}, 413, "RequestTooLargeException", `{"Message":"Request must be smaller than 6291456 bytes for the InvokeFunction operation"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := &fakeFunction{answer: []byte(`{"statusCode":200}`)}
			rec := serve(newTestFront(t, fn), tc.request(t))
			if rec.Code != tc.status || rec.Header().Get("x-amzn-ErrorType") != tc.errType || rec.Body.String() != tc.wantBody {
				t.Errorf("got %d %s %s\nwant %d %s %s", rec.Code, rec.Header().Get("x-amzn-ErrorType"), rec.Body, tc.status, tc.errType, tc.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if n := len(fn.calls()); n != 0 {
				t.Errorf("the function was invoked %d times", n)
			}
		})
	}
}

func TestFrontEncodesBinaryBodiesInBase64(t *testing.T) {
	t.Parallel()
	a, _, _, _ := testIdentities()
	cases := []struct {
		name, contentType, body string
		base64                  bool
	}{
		{"json", "application/json; charset=utf-8", `{"é":1}`, false},
		{"text", "text/csv", "a,b\n1,2\n", false},
		{"vendor json", "application/vnd.dlqq+json", `{}`, false},
		{"octet stream", "application/octet-stream", "plain bytes", true},
		{"no content type", "", "plain bytes", true},
		{"invalid utf-8 text", "text/plain", "\xff\xfe", true},
		{"empty", "application/json", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := &fakeFunction{answer: []byte(`{}`)}
			r, _ := roundTrip(t, signed(t, a.Credentials(), testRegion, testNow, "PUT", "http://127.0.0.1:4599/b", tc.contentType, tc.body, nil))
			if rec := serve(newTestFront(t, fn), r); rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var ev events.LambdaFunctionURLRequest
			if err := json.Unmarshal(fn.calls()[0], &ev); err != nil {
				t.Fatal(err)
			}
			got := ev.Body
			if ev.IsBase64Encoded {
				raw, err := base64.StdEncoding.DecodeString(ev.Body)
				if err != nil {
					t.Fatal(err)
				}
				got = string(raw)
			}
			if ev.IsBase64Encoded != tc.base64 || got != tc.body {
				t.Fatalf("body %q (base64 %v), want %q (base64 %v)", ev.Body, ev.IsBase64Encoded, tc.body, tc.base64)
			}
		})
	}
}

func TestFrontWritesTheFunctionsAnswer(t *testing.T) {
	t.Parallel()
	a, _, _, _ := testIdentities()
	const badGateway = "Internal Server Error"
	cases := []struct {
		name        string
		answer      string
		err         error
		status      int
		contentType string
		body        string
		header      http.Header
	}{
		{name: "response object", answer: `{"statusCode":201,"headers":{"X-Dlqq-Id":"q-1","Content-Type":"text/plain"},"body":"made","cookies":["s=1; Max-Age=60","t=2"]}`,
			status: 201, contentType: "text/plain", body: "made", header: http.Header{"X-Dlqq-Id": {"q-1"}, "Set-Cookie": {"s=1; Max-Age=60", "t=2"}}},
		{name: "default content type", answer: `{"statusCode":409,"body":"{\"error\":\"conflict\"}"}`, status: 409, contentType: "application/json", body: `{"error":"conflict"}`},
		{name: "base64 body", answer: `{"statusCode":200,"headers":{"content-type":"application/octet-stream"},"body":"AP8=","isBase64Encoded":true}`,
			status: 200, contentType: "application/octet-stream", body: "\x00\xff"},
		{name: "json without statusCode", answer: `{"message":"Hello, world!"}`, status: 200, contentType: "application/json", body: `{"message":"Hello, world!"}`},
		{name: "json string", answer: `"Hello, world!"`, status: 200, contentType: "application/json", body: `"Hello, world!"`},
		{name: "function error object as an answer", answer: `{"errorMessage":"boom","errorType":"Error"}`, status: 200, contentType: "application/json", body: `{"errorMessage":"boom","errorType":"Error"}`},
		{name: "not json", answer: `Hello`, status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
		{name: "status not a number", answer: `{"statusCode":"200"}`, status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
		{name: "status out of range", answer: `{"statusCode":0}`, status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
		{name: "bad base64", answer: `{"statusCode":200,"body":"!!","isBase64Encoded":true}`, status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
		{name: "function error", err: fmtFunctionError(), status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
		{name: "invoke failed", err: errors.New("TooManyRequestsException: Rate Exceeded"), status: 502, contentType: "text/plain; charset=utf-8", body: badGateway},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := &fakeFunction{answer: []byte(tc.answer), err: tc.err}
			r, _ := roundTrip(t, signed(t, a.Credentials(), testRegion, testNow, "GET", "http://127.0.0.1:4599/ops", "", "", nil))
			rec := serve(newTestFront(t, fn), r)
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != tc.contentType || rec.Body.String() != tc.body {
				t.Fatalf("got %d %q %q, want %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.status, tc.contentType, tc.body)
			}
			for name, want := range tc.header {
				if got := rec.Header().Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
			if rec.Header().Get("x-amzn-RequestId") == "" {
				t.Error("no x-amzn-RequestId")
			}
		})
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"Store", "Region", "Account", "Invoke"} {
		if !strings.Contains(err.Error(), "missing "+want) {
			t.Errorf("error %q does not report %s", err, want)
		}
	}
}

func fmtFunctionError() error {
	return &FunctionError{Kind: "Unhandled", Payload: []byte(`{"errorMessage":"boom","errorType":"Error"}`)}
}
