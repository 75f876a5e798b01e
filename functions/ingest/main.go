// Command ingest is the Lambda function that quarantines dead-lettered SQS
// messages: it reads its configuration, builds the AWS clients once at init
// and serves SQS events until the runtime stops it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	fn, err := build(log)
	if err != nil {
		log.Error("ingest init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.HandleRaw)
}

// build reads the configuration from the environment and wires the
// function on clients loaded from it.
func build(log *slog.Logger) (*ingest.Handler, error) {
	cfg, err := ingest.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return wire.Ingest(context.Background(), cfg, nil, wire.Runtime{Log: log, Metrics: os.Stdout})
}
