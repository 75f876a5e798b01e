package redrive

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// recordAnswer reads one try's answer: what SQS accepted, what it refused
// for good, and what to try again (failed, or left out of the answer and
// so possibly sent).
func TestRecordAnswer(t *testing.T) {
	t.Parallel()
	ok := func(id, msg string) sqstypes.SendMessageBatchResultEntry {
		return sqstypes.SendMessageBatchResultEntry{Id: aws.String(id), MessageId: aws.String(msg)}
	}
	failed := func(id, code string, sender bool) sqstypes.BatchResultErrorEntry {
		return sqstypes.BatchResultErrorEntry{Id: aws.String(id), Code: aws.String(code), SenderFault: sender}
	}
	for _, tc := range []struct {
		name    string
		out     sqs.SendMessageBatchOutput
		pending []int
		prior   []sent // res before the try (nil: all zero)
		again   []int
		want    []sent
	}{
		{
			name:    "all accepted",
			out:     sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{ok("0", "m0"), ok("1", "m1")}},
			pending: []int{0, 1},
			want:    []sent{{messageID: "m0"}, {messageID: "m1"}},
		},
		{
			name: "a sender fault is refused for good, a server fault is tried again",
			out: sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{ok("0", "m0")},
				Failed: []sqstypes.BatchResultErrorEntry{failed("1", "InvalidMessageContents", true), failed("2", "InternalError", false)}},
			pending: []int{0, 1, 2},
			again:   []int{2},
			want:    []sent{{messageID: "m0"}, {refused: true, code: "InvalidMessageContents"}, {code: "InternalError"}},
		},
		{
			name:    "an entry left out of the answer may be enqueued: possibly sent, tried again",
			out:     sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{ok("0", "m0"), ok("7", "foreign"), ok("x", "junk")}},
			pending: []int{0, 1},
			again:   []int{1},
			want:    []sent{{messageID: "m0"}, {maybe: true, code: "unanswered entry"}},
		},
		{
			name: "an entry both accepted and failed counts as accepted",
			out: sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{ok("0", "m0")},
				Failed: []sqstypes.BatchResultErrorEntry{failed("0", "InternalError", false)}},
			pending: []int{0},
			want:    []sent{{messageID: "m0"}},
		},
		{
			name:    "a retry keeps what earlier tries learned",
			out:     sqs.SendMessageBatchOutput{Successful: []sqstypes.SendMessageBatchResultEntry{ok("1", "m1")}},
			pending: []int{1},
			prior:   []sent{{messageID: "m0"}, {maybe: true, code: "unanswered entry"}},
			want:    []sent{{messageID: "m0"}, {messageID: "m1", maybe: true, code: "unanswered entry"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := make([]sent, len(tc.want))
			copy(res, tc.prior)
			again := recordAnswer(&tc.out, len(res), tc.pending, res)
			if !slices.Equal(again, tc.again) {
				t.Fatalf("again %v, want %v", again, tc.again)
			}
			if !slices.Equal(res, tc.want) {
				t.Fatalf("res %+v, want %+v", res, tc.want)
			}
		})
	}
}

// A run that is not approved runs dry when it is high risk.
func TestUnapproved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  Request
		dry  bool
	}{
		{"an ordinary run", Request{Action: ActionRedrive, MaxMessages: 100}, false},
		{"parked records", Request{Action: ActionRedrive, MaxMessages: 10, IncludeParked: true}, true},
		{"above the threshold", Request{Action: ActionRedrive, MaxMessages: 101}, true},
		{"approved", Request{Action: ActionRedrive, MaxMessages: 101, IncludeParked: true, Approve: true}, false},
		{"asked to be dry", Request{Action: ActionRedrive, MaxMessages: 101, DryRun: true}, false},
		{"settling", Request{Action: ActionSettle, MaxMessages: 101}, false},
	} {
		if got := unapproved(tc.req, 100) != ""; got != tc.dry {
			t.Errorf("%s: dry %v, want %v", tc.name, got, tc.dry)
		}
	}
}
