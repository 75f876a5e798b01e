package latency_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/latency"
)

type nop struct{}

func (nop) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

func signed(t *testing.T, svc, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://aws/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/"+svc+"/aws4_request, SignedHeaders=host, Signature=x")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	return req
}

// The model names the operation's own figure, else its service's; a call
// waits at least the median less the jitter.
func TestModelDrawsByOperation(t *testing.T) {
	m := latency.AWS
	for op, want := range map[string]time.Duration{
		"dynamodb PutItem": 6 * time.Millisecond, "dynamodb Query": 8 * time.Millisecond, "sqs SendMessageBatch": 15 * time.Millisecond,
		"s3 PutObject": 25 * time.Millisecond, "kms Sign": 15 * time.Millisecond, "kms GenerateMac": 8 * time.Millisecond, "ec2 RunInstances": 0,
	} {
		if got := m.Median(op); got != want {
			t.Errorf("%s: %s, want %s", op, got, want)
		}
	}
	c := latency.Model{By: map[string]time.Duration{"dynamodb": 20 * time.Millisecond}, Jitter: 0.5}.Client(nop{}, 1)
	start := time.Now()
	if _, err := c.Do(signed(t, "dynamodb", "DynamoDB_20120810.GetItem")); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 10*time.Millisecond {
		t.Fatalf("waited %s, the model's least is 10 ms", waited)
	}
}
