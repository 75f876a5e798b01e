package localrunner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// A function error is a *FunctionError with Lambda's errorType, and its
// message stays out of Error() (it may quote the input).
func TestInvokeFunctionError(t *testing.T) {
	t.Parallel()
	_, err := localrunner.Invoke(context.Background(), fakeInvoker{out: &lambda.InvokeOutput{FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorType":"ErrBadInput","errorMessage":"value secret-123 refused"}`)}}, "fn", nil)
	fe, ok := err.(*localrunner.FunctionError)
	if !ok || fe.Type != "ErrBadInput" || fe.Message != "value secret-123 refused" || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err %#v", err)
	}
	h := localrunner.InvokeSQS(fakeInvoker{out: &lambda.InvokeOutput{Payload: []byte(`not json`)}}, "fn")
	if _, err := h(context.Background(), events.SQSEvent{}); err == nil {
		t.Fatal("a response that is not JSON was taken for a batch response")
	}
	h = localrunner.InvokeSQS(fakeInvoker{out: &lambda.InvokeOutput{Payload: []byte(`null`)}}, "fn")
	if resp, err := h(context.Background(), events.SQSEvent{}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("null response: %+v %v", resp, err)
	}
}

type fakeInvoker struct{ out *lambda.InvokeOutput }

func (f fakeInvoker) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return f.out, nil
}

// recordingInvoker answers every invoke with out and keeps the payloads.
type recordingInvoker struct {
	out      *lambda.InvokeOutput
	payloads [][]byte
}

func (r *recordingInvoker) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	r.payloads = append(r.payloads, in.Payload)
	return r.out, nil
}

// InvokeStream sends the tumbling-window event as Lambda does (the shard
// id, the stream ARN, the records) and reads the partial batch response;
// a function error, a response that is not JSON or has no state is a
// failed batch.
func TestInvokeStream(t *testing.T) {
	t.Parallel()
	ev := events.DynamoDBTimeWindowEvent{
		DynamoDBEvent: events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT", EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000001", Keys: map[string]events.DynamoDBAttributeValue{"dlq_id": events.NewStringAttribute("src#a")}}}}},
		TimeWindowProperties: events.TimeWindowProperties{ShardID: "shardId-00000001", EventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026", State: map[string]string{}},
	}
	inv := &recordingInvoker{out: &lambda.InvokeOutput{Payload: []byte(`{"state":{},"batchItemFailures":[{"itemIdentifier":"100000000000000000001"}]}`)}}
	resp, err := localrunner.InvokeStream(inv, "fn")(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "100000000000000000001" || resp.State == nil {
		t.Fatalf("response %+v, %v", resp, err)
	}
	var sent events.DynamoDBTimeWindowEvent
	if len(inv.payloads) != 1 || json.Unmarshal(inv.payloads[0], &sent) != nil || sent.ShardID != ev.ShardID || sent.EventSourceARN != ev.EventSourceARN ||
		len(sent.Records) != 1 || sent.Records[0].Change.Keys["dlq_id"].String() != "src#a" || !strings.Contains(string(inv.payloads[0]), `"shardId":"shardId-00000001"`) {
		t.Fatalf("sent %s", inv.payloads)
	}
	for name, out := range map[string]*lambda.InvokeOutput{
		"function error": {FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorType":"errorString","errorMessage":"chain broken"}`)},
		"not json":       {Payload: []byte(`not json`)},
		"null":           {Payload: []byte(`null`)},
		"no state":       {Payload: []byte(`{"batchItemFailures":[]}`)},
	} {
		if _, err := localrunner.InvokeStream(&recordingInvoker{out: out}, "fn")(context.Background(), ev); err == nil {
			t.Errorf("%s: taken for a processed batch", name)
		}
	}
	if resp, err := localrunner.InvokeStream(&recordingInvoker{out: &lambda.InvokeOutput{Payload: []byte(`{"state":{}}`)}}, "fn")(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("a processed batch: %+v %v", resp, err)
	}
}
