package sigv4front

import "net/http"

// refusal is an answer the front gives instead of invoking the function:
// the status, the x-amzn-ErrorType header and the JSON body AWS sends, and
// a short reason for the log line.
//
// Where the words come from (every status is 403):
//   - Forbidden: function URL authorization failures answer
//     {"Message":"Forbidden. For troubleshooting Function URL authorization
//     issues, see: https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"}
//     (brikis98/devops-book#12 and ant-media/Ant-Media-Server#7827, 2026;
//     kumo and older reports show the shorter {"Message":"Forbidden"}).
//     An unsigned request is an anonymous principal the policy does not
//     allow, so it gets the same answer.
//   - The signature messages come in a lower-case "message" (AWS re:Post,
//     "POST request to presigned AWS Lambda Function URL with unsigned
//     payload"), with the texts of the IAM user guide's "Troubleshoot
//     signed requests" page and the reports it matches: "Signature
//     expired: … is now earlier than … (… - 5 min.)" (mhart/aws4#118),
//     "Signature not yet current: … is still later than … (… + 5 min.)"
//     (serverless/enterprise#11), "Credential should be scoped to a valid
//     region, not '…'. " (joona/aws-es-curl#15), "Credential should be
//     scoped to correct service: '…'. " (cllunsford/aws-signing-proxy#25).
//   - An unknown key or a wrong session token: "The security token included
//     in the request is invalid." (jamesmbourne/aws4-axios#1553, a function
//     URL; apache/apisix#11176 for an unknown key).
//   - A malformed header: the IncompleteSignature texts of aws/chalice#828
//     and iann0036/cloud9-sync#10, "'Host' must be a 'SignedHeader'…"
//     (NetSPI/AWSSigner#3). Four texts are not confirmed by a source: the
//     details after "Date in Credential scope does not match YYYYMMDD from
//     ISO-8601 version of date from HTTP" (the guide gives the prefix), and
//     the messages for a credential without 5 elements, for a terminator
//     other than aws4_request and for another algorithm.
//   - The x-amzn-ErrorType values InvalidSignatureException and
//     UnrecognizedClientException are those the Lambda API sends
//     (erlcloud/erlcloud#690, cloudyr/aws.lambda#10); AccessDeniedException
//     and IncompleteSignatureException follow the same naming, unconfirmed
//     for function URLs.
type refusal struct {
	status  int
	errType string
	key     string // "Message" or "message", as AWS spells it
	message string
	reason  string
}

const forbiddenMessage = "Forbidden. For troubleshooting Function URL authorization issues, see: https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"

func forbidden(reason string) *refusal {
	return &refusal{http.StatusForbidden, "AccessDeniedException", "Message", forbiddenMessage, reason}
}

func incomplete(message string) *refusal {
	return &refusal{http.StatusForbidden, "IncompleteSignatureException", "message", message, "incomplete-signature"}
}

func invalidSignature(reason, message string) *refusal {
	return &refusal{http.StatusForbidden, "InvalidSignatureException", "message", message, reason}
}

func signatureMismatch() *refusal {
	return invalidSignature("signature", "The request signature we calculated does not match the signature you provided. "+
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
}

func unrecognized(reason string) *refusal {
	return &refusal{http.StatusForbidden, "UnrecognizedClientException", "message", "The security token included in the request is invalid.", reason}
}
