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
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/dlqquarantine/dlqq/shared/awsclients"
	"github.com/dlqquarantine/dlqq/shared/ingest"
	"github.com/dlqquarantine/dlqq/shared/lambdalog"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := build()
	if err != nil {
		log.Error("ingest init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func build() (*ingest.Handler, error) {
	cfg, err := ingest.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	clients := awsclients.New(awsCfg, awsclients.Options{Local: os.Getenv("AWS_ENDPOINT_URL") != ""})
	return ingest.New(cfg, clients, lambdalog.New(os.Stdout, slog.LevelInfo), os.Stdout, nil)
}
