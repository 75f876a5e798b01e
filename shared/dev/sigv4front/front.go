// Package sigv4front stands in locally for what AWS puts in front of a
// Lambda function URL with AuthType AWS_IAM: it verifies the caller's
// Signature Version 4 (service lambda, the stack's region), checks that the
// caller may invoke, builds the events.LambdaFunctionURLRequest Lambda would
// build, invokes the function and turns its answer into the HTTP response.
// A refused request never reaches the function.
//
// It is a dev kit for the embedded stack and for tests, never linked by a
// function. kumo serves function URLs too, but accepts any well-formed
// signature without checking it, so a test that needs authentication to
// hold must go through this front. What it does not do: presigned
// (query-string) requests and the Date header instead of X-Amz-Date are
// refused as unsigned or incomplete; IAM is one flag per identity; CORS and
// response streaming are not served.
package sigv4front

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// MaxPayload is Lambda's limit on a synchronous invocation's payload
// (6 MB, 6,291,456 bytes). The front refuses a larger body, and a body
// whose event (base64 inflates a binary body by a third) would be larger.
const MaxPayload = 6 * 1024 * 1024

// Config is what a Front needs.
type Config struct {
	// Store holds the identities that may sign requests. Required.
	Store *Store
	// Region is the stack's region; signatures must be scoped to it.
	// Required.
	Region string
	// Account is the function owner's account (requestContext.accountId).
	// Required.
	Account string
	// URLID is the function URL's id (requestContext.apiId and the first
	// label of domainName). Default: 32 characters derived from Account
	// and Region, like a real url-id.
	URLID string
	// Now is the clock for the 5-minute skew check and the event's time.
	// Default: time.Now.
	Now func() time.Time
	// Invoke calls the function with the event's JSON and returns the
	// function's JSON answer. An error means no answer: the Lambda API
	// refused or failed, or the function failed (then a *FunctionError).
	// Required.
	Invoke func(ctx context.Context, payload []byte) ([]byte, error)
	// Logger gets one line per request. Default: slog.Default().
	Logger *slog.Logger
}

// Validate reports every missing required field at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("missing Store"))
	}
	if c.Region == "" {
		errs = append(errs, errors.New("missing Region"))
	}
	if c.Account == "" {
		errs = append(errs, errors.New("missing Account"))
	}
	if c.Invoke == nil {
		errs = append(errs, errors.New("missing Invoke"))
	}
	return errors.Join(errs...)
}

// Front is the http.Handler that plays the function URL.
type Front struct {
	cfg Config
}

// New returns a Front for cfg, with its defaults filled in.
func New(cfg Config) (*Front, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sigv4front config: %w", err)
	}
	if cfg.URLID == "" {
		sum := sha256.Sum256([]byte(cfg.Account + "/" + cfg.Region))
		cfg.URLID = hex.EncodeToString(sum[:16])
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Front{cfg: cfg}, nil
}

// DomainName is the function URL's host name, as AWS would name it.
func (f *Front) DomainName() string {
	return f.cfg.URLID + ".lambda-url." + f.cfg.Region + ".on.aws"
}

// ServeHTTP authenticates and authorizes the request, and only then
// invokes the function with it.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newRequestID()
	w.Header().Set("x-amzn-RequestId", requestID)
	log := f.cfg.Logger.With(slog.String("requestId", requestID), slog.String("method", r.Method), slog.String("path", r.URL.Path))

	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayload+1))
	if err != nil {
		log.Warn("function url: body unreadable", slog.String("error", err.Error()))
		http.Error(w, "body unreadable", http.StatusBadRequest)
		return
	}
	if len(body) > MaxPayload {
		f.refuse(w, log, tooLarge(), Identity{})
		return
	}
	now := f.cfg.Now()
	id, ref := verify(r, body, f.cfg.Store, f.cfg.Region, service, now)
	if ref == nil && !id.MayInvoke {
		ref = forbidden("not-authorized")
	}
	if ref != nil {
		f.refuse(w, log, ref, id)
		return
	}
	log = log.With(slog.String("identity", id.Name), slog.String("accessKey", id.AccessKeyID))

	payload, err := json.Marshal(f.event(r, body, id, requestID, now))
	if err != nil { // a map of strings and plain fields: cannot happen
		log.Error("function url: event not encodable", slog.String("error", err.Error()))
		writeBadGateway(w)
		return
	}
	if len(payload) > MaxPayload {
		f.refuse(w, log, tooLarge(), id)
		return
	}
	answer, err := f.cfg.Invoke(r.Context(), payload)
	if err != nil {
		var fe *FunctionError
		outcome := "invoke-failed"
		if errors.As(err, &fe) {
			outcome = "function-error"
		}
		log.Warn("function url: no answer", slog.String("outcome", outcome), slog.String("error", err.Error()))
		writeBadGateway(w)
		return
	}
	status, ok := writeAnswer(w, answer)
	if !ok {
		log.Warn("function url: answer malformed", slog.String("outcome", "bad-answer"), slog.Int("status", status))
		return
	}
	log.Info("function url: answered", slog.String("outcome", "invoked"), slog.Int("status", status))
}

