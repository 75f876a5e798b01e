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
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	svc, err := build(log)
	if err != nil {
		log.Error("redrive init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(svc.LambdaHandler)
}

func build(log *slog.Logger) (*redrive.Service, error) {
	cfg, err := redrive.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	local := os.Getenv("AWS_ENDPOINT_URL") != "" // emulators: see shared/runtime/awsclients
	return redrive.NewFromConfig(cfg, redrive.Clients{
		DynamoDB:   dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = local }),
		S3:         s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = o.UsePathStyle || local }),
		SQS:        sqs.NewFromConfig(awsCfg),
		CloudWatch: cloudwatch.NewFromConfig(awsCfg),
	}, log, nil)
}
