package sigv4front

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// lambdaFunc is a function-field fake of the Lambda client.
type lambdaFunc func(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)

func (f lambdaFunc) Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return f(ctx, in, opts...)
}

func TestLambdaInvoke(t *testing.T) {
	t.Parallel()
	apiErr := errors.New("ServiceException: runtime invocation failed")
	cases := []struct {
		name      string
		out       *lambda.InvokeOutput
		err       error
		answer    string
		wantErr   error
		wantKind  string
		isFuncErr bool
	}{
		{name: "answer", out: &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`{"statusCode":200}`)}, answer: `{"statusCode":200}`},
		{name: "function error", out: &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
			Payload: []byte(`{"errorMessage":"Task timed out after 3.00 seconds","errorType":"Sandbox.Timedout"}`)}, isFuncErr: true, wantKind: "Unhandled"},
		{name: "api error", err: apiErr, wantErr: apiErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got *lambda.InvokeInput
			invoke := LambdaInvoke(lambdaFunc(func(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
				got = in
				return tc.out, tc.err
			}), "dlqq-operator")
			answer, err := invoke(context.Background(), []byte(`{"version":"2.0"}`))
			if aws.ToString(got.FunctionName) != "dlqq-operator" || string(got.Payload) != `{"version":"2.0"}` || got.InvocationType != "" {
				t.Fatalf("input %+v: want a synchronous invoke of dlqq-operator with the event", got)
			}
			var fe *FunctionError
			switch {
			case tc.isFuncErr:
				if !errors.As(err, &fe) || fe.Kind != tc.wantKind || string(fe.Payload) != string(tc.out.Payload) {
					t.Fatalf("error %v, want a *FunctionError %s with the payload", err, tc.wantKind)
				}
				if want := "invoke dlqq-operator: function error (Unhandled) Sandbox.Timedout"; err.Error() != want {
					t.Errorf("error text %q, want %q", err, want)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || errors.As(err, &fe) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
			default:
				if err != nil || string(answer) != tc.answer {
					t.Fatalf("answer %q, %v", answer, err)
				}
			}
		})
	}
}
