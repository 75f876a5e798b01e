// Package awsclients builds every SDK client from one aws.Config, for the
// embedded stack, the tests and dlqctl. (Each function's main builds only the
// clients it needs, with the same two emulator options, to keep its binary
// small.) Endpoints come only from the SDK's own configuration
// (AWS_ENDPOINT_URL and per-service variants, or a profile's endpoint_url);
// Local only adjusts what emulators need.
package awsclients

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Options adjust clients for local emulators.
type Options struct {
	// Local is true against emulators: S3 path-style addressing, no
	// DynamoDB CRC32 response check (emulators send none).
	Local bool
	// HTTPClient replaces the SDK's HTTP client (fault injection in tests).
	HTTPClient aws.HTTPClient
}

// Clients are the SDK clients of the functions.
type Clients struct {
	DynamoDB   *dynamodb.Client
	SQS        *sqs.Client
	S3         *s3.Client
	CloudWatch *cloudwatch.Client
	// DynamoDBStreams reads the quarantine table's change stream.
	DynamoDBStreams *dynamodbstreams.Client
	// KMS signs the ledger's digests.
	KMS *kms.Client
	// Lambda reads the ledger's stream mapping.
	Lambda *lambda.Client
}

// New builds every client from cfg.
func New(cfg aws.Config, o Options) *Clients {
	if o.HTTPClient != nil {
		cfg = cfg.Copy()
		cfg.HTTPClient = o.HTTPClient
	}
	return &Clients{
		DynamoDB: dynamodb.NewFromConfig(cfg, func(d *dynamodb.Options) {
			d.DisableValidateResponseChecksum = o.Local
		}),
		SQS: sqs.NewFromConfig(cfg),
		S3: s3.NewFromConfig(cfg, func(s *s3.Options) {
			s.UsePathStyle = s.UsePathStyle || o.Local
		}),
		CloudWatch:      cloudwatch.NewFromConfig(cfg),
		DynamoDBStreams: dynamodbstreams.NewFromConfig(cfg),
		KMS:             kms.NewFromConfig(cfg),
		Lambda:          lambda.NewFromConfig(cfg),
	}
}
