package sigv4front

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SigV4 as AWS verifies a header-signed request. The canonical request is
// built here rather than by re-signing with the SDK, so that the caller's
// own SignedHeaders list, not the SDK's choice of headers, decides what is
// signed. The tests prove it against requests signed by the SDK and against
// AWS's published SigV4 test suite.
const (
	// service is the signing name of Lambda, function URLs included.
	service       = "lambda"
	algorithm     = "AWS4-HMAC-SHA256"
	terminator    = "aws4_request"
	amzDateLayout = "20060102T150405Z"
	dateLayout    = "20060102"
	// maxSkew is how far X-Amz-Date may be from the clock, either way.
	maxSkew = 5 * time.Minute
)

// authorization is a parsed Authorization header.
type authorization struct {
	credential    string   // AKID/DATE/REGION/SERVICE/aws4_request
	signedHeaders []string // lower-case names, as the caller listed them
	signature     string   // hex
}

// parseAuthorization parses the value of an Authorization header. A
// malformed header comes back as malformed, the AWS message that describes
// it; missing lists the parameters the header lacks, in AWS's words, for
// the caller to complete with the date check.
func parseAuthorization(h string) (a authorization, missing []string, malformed string) {
	scheme, rest, _ := strings.Cut(h, " ")
	if scheme != algorithm {
		return a, nil, "Authorization header algorithm only supports '" + algorithm + "'"
	}
	var haveCred, haveHeaders, haveSig bool
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			return a, nil, fmt.Sprintf("'%s' not a valid key=value pair (missing equal-sign) in Authorization header: '%s'.", part, h)
		}
		switch key {
		case "Credential":
			a.credential, haveCred = value, value != ""
		case "SignedHeaders":
			a.signedHeaders, haveHeaders = strings.Split(value, ";"), value != ""
		case "Signature":
			a.signature, haveSig = value, value != ""
		}
	}
	if !haveCred {
		missing = append(missing, "Authorization header requires 'Credential' parameter.")
	}
	if !haveSig {
		missing = append(missing, "Authorization header requires 'Signature' parameter.")
	}
	if !haveHeaders {
		missing = append(missing, "Authorization header requires 'SignedHeaders' parameter.")
	}
	return a, missing, ""
}

// scope is the parsed credential of an Authorization header.
type scope struct {
	accessKeyID, date, region, service, terminator string
}

func parseCredential(c string) (scope, bool) {
	p := strings.Split(c, "/")
	if len(p) != 5 {
		return scope{}, false
	}
	return scope{p[0], p[1], p[2], p[3], p[4]}, true
}

func (s scope) String() string {
	return s.date + "/" + s.region + "/" + s.service + "/" + s.terminator
}

