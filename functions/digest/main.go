// Command digest is the ledger's digest function: on its schedule it signs
// a digest of every shard's head segment ({"action":"digest"}), and once,
// by hand, it ledgers the table older than the stream ({"action":"baseline"}).
// Its one entry point takes those two events only, never a stream batch:
// whoever may change its schedule's target cannot make it ledger a change.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	fn := wire.Init("digest", ledger.DigestConfigFromEnv, wire.Ledger)
	lambda.Start(fn.DigestEntry)
}
