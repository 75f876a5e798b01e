// Command ingest is the Lambda function that quarantines dead-lettered SQS
// messages: it reads its configuration, builds the AWS clients once at init
// and serves SQS events until the runtime stops it.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("ingest", ingest.ConfigFromEnv, wire.Ingest)
	lambda.Start(fn.HandleRaw)
}
