// Command redrive is the Lambda function that replays quarantined records
// into their source queue. It is invoked with a JSON request from the
// console, `aws lambda invoke` or dlqctl, and on a schedule to settle
// replays (see the README for the request contract).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	fn, err := build(log)
	if err != nil {
		log.Error("redrive init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.LambdaHandler)
}

// build reads the configuration from the environment and wires the
// function on clients loaded from it.
func build(log *slog.Logger) (*redrive.Service, error) {
	cfg, err := redrive.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return wire.Redrive(context.Background(), cfg, nil, wire.Runtime{Log: log})
}
