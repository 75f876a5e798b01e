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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := build()
	if err != nil {
		log.Error("ingest init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.HandleRaw)
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
	local := os.Getenv("AWS_ENDPOINT_URL") != "" // emulators: see shared/runtime/awsclients
	clients := ingest.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = local }),
		S3:       s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = o.UsePathStyle || local }),
	}
	return ingest.New(cfg, clients, lambdalog.New(os.Stdout, slog.LevelInfo), os.Stdout, nil)
}
