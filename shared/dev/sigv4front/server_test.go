package sigv4front

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestFrontOverHTTP goes through a real server: SDK-signed requests from
// an operator and from the auditor, sent by net/http.
func TestFrontOverHTTP(t *testing.T) {
	t.Parallel()
	a, _, auditor, _ := testIdentities()
	// The function answers with the caller's ARN from authorizer.iam.
	echo := func(payload []byte) ([]byte, error) {
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		return json.Marshal(events.LambdaFunctionURLResponse{
			StatusCode: http.StatusAccepted,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       `{"caller":"` + ev.RequestContext.Authorizer.IAM.UserARN + `","body":` + ev.Body + `}`,
		})
	}
	fn := &fakeFunction{respond: echo}
	srv := httptest.NewServer(newTestFront(t, fn))
	t.Cleanup(srv.Close)

	cases := []struct {
		id     Identity
		status int
		body   string
	}{
		{a, http.StatusAccepted, `{"caller":"` + a.ARN + `","body":{"action":"list"}}`},
		{auditor, http.StatusForbidden, `{"Message":"` + forbiddenMessage + `"}`},
	}
	for _, tc := range cases {
		t.Run(tc.id.Name, func(t *testing.T) {
			body := []byte(`{"action":"list"}`)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/ops?verbose=1", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if err := Sign(t.Context(), req, body, tc.id.Credentials(), testRegion, testNow); err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || string(got) != tc.body {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, got, tc.status, tc.body)
			}
		})
	}
	if n := len(fn.calls()); n != 1 {
		t.Fatalf("%d invocations, want 1 (the operator's)", n)
	}
}
