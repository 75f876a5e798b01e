package localrunner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Invoker is the part of the Lambda client the runner invokes through.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// FunctionError is a function's error response: Lambda's errorType, and
// the function's errorMessage (kept off the logs: it may quote input).
type FunctionError struct {
	Function string
	Type     string
	Message  string
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function %s failed (%s)", e.Function, e.Type)
}

// Invoke calls the function synchronously through the Lambda API, as an
// event source mapping or EventBridge does, and returns its response; a
// function error is a *FunctionError.
func Invoke(ctx context.Context, api Invoker, function string, payload []byte) ([]byte, error) {
	out, err := api.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), Payload: payload})
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", function, err)
	}
	if out.FunctionError != nil {
		fe := &FunctionError{Function: function, Type: aws.ToString(out.FunctionError)}
		var body struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		}
		if json.Unmarshal(out.Payload, &body) == nil {
			if body.ErrorType != "" {
				fe.Type = body.ErrorType
			}
			fe.Message = body.ErrorMessage
		}
		return nil, fe
	}
	return out.Payload, nil
}

// InvokeSQS is an SQSHandler that delivers the batch by invoking function
// through the Lambda API and reads its partial batch response. A failed
// invocation, a function error or a response that is not JSON is an error:
// the poller then leaves the whole batch for redelivery, as Lambda does.
func InvokeSQS(api Invoker, function string) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		payload, err := json.Marshal(ev)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		out, err := Invoke(ctx, api, function, payload)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		var resp events.SQSEventResponse
		if len(out) > 0 && string(out) != "null" {
			if err := json.Unmarshal(out, &resp); err != nil {
				return events.SQSEventResponse{}, fmt.Errorf("function %s: the response is not a batch response: %w", function, err)
			}
		}
		return resp, nil
	}
}

// InvokeScheduled is a schedule handler that invokes function through the
// Lambda API with the schedule's payload.
func InvokeScheduled(api Invoker, function string) func(context.Context, json.RawMessage) error {
	return func(ctx context.Context, payload json.RawMessage) error {
		_, err := Invoke(ctx, api, function, payload)
		return err
	}
}

// InvokeStream is a StreamHandler that delivers the batch by invoking
// function through the Lambda API, as the table stream's mapping does, and
// reads its tumbling-window response. A failed invocation, a function
// error, a response that is not JSON and a response without a state (Lambda
// counts one as a failure) are errors: the poller then delivers the batch
// again (halved first, with Bisect).
func InvokeStream(api Invoker, function string) StreamHandler {
	return func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		var resp events.DynamoDBTimeWindowEventResponse
		payload, err := json.Marshal(ev)
		if err != nil {
			return resp, err
		}
		out, err := Invoke(ctx, api, function, payload)
		if err != nil {
			return resp, err
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("function %s: the response is not a tumbling-window response: %w", function, err)
		}
		if resp.State == nil {
			return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("function %s: the response has no state (a failed batch for a tumbling window)", function)
		}
		return resp, nil
	}
}
