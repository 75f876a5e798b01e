package localrunner_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// The dev kit's ledger mapping behaves as Lambda's does for the poller: in
// kumo's Lambda, listed by ListEventSourceMappings with a UUID, a state
// and a last change; disabled, nothing is polled; enabled again, polling
// resumes where it stopped; re-created at LATEST, what the stream held is
// skipped; re-created at TRIM_HORIZON, the stream is read again.
func TestTheLedgerMappingGatesThePoller(t *testing.T) {
	ctx := context.Background()
	st, table, arn := streamStack(t)
	m, err := localrunner.NewLedgerMapping(ctx, st.Clients.Lambda, st.Env.StackName+"-gate-ledger", arn, true)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	p := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, Gate: m,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			got += len(ev.Records)
			return events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}, nil
		}}
	drain := func(want int, what string) {
		t.Helper()
		got = 0
		if _, err := p.Drain(ctx); err != nil || got != want {
			t.Fatalf("%s: delivered %d (%v), want %d", what, got, err, want)
		}
	}
	listed := func() []string {
		t.Helper()
		out, err := st.Clients.Lambda.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(st.Env.StackName + "-gate-ledger"), EventSourceArn: aws.String(arn)})
		if err != nil || len(out.EventSourceMappings) != 1 || out.EventSourceMappings[0].LastModified == nil {
			t.Fatalf("listed %+v (%v), want one mapping with its last change", out, err)
		}
		c := out.EventSourceMappings[0]
		return []string{aws.ToString(c.UUID), aws.ToString(c.State)}
	}
	putRecords(t, st, table, 2) // 3 changes
	drain(3, "enabled")
	first := listed()
	if err := m.SetEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	if l := listed(); l[0] != first[0] || l[1] != "Disabled" {
		t.Fatalf("disabled mapping listed as %v", l)
	}
	putRecords(t, st, table, 1) // 2 changes
	drain(0, "disabled")
	if err := m.SetEnabled(ctx, true); err != nil {
		t.Fatal(err)
	}
	drain(2, "enabled again")
	putRecords(t, st, table, 1)
	if _, err := m.Recreate(ctx, "LATEST"); err != nil {
		t.Fatal(err)
	}
	if l := listed(); l[0] == first[0] || l[1] != "Enabled" {
		t.Fatalf("re-created mapping listed as %v (first %v)", l, first)
	}
	drain(0, "re-created at LATEST")
	putRecords(t, st, table, 1)
	drain(2, "after LATEST")
	if _, err := m.Recreate(ctx, "TRIM_HORIZON"); err != nil {
		t.Fatal(err)
	}
	drain(9, "re-created at TRIM_HORIZON") // the whole stream again: 3 + 2 + 2 + 2
}
