// Package wire builds each function from its configuration and its AWS
// clients: one constructor per function, used alike by the functions'
// mains (with clients loaded from the environment), the local runner and
// the tests (with the emulator's or fault-injecting clients). It is the one
// place where the use cases meet the adapters.
package wire

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmssign"
	"github.com/dlqquarantine/dlqq/shared/adapter/lambdamapping"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Clients are the AWS clients of the functions; each constructor uses only
// those its function needs. A nil *Clients makes a constructor load the
// AWS configuration from the environment and build its function's clients
// only. (Each binary still links the SDK packages of all four functions,
// since this one package wires them all: about 0.9 MB more in ingest's
// bootstrap than when it wired itself.)
type Clients struct {
	DynamoDB   DynamoDB
	S3         S3
	SQS        SQS
	CloudWatch CloudWatch
	// KMS and DynamoDBStreams are the ledger's only (its signing key and
	// its stream's shards).
	KMS             KMS
	DynamoDBStreams DynamoDBStreams
	// Lambda is the ledger's too: it reads its own stream mapping.
	Lambda Lambda
	// KMSMAC makes the writing functions' writer proofs (GenerateMac with
	// their WRITER_KEY_ID).
	KMSMAC kmsmac.API
}

// DynamoDB is what the functions need of the DynamoDB client.
type DynamoDB interface {
	dynamostore.API
	dynamostore.LedgerStateAPI
}

// S3 is what the functions need of the S3 client.
type S3 interface {
	s3store.API
	s3store.ArchiveAPI
	s3store.LedgerAPI
}

// KMS is what the ledger needs of the KMS client.
type KMS interface {
	kmssign.API
}

// DynamoDBStreams is what the ledger needs of the DynamoDB Streams client.
type DynamoDBStreams interface {
	dynamostore.StreamDescriber
}

// Lambda is what the ledger needs of the Lambda client.
type Lambda interface {
	lambdamapping.API
}

// SQS is what the functions need of the SQS client.
type SQS interface {
	redrive.Sender
	metrics.QueueAPI
}

// CloudWatch is what the functions need of the CloudWatch client.
type CloudWatch interface {
	redrive.MetricsAPI
	metrics.MetricsAPI
	sweeper.MetricsAPI
}

// From takes the clients of an awsclients set (the embedded stack's, or
// dlqctl's).
func From(c *awsclients.Clients) *Clients {
	out := &Clients{DynamoDB: c.DynamoDB, S3: c.S3, SQS: c.SQS, CloudWatch: c.CloudWatch, DynamoDBStreams: c.DynamoDBStreams, KMS: c.KMS, Lambda: c.Lambda}
	if c.KMS != nil {
		out.KMSMAC = c.KMS
	}
	return out
}

// Runtime is what a function gets from its process besides its clients.
type Runtime struct {
	// Log receives the function's log lines.
	Log *slog.Logger
	// Metrics receives ingest's EMF documents (stdout in Lambda; nil drops
	// them).
	Metrics io.Writer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// awsConfig loads the AWS configuration from the environment, as the
// Lambda runtime provides it, with the project's HTTP client (package
// sdkhttp: an answered call never fails on its own request body). local is true against emulators (an
// AWS_ENDPOINT_URL is set): see package awsclients.
func awsConfig(ctx context.Context) (cfg aws.Config, local bool, err error) {
	cfg, err = config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, false, fmt.Errorf("load AWS config: %w", err)
	}
	cfg = sdkhttp.Use(cfg)
	return cfg, os.Getenv("AWS_ENDPOINT_URL") != "", nil
}

func newDynamoDB(cfg aws.Config, local bool) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = local })
}

func newS3(cfg aws.Config, local bool) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = o.UsePathStyle || local })
}

func newSQS(cfg aws.Config) *sqs.Client { return sqs.NewFromConfig(cfg) }

func newCloudWatch(cfg aws.Config) *cloudwatch.Client { return cloudwatch.NewFromConfig(cfg) }
