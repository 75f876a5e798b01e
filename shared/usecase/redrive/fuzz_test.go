package redrive_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// FuzzParseRequest: any input is either a valid request within the limits
// or a *RequestError; never a panic, never a half-parsed request.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"source":"s","requested_by":"me","batch_size":50,"max_messages":10}`))
	f.Add([]byte(`{"source":"s","requested_by":"me","batch_size":51}`))
	f.Add([]byte(`{"action":"settle","source":"arn:aws:sqs:us-east-1:1:s","requested_by":"x","first_seen_from":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"source":"s","requested_by":"me","ids":["s#a","s#b"],"classes":["poison"],"rate_per_second":1.5}`))
	f.Add([]byte(`{"action":"correct","source":"s","requested_by":"me","ids":["s#a"],"reason":"typo","payload":"{\"a\":1}"}`))
	f.Add([]byte(`{"action":"policies","source":"s","requested_by":"schedule:policies"}`))
	f.Add([]byte(`{"source":"s","requested_by":"policy:pol-1"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := redrive.ParseRequest(raw)
		if err != nil {
			var re *redrive.RequestError
			if !errors.As(err, &re) || len(re.Problems) == 0 {
				t.Fatalf("error %v is not a RequestError with problems", err)
			}
			return
		}
		if req.Source == "" || req.RequestedBy == "" || req.BatchSize < 1 || req.BatchSize > redrive.MaxBatchSize ||
			req.MaxMessages < 1 || req.MaxMessages > redrive.MaxMaxMessages || req.RatePerSecond < 0 ||
			(req.Action != redrive.ActionRedrive && req.Action != redrive.ActionSettle && req.Action != redrive.ActionCorrect && req.Action != redrive.ActionPolicies) {
			t.Fatalf("accepted out-of-limits request %+v", req)
		}
		if req.Action == redrive.ActionCorrect && (len(req.IDs) != 1 || req.Payload == "" || req.Reason == "" || req.DryRun) {
			t.Fatalf("accepted an incomplete correction %+v", req)
		}
		if req.Action != redrive.ActionCorrect && (req.Payload != "" || req.Reason != "" || req.NewKey) {
			t.Fatalf("accepted correction fields on %s", req.Action)
		}
		if strings.HasPrefix(req.RequestedBy, "policy:") && len(req.RequestedBy) > len("policy:") {
			t.Fatalf("an outside request acts as a standing policy: %q", req.RequestedBy)
		}
	})
}
