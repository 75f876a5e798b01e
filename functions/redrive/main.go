// Command redrive is the Lambda function that replays quarantined records
// into their source queue. It is invoked with a JSON request from the
// console, `aws lambda invoke` or dlqctl, and on a schedule to settle
// replays (docs/redrive.md is the request contract).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("redrive", redrive.ConfigFromEnv, wire.Redrive)
	lambda.Start(fn.LambdaHandler)
}
