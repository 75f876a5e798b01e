package s3store

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// The answers of S3 that PutPayload, GetPayload and DeletePayload tell apart.

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// preconditionFailed: the key holds a current object (If-None-Match).
func preconditionFailed(err error) bool {
	return errorCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed
}

// conditionConflict: a concurrent conditional write on the key; S3 says to
// retry the upload.
func conditionConflict(err error) bool {
	return errorCode(err) == "ConditionalRequestConflict" || httpStatus(err) == http.StatusConflict
}

// missing: the object or version does not exist. Without s3:ListBucket S3
// answers a missing key or version with 403, not 404, so 403 counts too;
// every read that follows is verified by its SHA-256.
func missing(err error) bool {
	switch errorCode(err) {
	case "NoSuchKey", "NoSuchVersion", "NotFound", "AccessDenied", "Forbidden":
		return true
	}
	switch httpStatus(err) {
	case http.StatusNotFound, http.StatusForbidden:
		return true
	}
	return false
}

// notFound: S3 says the object or version does not exist (404), never a
// 403: without s3:ListBucket S3 answers a missing key with 403, and so it
// answers a refusal (a Deny anywhere); only a 404 tells them apart.
func notFound(err error) bool {
	switch errorCode(err) {
	case "NoSuchKey", "NoSuchVersion", "NotFound":
		return true
	}
	return httpStatus(err) == http.StatusNotFound
}
