package s3fake

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Error is an error shaped as the SDK returns a service's answer: an
// operation error around an HTTP response error (status) around an API
// error (code). Tests use it to inject answers.
func Error(op string, status int, code, msg string) error {
	fault := smithy.FaultClient
	if status >= 500 {
		fault = smithy.FaultServer
	}
	return wrap(op, status, &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault})
}

func wrap(op string, status int, apiErr error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: apiErr},
	}}
}

// Failing is a Fault.Before or Fault.After that answers the first n calls
// of op (every call when n is negative) with Error(op, status, code, msg),
// and lets every other call through.
func Failing(n int, op string, status int, code, msg string) func(op, key string) error {
	return func(called, _ string) error {
		if called != op || n == 0 {
			return nil
		}
		n--
		return Error(op, status, code, msg)
	}
}

// Answer is what an error says as the SDK shapes a service's answer: the
// API error code and the HTTP status ("" and 0 for what it does not carry).
func Answer(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}
