// Command operator is the function behind the operator endpoint (a Lambda
// function URL or an HTTP API with IAM authorization): operator actions by
// a caller AWS authenticated, recorded under that principal, and four-eyes
// approvals of high-risk actions (docs/identity.md). It runs the redrive
// function's code and role; its one entry point trusts the endpoint's IAM
// authorizer, so nobody may invoke it other than through the endpoint.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("operator", redrive.ConfigFromEnv, wire.Redrive)
	lambda.Start(fn.OperatorHandler)
}
