// Command metrics is the scheduled Lambda function that publishes DLQ
// health to CloudWatch.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("metrics", metrics.ConfigFromEnv, wire.Metrics)
	lambda.Start(fn.LambdaHandler)
}
