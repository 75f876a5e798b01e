package dlqctl

import (
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// dlqctl's SDK clients send through sdkhttp (docs/emulators.md): a
// redrive it asks for or an approval it writes is never sent twice
// because an answer was misread.
func TestDlqctlSendsThroughSDKHTTP(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	c, err := connect(context.Background(), "", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if !sdkhttp.Wraps(c.AWS.HTTPClient) {
		t.Fatalf("dlqctl's HTTP client is %T, not sdkhttp's", c.AWS.HTTPClient)
	}
}