// verify authenticates r, whose body is body, as AWS authenticates a SigV4
// request for service in region at now, and returns the caller. It does
// not decide whether the caller may invoke: that is the front's next step.
func verify(r *http.Request, body []byte, store *Store, region, service string, now time.Time) (Identity, *refusal) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Identity{}, forbidden("no-authorization")
	}
	auth, missing, malformed := parseAuthorization(h)
	if malformed != "" {
		return Identity{}, incomplete(malformed)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		missing = append(missing, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if len(missing) > 0 {
		return Identity{}, incomplete(strings.Join(missing, " ") + " Authorization=" + h)
	}
	sc, ok := parseCredential(auth.credential)
	if !ok {
		return Identity{}, incomplete("Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '" + auth.credential + "'")
	}
	if !slices.Contains(auth.signedHeaders, "host") {
		return Identity{}, incomplete("'Host' must be a 'SignedHeader' in the AWS Authorization.")
	}
	switch {
	case sc.terminator != terminator:
		return Identity{}, invalidSignature("scope", "Credential should be scoped with a valid terminator: 'aws4_request', not '"+sc.terminator+"'. ")
	case sc.date != signedAt.Format(dateLayout):
		return Identity{}, invalidSignature("scope-date", fmt.Sprintf(
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.",
			sc.date, signedAt.Format(dateLayout), amzDate))
	case sc.region != region:
		return Identity{}, invalidSignature("scope-region", "Credential should be scoped to a valid region, not '"+sc.region+"'. ")
	case sc.service != service:
		return Identity{}, invalidSignature("scope-service", "Credential should be scoped to correct service: '"+service+"'. ")
	}

	id, ok := store.Lookup(sc.accessKeyID)
	if !ok {
		return Identity{}, unrecognized("unknown-key")
	}
	token := r.Header.Get("X-Amz-Security-Token")
	if subtle.ConstantTimeCompare([]byte(token), []byte(id.SessionToken)) != 1 {
		return Identity{}, unrecognized("session-token")
	}

	now = now.UTC()
	if earliest := now.Add(-maxSkew); signedAt.Before(earliest) {
		return Identity{}, invalidSignature("expired", fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)",
			amzDate, earliest.Format(amzDateLayout), now.Format(amzDateLayout)))
	}
	if latest := now.Add(maxSkew); signedAt.After(latest) {
		return Identity{}, invalidSignature("not-yet-current", fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + 5 min.)",
			amzDate, latest.Format(amzDateLayout), now.Format(amzDateLayout)))
	}

	// The payload hash is always the hash of the body received. A caller's
	// X-Amz-Content-Sha256 must state it: Lambda has no UNSIGNED-PAYLOAD.
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed != "" && claimed != payloadHash {
		return Identity{}, signatureMismatch()
	}
	want := signature(id.SecretAccessKey, sc, amzDate, canonicalRequest(r, auth.signedHeaders, payloadHash))
	if subtle.ConstantTimeCompare([]byte(auth.signature), []byte(want)) != 1 {
		return Identity{}, signatureMismatch()
	}
	return id, nil
}

// canonicalRequest is step 1 of SigV4: method, URI, query, the signed
// headers with their values, the list of signed headers, the payload hash.
func canonicalRequest(r *http.Request, signedHeaders []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.Query()))
	b.WriteByte('\n')
	for _, name := range signedHeaders {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(canonicalHeaderValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// canonicalURI encodes the path as the client sent it (already
// percent-encoded once) a second time, as every service but S3 expects
// and as the SDK signs for service lambda.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return uriEncode(p, false)
}

// canonicalQuery encodes each name and value, then sorts by name and
// value: "the sorting occurs after encoding".
func canonicalQuery(q url.Values) string {
	pairs := make([]string, 0, len(q))
	for name, values := range q {
		for _, v := range values {
			pairs = append(pairs, uriEncode(name, true)+"="+uriEncode(v, true))
		}
	}
	slices.SortFunc(pairs, func(x, y string) int {
		xn, xv, _ := strings.Cut(x, "=")
		yn, yv, _ := strings.Cut(y, "=")
		if c := strings.Compare(xn, yn); c != 0 {
			return c
		}
		return strings.Compare(xv, yv)
	})
	return strings.Join(pairs, "&")
}

// canonicalHeaderValue joins the header's values with commas, each trimmed
// and with runs of spaces collapsed to one.
func canonicalHeaderValue(r *http.Request, name string) string {
	var values []string
	switch name {
	case "host":
		values = []string{r.Host} // net/http moves Host out of r.Header
	case "content-length":
		values = r.Header.Values(name)
		if len(values) == 0 && r.ContentLength >= 0 {
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	default:
		values = r.Header.Values(name)
	}
	for i, v := range values {
		values[i] = collapseSpaces(strings.TrimSpace(v))
	}
	return strings.Join(values, ",")
}

// collapseSpaces turns each run of spaces into one space.
func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// uriEncode percent-encodes every byte but the RFC 3986 unreserved
// characters (and '/' unless encodeSlash), with upper-case hex.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xF])
		}
	}
	return b.String()
}

// signature is steps 2 to 4 of SigV4: the string to sign, the signing key
// derived from the secret and the scope, and their HMAC in hex.
func signature(secret string, sc scope, amzDate, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	toSign := algorithm + "\n" + amzDate + "\n" + sc.String() + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + secret)
	for _, part := range []string{sc.date, sc.region, sc.service, sc.terminator} {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
