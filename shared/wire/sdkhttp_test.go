package wire

import (
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// Every function's SDK clients send through sdkhttp (an answered call
// never fails on its own request body: docs/emulators.md).
func TestFunctionsSendThroughSDKHTTP(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, _, err := awsConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !sdkhttp.Wraps(cfg.HTTPClient) {
		t.Fatalf("the functions' HTTP client is %T, not sdkhttp's", cfg.HTTPClient)
	}
}
