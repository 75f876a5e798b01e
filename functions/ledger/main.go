// Command ledger is the Lambda function that writes the quarantine
// table's change stream into the Object Lock bucket as chained segments
// and signs a digest of every shard's head on a schedule.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("ledger", ledger.ConfigFromEnv, wire.Ledger)
	lambda.Start(fn.LambdaHandler)
}
