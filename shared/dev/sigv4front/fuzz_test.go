package sigv4front

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAuthorization feeds any Authorization header to the parser and to
// the whole verification: neither may panic, a header the parser accepts
// has all three parts, and no made-up header authenticates.
func FuzzAuthorization(f *testing.F) {
	for _, seed := range []string{
		"",
		"AWS4-HMAC-SHA256",
		"AWS4-HMAC-SHA256 ",
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/lambda/aws4_request,SignedHeaders=host,Signature=",
		"AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=;;;, Signature==",
		"AWS4-HMAC-SHA256 Credential, SignedHeaders, Signature",
		"AWS4-HMAC-SHA256 ,,,,",
		"AWS4-ECDSA-P256-SHA256 Credential=a/b/c/d/e, SignedHeaders=host, Signature=00",
		"Bearer eyJhbGciOiJIUzI1NiJ9.e30.x",
		"AWS4-HMAC-SHA256 Credential=a/b/c/d/e/f, SignedHeaders=host, Signature=00",
		"AWS4-HMAC-SHA256 Credential=\x00/\xff/é/d/aws4_request, SignedHeaders=\x00, Signature=\n",
	} {
		f.Add(seed)
	}
	store := mustStore(f, Identity{Name: "example", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: suiteSecret, MayInvoke: true})
	f.Fuzz(func(t *testing.T, header string) {
		a, missing, malformed := parseAuthorization(header)
		if malformed == "" && len(missing) == 0 && (a.credential == "" || a.signature == "" || len(a.signedHeaders) == 0) {
			t.Fatalf("accepted %q with an empty part: %+v", header, a)
		}
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/ops", strings.NewReader("{}"))
		r.Header["Authorization"] = []string{header}
		r.Header.Set("X-Amz-Date", "20150830T123600Z")
		if id, ref := verify(r, []byte("{}"), store, "us-east-1", service, suiteTime); ref == nil {
			t.Fatalf("made-up header %q authenticated as %q", header, id.Name)
		}
	})
}
