// Command ledger is the ledger's stream function: the Lambda function that
// writes the quarantine table's change stream into the Object Lock bucket
// as chained segments. Its one entry point takes the stream mapping's
// batches only; the digests are signed by functions/digest.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("ledger", ledger.StreamConfigFromEnv, wire.Ledger)
	lambda.Start(fn.StreamEntry)
}
