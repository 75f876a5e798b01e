// Command sweeper is the scheduled Lambda function that ages PARKED and
// RESOLVED records into the S3 Object Lock archive.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	svc, err := build(log)
	if err != nil {
		log.Error("sweeper init failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, _ events.CloudWatchEvent) (*sweeper.Report, error) {
		out, err := svc.Run(ctx)
		if err != nil {
			// The runtime logs a function error's text: give it the kind only.
			return out, fmt.Errorf("run failed: %s", quarantine.ErrorKind(err))
		}
		return out, nil
	})
}

func build(log *slog.Logger) (*sweeper.Service, error) {
	cfg, err := sweeper.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	local := os.Getenv("AWS_ENDPOINT_URL") != "" // emulators: see shared/runtime/awsclients
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = local })
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = o.UsePathStyle || local })
	return sweeper.New(dynamostore.New(ddb, cfg.TableName), dynamostore.NewLister(ddb, cfg.TableName),
		s3store.New(s3c, cfg.PayloadBucket, ""), s3c, cloudwatch.NewFromConfig(awsCfg), nil, log, cfg.Sweeper), nil
}