// tooLarge is the Lambda Invoke API's answer to a payload over 6 MB
// (RequestTooLargeException, 413); the function URL's own text for it is
// not confirmed by a source.
func tooLarge() *refusal {
	return &refusal{http.StatusRequestEntityTooLarge, "RequestTooLargeException", "Message",
		fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", MaxPayload), "too-large"}
}

func (f *refusal) write(w http.ResponseWriter) {
	body, _ := json.Marshal(map[string]string{f.key: f.message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", f.errType)
	w.WriteHeader(f.status)
	_, _ = w.Write(body)
}

func (f *Front) refuse(w http.ResponseWriter, log *slog.Logger, ref *refusal, id Identity) {
	ref.write(w)
	log.Info("function url: refused", slog.String("outcome", ref.reason), slog.Int("status", ref.status), slog.String("identity", id.Name))
}

// event builds what Lambda sends the function for r: payload format 2.0
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html).
func (f *Front) event(r *http.Request, body []byte, id Identity, requestID string, now time.Time) events.LambdaFunctionURLRequest {
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	headers, cookies := eventHeaders(r, sourceIP)
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for name, values := range q {
			query[name] = strings.Join(values, ",")
		}
	}
	ev := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: f.cfg.Account,
			RequestID: requestID,
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
					AccessKey: id.AccessKeyID,
					AccountID: id.Account,
					CallerID:  id.UserID,
					UserARN:   id.ARN,
					UserID:    id.UserID,
				},
			},
			APIID:        f.cfg.URLID,
			DomainName:   f.DomainName(),
			DomainPrefix: f.cfg.URLID,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	ev.Body, ev.IsBase64Encoded = eventBody(r.Header, body)
	return ev
}

// eventHeaders lower-cases the names, joins repeated values with commas,
// moves cookies to their own list and sets host and the x-forwarded-*
// headers from the connection, as Lambda does.
func eventHeaders(r *http.Request, sourceIP string) (map[string]string, []string) {
	headers := make(map[string]string, len(r.Header)+4)
	var cookies []string
	for name, values := range r.Header {
		name = strings.ToLower(name)
		if name == "cookie" {
			for _, v := range values {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[name] = strings.Join(values, ",")
	}
	proto, port := "http", "80"
	if r.TLS != nil {
		proto, port = "https", "443"
	}
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		port = p
	}
	headers["host"] = r.Host
	headers["x-forwarded-for"] = sourceIP
	headers["x-forwarded-proto"] = proto
	headers["x-forwarded-port"] = port
	return headers, cookies
}

// eventBody returns the body as text when it is UTF-8 of a textual content
// type without content encoding, and in base64 otherwise ("If the content
// type of the request is binary, the body is base64-encoded"). An absent
// content type counts as binary.
func eventBody(h http.Header, body []byte) (string, bool) {
	if len(body) == 0 {
		return "", false
	}
	if textual(h) && utf8.Valid(body) {
		return string(body), false
	}
	return base64.StdEncoding.EncodeToString(body), true
}

func textual(h http.Header) bool {
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-www-form-urlencoded":
		return true
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")
}

// writeAnswer turns the function's answer into the response, as Lambda
// does: JSON with a statusCode is a LambdaFunctionURLResponse (its body
// base64-decoded when isBase64Encoded, its cookies as Set-Cookie); any
// other JSON is sent as it is, as a 200 application/json; anything that is
// not JSON, or a response object that does not decode, is a 502. ok is
// false for a 502.
func writeAnswer(w http.ResponseWriter, answer []byte) (status int, ok bool) {
	if !json.Valid(answer) {
		writeBadGateway(w)
		return http.StatusBadGateway, false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(answer, &probe) != nil || probe["statusCode"] == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(answer)
		return http.StatusOK, true
	}
	var resp events.LambdaFunctionURLResponse
	if json.Unmarshal(answer, &resp) != nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		writeBadGateway(w)
		return http.StatusBadGateway, false
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			writeBadGateway(w)
			return http.StatusBadGateway, false
		}
		body = decoded
	}
	for name, value := range resp.Headers {
		w.Header().Set(name, value)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return resp.StatusCode, true
}

// writeBadGateway is the function URL's answer when the function gives no
// usable answer: 502 "Internal Server Error" (awsdocs/aws-lambda-developer-
// guide#430, cargo-lambda/cargo-lambda#578; kumo sends the same as
// text/plain).
func writeBadGateway(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, "Internal Server Error")
}

// newRequestID returns a random UUID, the form of Lambda's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
