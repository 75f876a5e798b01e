package redrive

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
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

// risks names why a request needs a second person, by its source's
// four_eyes setting; a dry run, a settle and a policy's own run need none.
func TestRisks(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{}.withDefaults()}
	all := &quarantine.Source{Name: "s"}
	noParked := &quarantine.Source{Name: "s", FourEyes: map[quarantine.Risk]bool{quarantine.RiskLarge: true}}
	for _, tc := range []struct {
		name      string
		req       Request
		src       *quarantine.Source
		need, off []quarantine.Risk
	}{
		{"an ordinary run", Request{Action: ActionRedrive, MaxMessages: 100}, all, nil, nil},
		{"parked records", Request{Action: ActionRedrive, MaxMessages: 10, IncludeParked: true}, all, []quarantine.Risk{quarantine.RiskParked}, nil},
		{"above the threshold", Request{Action: ActionRedrive, MaxMessages: 101}, all, []quarantine.Risk{quarantine.RiskLarge}, nil},
		{"both, parked left out by the source", Request{Action: ActionRedrive, MaxMessages: 101, IncludeParked: true}, noParked,
			[]quarantine.Risk{quarantine.RiskLarge}, []quarantine.Risk{quarantine.RiskParked}},
		{"approve: true approves nothing", Request{Action: ActionRedrive, MaxMessages: 101, Approve: true}, all, []quarantine.Risk{quarantine.RiskLarge}, nil},
		{"asked to be dry", Request{Action: ActionRedrive, MaxMessages: 101, DryRun: true}, all, nil, nil},
		{"settling", Request{Action: ActionSettle, MaxMessages: 101}, all, nil, nil},
		{"a correction", Request{Action: ActionCorrect}, all, []quarantine.Risk{quarantine.RiskCorrection}, nil},
		{"a policy", Request{Action: ActionPolicyAdd}, all, []quarantine.Risk{quarantine.RiskPolicy}, nil},
		{"a resume", Request{Action: ActionPolicyResume}, all, []quarantine.Risk{quarantine.RiskResume}, nil},
		{"a revoke", Request{Action: ActionPolicyRevoke}, all, nil, nil},
		{"a policy's own run", Request{Action: ActionRedrive, MaxMessages: 1000, asPolicy: "pol-1"}, all, nil, nil},
	} {
		need, off := s.risks(tc.req, tc.src)
		if !slices.Equal(need, tc.need) || !slices.Equal(off, tc.off) {
			t.Errorf("%s: need %v off %v, want %v and %v", tc.name, need, off, tc.need, tc.off)
		}
	}
}
