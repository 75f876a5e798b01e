// Command sweeper is the scheduled Lambda function that ages PARKED and
// RESOLVED records into the S3 Object Lock archive.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("sweeper", sweeper.ConfigFromEnv, wire.Sweeper)
	lambda.Start(fn.LambdaHandler)
}
