package wire

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Ingest builds the ingest function (its Lambda handler is HandleRaw) on c,
// or on clients loaded from the environment when c is nil.
func Ingest(ctx context.Context, cfg ingest.Config, c *Clients, rt Runtime) (*ingest.Handler, error) {
	if c == nil {
		aws, local, err := awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		c = &Clients{DynamoDB: newDynamoDB(aws, local), S3: newS3(aws, local), KMSMAC: kms.NewFromConfig(aws)}
	}
	w, err := writer(c, cfg.WriterKeyID, writerproof.RoleIngest)
	if err != nil {
		return nil, err
	}
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	var payloads quarantine.PayloadStore
	if cfg.PayloadBucket != "" {
		payloads = s3store.New(c.S3, cfg.PayloadBucket, cfg.PayloadKMSKeyID)
	}
	q := ingest.NewQuarantiner(dynamostore.New(c.DynamoDB, cfg.TableName).WithWriter(w), payloads, rt.Now, ingest.QuarantinerConfig{
		Sources:      srcs,
		KeyAttribute: cfg.IdempotencyAttribute,
	})
	return ingest.NewHandler(q, rt.Log, rt.Metrics, rt.Now, cfg.Concurrency).AcceptOnly(cfg.DLQARNs), nil
}

// Redrive builds the redrive function (its Lambda handler is
// LambdaHandler) on c, or on clients loaded from the environment when c is
// nil. Standing policies are enabled when c has a CloudWatch client (their
// breaker metrics).
func Redrive(ctx context.Context, cfg redrive.FunctionConfig, c *Clients, rt Runtime) (*redrive.Service, error) {
	if c == nil {
		aws, local, err := awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		c = &Clients{DynamoDB: newDynamoDB(aws, local), S3: newS3(aws, local), SQS: newSQS(aws), CloudWatch: newCloudWatch(aws), KMSMAC: kms.NewFromConfig(aws)}
	}
	w, err := writer(c, cfg.WriterKeyID, writerproof.RoleRedrive)
	if err != nil {
		return nil, err
	}
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	var payloads quarantine.PayloadStore
	if cfg.PayloadBucket != "" && c.S3 != nil {
		payloads = s3store.New(c.S3, cfg.PayloadBucket, "")
	}
	store := dynamostore.New(c.DynamoDB, cfg.TableName).WithWriter(w)
	svc := redrive.New(store, dynamostore.NewLister(c.DynamoDB, cfg.TableName), payloads, c.SQS, srcs, rt.Now, rt.Log, cfg.Service)
	svc.WithApprovals(dynamostore.NewApprovalStore(c.DynamoDB, cfg.TableName).WithWriter(w))
	if c.CloudWatch != nil {
		svc.WithPolicies(redrive.Policies{Store: dynamostore.NewPolicyStore(c.DynamoDB, cfg.TableName).WithWriter(w), Counters: store, Metrics: c.CloudWatch})
	}
	return svc, nil
}

// Sweeper builds the sweeper function (its Lambda handler is
// LambdaHandler) on c, or on clients loaded from the environment when c is
// nil.
func Sweeper(ctx context.Context, cfg sweeper.FunctionConfig, c *Clients, rt Runtime) (*sweeper.Service, error) {
	if c == nil {
		aws, local, err := awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		c = &Clients{DynamoDB: newDynamoDB(aws, local), S3: newS3(aws, local), CloudWatch: newCloudWatch(aws), KMSMAC: kms.NewFromConfig(aws)}
	}
	w, err := writer(c, cfg.WriterKeyID, writerproof.RoleSweeper)
	if err != nil {
		return nil, err
	}
	return sweeper.New(dynamostore.New(c.DynamoDB, cfg.TableName).WithWriter(w), dynamostore.NewLister(c.DynamoDB, cfg.TableName),
		s3store.New(c.S3, cfg.PayloadBucket, ""), s3store.Archiver{API: c.S3}, c.CloudWatch, rt.Now, rt.Log, cfg.Sweeper), nil
}

// Metrics builds the metrics function (its Lambda handler is
// LambdaHandler) on c, or on clients loaded from the environment when c is
// nil.
func Metrics(ctx context.Context, cfg metrics.FunctionConfig, c *Clients, rt Runtime) (*metrics.Service, error) {
	if c == nil {
		aws, local, err := awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		c = &Clients{DynamoDB: newDynamoDB(aws, local), SQS: newSQS(aws), CloudWatch: newCloudWatch(aws)}
	}
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	now := rt.Now
	if now == nil {
		now = time.Now
	}
	store, list := dynamostore.New(c.DynamoDB, cfg.TableName), dynamostore.NewLister(c.DynamoDB, cfg.TableName)
	return &metrics.Service{SQS: c.SQS, Counters: store, Marks: store, Signatures: list, Lister: list, Store: store, CloudWatch: c.CloudWatch, Unconfigured: true,
		Sources: srcs, Namespace: cfg.Namespace, Now: now, Log: rt.Log}, nil
}

// writer is the prover of role with keyID (WRITER_KEY_ID), nil without
// one: a function without a writer key writes no proofs (verify then
// names its versions after the writer-proof cut-off).
func writer(c *Clients, keyID string, role writerproof.Role) (*writerproof.Prover, error) {
	if keyID == "" {
		return nil, nil
	}
	if c.KMSMAC == nil {
		return nil, fmt.Errorf("WRITER_KEY_ID is set but the %s function has no KMS client", role)
	}
	return writerproof.NewProver(kmsmac.MAC{API: c.KMSMAC, KeyID: keyID}, role), nil
}
