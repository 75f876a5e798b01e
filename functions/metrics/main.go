// Command metrics is the scheduled Lambda function that publishes DLQ
// health to CloudWatch.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	fn, err := build(log)
	if err != nil {
		log.Error("metrics init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.LambdaHandler)
}

// build reads the configuration from the environment and wires the
// function on clients loaded from it.
func build(log *slog.Logger) (*metrics.Service, error) {
	cfg, err := metrics.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return wire.Metrics(context.Background(), cfg, nil, wire.Runtime{Log: log})
}
