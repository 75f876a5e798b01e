package sigv4front

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// lambdaInvoker is the Lambda API call the front's Invoke makes.
type lambdaInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaInvoke returns a Config.Invoke that calls function synchronously
// through the Lambda API (kumo's, locally). A function error, which the API
// reports as a 200 with X-Amz-Function-Error (InvokeOutput.FunctionError),
// comes back as a *FunctionError.
func LambdaInvoke(client lambdaInvoker, function string) func(ctx context.Context, payload []byte) ([]byte, error) {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), Payload: payload})
		if err != nil {
			return nil, fmt.Errorf("invoke %s: %w", function, err)
		}
		if out.FunctionError != nil {
			return nil, fmt.Errorf("invoke %s: %w", function, &FunctionError{Kind: *out.FunctionError, Payload: out.Payload})
		}
		return out.Payload, nil
	}
}

// FunctionError is what an Invoke implementation returns when Lambda
// answered 200 with the X-Amz-Function-Error header ("Unhandled" for a
// crash, a timeout or an error the handler returned; "Handled" in old
// runtimes): the payload is then the function's error object,
// {"errorMessage":…,"errorType":…}, not its answer. Only the caller of
// Invoke sees that header, so it must say so with this error: the front
// does not guess from the payload's shape, because a function may return
// such an object as its answer and AWS would then send it back as a 200.
type FunctionError struct {
	// Kind is the X-Amz-Function-Error value.
	Kind string
	// Payload is the function's error object.
	Payload []byte
}

func (e *FunctionError) Error() string {
	var fe struct {
		Type string `json:"errorType"`
	}
	_ = json.Unmarshal(e.Payload, &fe)
	return fmt.Sprintf("function error (%s) %s", e.Kind, fe.Type)
}
