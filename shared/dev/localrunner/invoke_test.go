package localrunner_test

import (
	"context"
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
