package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	cfnddb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	cfnsqs "github.com/awslabs/goformation/v7/cloudformation/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

func (s *Stack) createResources(ctx context.Context, withS3 bool) error {
	if err := s.createKeys(ctx); err != nil {
		return err
	}
	if err := s.createQueues(ctx); err != nil {
		return err
	}
	if err := s.createTables(ctx); err != nil {
		return err
	}
	if withS3 {
		if err := s.createBuckets(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) createKeys(ctx context.Context) error {
	client := kms.NewFromConfig(s.AWS)
	for _, id := range sortedKeys(s.Template.GetAllKMSKeyResources()) {
		out, err := client.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String(s.Env.StackName + " " + id)})
		if err != nil {
			return fmt.Errorf("create key %s: %w", id, err)
		}
		alias := template.KeyAlias(s.Env.StackName, id)
		if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: out.KeyMetadata.KeyId}); err != nil {
			return fmt.Errorf("create alias %s: %w", alias, err)
		}
		s.Names[id] = alias
	}
	return nil
}

func (s *Stack) createQueues(ctx context.Context) error {
	queues := s.Template.GetAllSQSQueueResources()
	ids := sortedKeys(queues)
	// Dead-letter queues first: a redrive policy names an existing queue.
	slices.SortStableFunc(ids, func(a, b string) int {
		return boolInt(queues[a].RedrivePolicy != nil) - boolInt(queues[b].RedrivePolicy != nil)
	})
	for _, id := range ids {
		q := queues[id]
		name := aws.ToString(q.QueueName)
		attrs, err := queueAttributes(q)
		if err != nil {
			return fmt.Errorf("queue %s: %w", id, err)
		}
		out, err := s.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return fmt.Errorf("create queue %s: %w", id, err)
		}
		got, err := s.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			return fmt.Errorf("queue %s attributes: %w", id, err)
		}
		arn := got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		if want := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.Env.Region, s.Env.Account, name); arn != want {
			return fmt.Errorf("queue %s: emulator says ARN %s, template resolves %s", id, arn, want)
		}
		s.Names[id], s.QueueURLs[id], s.QueueARNs[id] = name, aws.ToString(out.QueueUrl), arn
	}
	return nil
}

func queueAttributes(q *cfnsqs.Queue) (map[string]string, error) {
	attrs := map[string]string{}
	setInt := func(name string, v *int) {
		if v != nil {
			attrs[name] = fmt.Sprint(*v)
		}
	}
	setInt("VisibilityTimeout", q.VisibilityTimeout)
	setInt("MessageRetentionPeriod", q.MessageRetentionPeriod)
	setInt("DelaySeconds", q.DelaySeconds)
	setInt("MaximumMessageSize", q.MaximumMessageSize)
	setInt("ReceiveMessageWaitTimeSeconds", q.ReceiveMessageWaitTimeSeconds)
	if q.KmsMasterKeyId != nil {
		attrs["KmsMasterKeyId"] = *q.KmsMasterKeyId
	}
	if aws.ToBool(q.FifoQueue) {
		attrs["FifoQueue"] = "true"
	}
	if aws.ToBool(q.ContentBasedDeduplication) {
		attrs["ContentBasedDeduplication"] = "true"
	}
	for name, v := range map[string]any{"RedrivePolicy": q.RedrivePolicy, "RedriveAllowPolicy": q.RedriveAllowPolicy} {
		if v == nil {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(raw), "unresolved:") {
			return nil, fmt.Errorf("%s has an unresolved reference: %s", name, raw)
		}
		attrs[name] = string(raw)
	}
	return attrs, nil
}

func (s *Stack) createTables(ctx context.Context) error {
	for _, id := range sortedKeys(s.Template.GetAllDynamoDBTableResources()) {
		t := s.Template.GetAllDynamoDBTableResources()[id]
		in := &dynamodb.CreateTableInput{
			TableName:   t.TableName,
			BillingMode: ddbtypes.BillingModePayPerRequest,
		}
		for _, a := range t.AttributeDefinitions {
			in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
				AttributeName: aws.String(a.AttributeName), AttributeType: ddbtypes.ScalarAttributeType(a.AttributeType),
			})
		}
		in.KeySchema = keySchema(t.KeySchema)
		for _, g := range t.GlobalSecondaryIndexes {
			p := ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(aws.ToString(g.Projection.ProjectionType))}
			if len(g.Projection.NonKeyAttributes) > 0 {
				p.NonKeyAttributes = g.Projection.NonKeyAttributes
			}
			in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{
				IndexName: aws.String(g.IndexName), KeySchema: keySchema(g.KeySchema), Projection: &p,
			})
		}
		if _, err := s.Clients.DynamoDB.CreateTable(ctx, in); err != nil {
			return fmt.Errorf("create table %s: %w", id, err)
		}
		waiter := dynamodb.NewTableExistsWaiter(s.Clients.DynamoDB, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: t.TableName}, time.Minute); err != nil {
			return fmt.Errorf("table %s not active: %w", id, err)
		}
		s.Names[id] = aws.ToString(t.TableName)
	}
	return nil
}

func keySchema(ks []cfnddb.Table_KeySchema) []ddbtypes.KeySchemaElement {
	out := make([]ddbtypes.KeySchemaElement, 0, len(ks))
	for _, k := range ks {
		out = append(out, ddbtypes.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: ddbtypes.KeyType(k.KeyType)})
	}
	return out
}

func (s *Stack) createBuckets(ctx context.Context) error {
	for _, id := range sortedKeys(s.Template.GetAllS3BucketResources()) {
		b := s.Template.GetAllS3BucketResources()[id]
		name := aws.ToString(b.BucketName)
		in := &s3.CreateBucketInput{Bucket: aws.String(name)}
		if aws.ToBool(b.ObjectLockEnabled) {
			in.ObjectLockEnabledForBucket = aws.Bool(true)
		}
		if _, err := s.Clients.S3.CreateBucket(ctx, in); err != nil {
			var owned *s3types.BucketAlreadyOwnedByYou
			if !errors.As(err, &owned) {
				return fmt.Errorf("create bucket %s: %w", id, err)
			}
		}
		if v := b.VersioningConfiguration; v != nil && v.Status == "Enabled" {
			if _, err := s.Clients.S3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
				Bucket:                  aws.String(name),
				VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
			}); err != nil {
				return fmt.Errorf("bucket %s versioning: %w", id, err)
			}
		}
		if lc := b.ObjectLockConfiguration; lc != nil && lc.Rule != nil && lc.Rule.DefaultRetention != nil {
			dr := lc.Rule.DefaultRetention
			ret := &s3types.DefaultRetention{Mode: s3types.ObjectLockRetentionMode(aws.ToString(dr.Mode))}
			if dr.Days != nil {
				ret.Days = aws.Int32(int32(*dr.Days))
			}
			if dr.Years != nil {
				ret.Years = aws.Int32(int32(*dr.Years))
			}
			if _, err := s.Clients.S3.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{
				Bucket: aws.String(name),
				ObjectLockConfiguration: &s3types.ObjectLockConfiguration{
					ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
					Rule:              &s3types.ObjectLockRule{DefaultRetention: ret},
				},
			}); err != nil {
				return fmt.Errorf("bucket %s object lock: %w", id, err)
			}
		}
		s.Names[id] = name
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
