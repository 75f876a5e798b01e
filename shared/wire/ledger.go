package wire

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmssign"
	"github.com/dlqquarantine/dlqq/shared/adapter/lambdamapping"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// Ledger builds either of the ledger's functions, as cfg configures it
// (ledger.StreamConfigFromEnv: the stream function, whose Lambda handler
// is StreamEntry; ledger.DigestConfigFromEnv: the digest function, whose
// handler is DigestEntry), on c, or on clients loaded from the environment
// when c is nil. It resolves the signing key (GetPublicKey) at init: the
// stream handler checks the signed digest's heads too. The segments the
// stream function writes feed the metrics counters (dynamostore.Counts:
// segment by segment in chain order, idempotent per shard), so no record
// write carries a counter update. With cfg.StreamFunctionName each digest
// run checks the pipeline (the stream function's mapping, the canary);
// with cfg.FunctionName it names any mapping of the digest function
// itself.
func Ledger(ctx context.Context, cfg ledger.FunctionConfig, c *Clients, rt Runtime) (*ledger.Service, error) {
	if c == nil {
		aws, local, err := awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		c = &Clients{DynamoDB: newDynamoDB(aws, local), S3: newS3(aws, local), KMS: kms.NewFromConfig(aws), DynamoDBStreams: dynamodbstreams.NewFromConfig(aws),
			Lambda: lambda.NewFromConfig(aws)}
	}
	if c.DynamoDB == nil || c.S3 == nil || c.KMS == nil || c.DynamoDBStreams == nil {
		return nil, errors.New("the ledger needs DynamoDB, S3, KMS and DynamoDB Streams clients")
	}
	if (cfg.StreamFunctionName != "" || cfg.FunctionName != "") && c.Lambda == nil {
		return nil, errors.New("the ledger's pipeline check (STREAM_FUNCTION_NAME or AWS_LAMBDA_FUNCTION_NAME set) needs a Lambda client")
	}
	signer, err := kmssign.New(ctx, c.KMS, cfg.SigningKey)
	if err != nil {
		return nil, err
	}
	svc := &ledger.Service{
		Objects: s3store.LedgerObjects{API: c.S3, Bucket: cfg.Bucket},
		State:   dynamostore.LedgerState{API: c.DynamoDB, Table: cfg.TableName},
		Signer:  signer,
		Shards:  dynamostore.StreamShards{API: c.DynamoDBStreams, StreamARN: cfg.Ledger.StreamARN},
		Counts:  dynamostore.NewCounts(c.DynamoDB, cfg.TableName),
		Decode:  dynamostore.LedgerItemFromStream,
		Metrics: rt.Metrics,
		Log:     rt.Log,
		Now:     rt.Now,
		Config:  cfg.Ledger,
	}
	// The pipeline check (ledger/pipeline.go), in the digest function.
	if cfg.StreamFunctionName != "" {
		svc.Mappings = lambdamapping.Mappings{API: c.Lambda, Function: cfg.StreamFunctionName, StreamARN: cfg.Ledger.StreamARN}
		svc.Canaries = dynamostore.Canaries{API: c.DynamoDB, Table: cfg.TableName}
	}
	if cfg.FunctionName != "" {
		svc.OwnMappings = lambdamapping.AnySource{API: c.Lambda, Function: cfg.FunctionName}
	}
	return svc, nil
}
