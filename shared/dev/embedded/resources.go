package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	cfnddb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	cfnsqs "github.com/awslabs/goformation/v7/cloudformation/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
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
	if err := s.createAlarms(ctx); err != nil {
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
	keys := s.Template.GetAllKMSKeyResources()
	for _, id := range sortedKeys(keys) {
		k := keys[id]
		// The alias the template declares for the key (its
		// AWS::KMS::Alias), which Ref on the key resolved to.
		alias := s.Names[id]
		if alias == "" {
			alias = template.KeyAlias(s.Env.StackName, id)
		}
		// The key's kind as the template declares it (a signing key is
		// ECC_NIST_P256 / SIGN_VERIFY); unset is KMS's default, a
		// symmetric encryption key.
		spec, usage := kmstypes.KeySpec(aws.ToString(k.KeySpec)), kmstypes.KeyUsageType(aws.ToString(k.KeyUsage))
		// A persistent stack's key is there from an earlier start: keep it
		// (its ciphertexts must still decrypt, its signatures verify).
		got, _, err := describeKey(ctx, client, alias)
		if err != nil {
			return fmt.Errorf("key %s (%s): %w", id, alias, err)
		}
		if legacy := template.KeyAlias(s.Env.StackName, id); got == nil && legacy != alias {
			// A stack started before keys were named by the template's
			// aliases has its key under the old name: give it the new one.
			old, found, err := describeKey(ctx, client, legacy)
			if err != nil {
				return fmt.Errorf("key %s (%s): %w", id, legacy, err)
			}
			if found {
				if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: old.KeyId}); err != nil {
					return fmt.Errorf("alias %s for the key of %s: %w", alias, legacy, err)
				}
				got = old
			}
		}
		if got != nil {
			if !got.Enabled {
				return fmt.Errorf("key %s (%s) exists but is disabled", id, alias)
			}
			if (spec != "" && got.KeySpec != spec) || (usage != "" && got.KeyUsage != usage) {
				return fmt.Errorf("key %s (%s) exists as %s/%s, the template says %s/%s (remove the data dir to start afresh)", id, alias, got.KeySpec, got.KeyUsage, spec, usage)
			}
			if err := s.hmacKeyWorks(ctx, client, got); err != nil {
				return fmt.Errorf("key %s (%s): %w", id, alias, err)
			}
			s.Names[id], s.KeyARNs[id] = alias, aws.ToString(got.Arn)
			s.useKeyARN(alias, aws.ToString(got.Arn))
			continue
		}
		out, err := client.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String(s.Env.StackName + " " + id), KeySpec: spec, KeyUsage: usage})
		if err != nil {
			return fmt.Errorf("create key %s: %w", id, err)
		}
		if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: out.KeyMetadata.KeyId}); err != nil {
			return fmt.Errorf("create alias %s: %w", alias, err)
		}
		s.Names[id], s.KeyARNs[id] = alias, aws.ToString(out.KeyMetadata.Arn)
		s.useKeyARN(alias, aws.ToString(out.KeyMetadata.Arn))
	}
	return nil
}

// hmacKeyWorks says why a persistent stack's HMAC key cannot make MACs:
// the dev kit keeps HMAC key material beside kumo's snapshot, and a key
// without it (a data dir from before the dev kit kept it, or one whose file
// is gone) would refuse every GenerateMac. A DryRun GenerateMac checks
// everything but computes nothing.
func (s *Stack) hmacKeyWorks(ctx context.Context, client *kms.Client, key *kmstypes.KeyMetadata) error {
	if s.External || key.KeyUsage != kmstypes.KeyUsageTypeGenerateVerifyMac || len(key.MacAlgorithms) == 0 {
		return nil
	}
	_, err := client.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.Arn, Message: []byte("dev kit check"), MacAlgorithm: key.MacAlgorithms[0], DryRun: aws.Bool(true)})
	if dry := (*kmstypes.DryRunOperationException)(nil); errors.As(err, &dry) {
		return nil
	}
	return fmt.Errorf("exists but cannot make MACs (remove the data dir to start afresh): %w", err)
}

// keyDescriber is the KMS call describeKey makes.
type keyDescriber interface {
	DescribeKey(ctx context.Context, in *kms.DescribeKeyInput, opts ...func(*kms.Options)) (*kms.DescribeKeyOutput, error)
}

// describeKey returns the key an alias names; found is false when KMS
// says there is none (NotFoundException). Any other error is returned: a
// persistent stack must not get a new key, whose ciphertexts and
// signatures would not be the old one's, because one DescribeKey failed.
func describeKey(ctx context.Context, client keyDescriber, alias string) (key *kmstypes.KeyMetadata, found bool, err error) {
	got, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
	var nf *kmstypes.NotFoundException
	switch {
	case errors.As(err, &nf):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("describe key: %w", err)
	case got.KeyMetadata == nil:
		return nil, false, errors.New("describe key: no key metadata in the answer")
	}
	return got.KeyMetadata, true, nil
}

// useKeyARN puts the key's real ARN where the template says
// !GetAtt Key.Arn (resolved offline to the ARN of the key's alias, which
// KMS does not take as a key id for every call: kumo's GetPublicKey
// refuses it) in the functions' environments.
func (s *Stack) useKeyARN(alias, arn string) {
	if arn != "" {
		s.replaceInFunctions(fmt.Sprintf("arn:aws:kms:%s:%s:%s", s.Env.Region, s.Env.Account, alias), arn)
	}
}

// useSourcesFile makes every function that takes a sources file
// (SOURCES_FILE, the template's SourcesFile) read path (an absolute one: a
// test's own list of sources).
func (s *Stack) useSourcesFile(path string) {
	// A relative path would not be read outside Lambda
	// (sources.SourcesFilePath).
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	for _, fn := range s.Template.GetAllServerlessFunctionResources() {
		if fn.Environment == nil {
			continue
		}
		if _, ok := fn.Environment.Variables[sources.EnvSourcesFile]; ok {
			fn.Environment.Variables[sources.EnvSourcesFile] = path
		}
	}
}

// replaceInFunctions replaces an environment value of every function.
func (s *Stack) replaceInFunctions(placeholder, value string) {
	for _, fn := range s.Template.GetAllServerlessFunctionResources() {
		if fn.Environment == nil {
			continue
		}
		for k, v := range fn.Environment.Variables {
			if v == placeholder {
				fn.Environment.Variables[k] = value
			}
		}
	}
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
		url, arn, err := s.createQueueARN(ctx, name, attrs)
		if err != nil {
			return fmt.Errorf("create queue %s: %w", id, err)
		}
		if want := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.Env.Region, s.Env.Account, name); arn != want {
			return fmt.Errorf("queue %s: emulator says ARN %s, template resolves %s", id, arn, want)
		}
		s.Names[id], s.QueueURLs[id], s.QueueARNs[id] = name, url, arn
	}
	return nil
}

// createQueueARN is createQueue, and the queue's URL and ARN.
func (s *Stack) createQueueARN(ctx context.Context, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := s.createQueue(ctx, name, attrs)
	if err != nil {
		return "", "", err
	}
	got, err := s.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("queue %s attributes: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// createQueue creates the queue; one there from an earlier start (a
// persistent stack) gets the template's attributes instead, as a stack
// update would give them.
func (s *Stack) createQueue(ctx context.Context, name string, attrs map[string]string) (*sqs.CreateQueueOutput, error) {
	got, err := s.Clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		// Not there (or not known to be): create it, which reports any
		// real problem.
		return s.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	}
	set := maps.Clone(attrs)
	delete(set, "FifoQueue") // fixed at creation
	if _, err := s.Clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: set}); err != nil {
		return nil, fmt.Errorf("existing queue %s: set attributes: %w", name, err)
	}
	return &sqs.CreateQueueOutput{QueueUrl: got.QueueUrl}, nil
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
		if t.StreamSpecification != nil && t.StreamSpecification.StreamViewType != "" {
			in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(t.StreamSpecification.StreamViewType)}
		}
		if got, err := s.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: t.TableName}); err == nil {
			// There from an earlier start (a persistent stack): keep its
			// items if its keys and indexes are the template's.
			if err := sameTable(in, got.Table); err != nil {
				return fmt.Errorf("existing table %s: %w", id, err)
			}
			if !s.External {
				if err := s.restoreStream(ctx, got); err != nil {
					return fmt.Errorf("existing table %s: %w", id, err)
				}
			}
		} else if _, err := s.Clients.DynamoDB.CreateTable(ctx, in); err != nil {
			return fmt.Errorf("create table %s: %w", id, err)
		}
		waiter := dynamodb.NewTableExistsWaiter(s.Clients.DynamoDB, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: t.TableName}, time.Minute); err != nil {
			return fmt.Errorf("table %s not active: %w", id, err)
		}
		s.Names[id] = aws.ToString(t.TableName)
		if !s.noIndexBackfill {
			if err := backfillIndex(ctx, s.Clients.DynamoDB, in); err != nil {
				return fmt.Errorf("table %s: %w", id, err)
			}
		}
		if in.StreamSpecification != nil {
			got, err := s.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: t.TableName})
			if err != nil {
				return fmt.Errorf("describe table %s: %w", id, err)
			}
			if got.Table.LatestStreamArn == nil {
				return fmt.Errorf("table %s has no stream: the template asks for one (%s)", id, in.StreamSpecification.StreamViewType)
			}
			s.StreamARNs[id] = aws.ToString(got.Table.LatestStreamArn)
			s.useStreamARN(template.StreamARN(s.Env.Region, s.Env.Account, aws.ToString(t.TableName)), s.StreamARNs[id])
		}
	}
	return nil
}

// backfillIndex runs the source index's backfill on a table that has the
// index (a new table: it only writes the index state), as an operator does
// after deploying (docs/operations.md), so that listings read it.
func backfillIndex(ctx context.Context, api *dynamodb.Client, in *dynamodb.CreateTableInput) error {
	for _, g := range in.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == dynamostore.IndexBySource {
			rep, err := dynamostore.Backfill(ctx, api, aws.ToString(in.TableName))
			if err == nil && !rep.Complete {
				err = fmt.Errorf("index backfill incomplete after %d passes", rep.Passes)
			}
			return err
		}
	}
	return nil
}

// sameTable says how an existing table's keys and indexes differ from the
// ones in.
func sameTable(in *dynamodb.CreateTableInput, got *ddbtypes.TableDescription) error {
	if got == nil {
		return errors.New("no description")
	}
	keys := func(ks []ddbtypes.KeySchemaElement) string {
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, "%s:%s ", aws.ToString(k.AttributeName), k.KeyType)
		}
		return strings.TrimSpace(b.String())
	}
	if w, g := keys(in.KeySchema), keys(got.KeySchema); w != g {
		return fmt.Errorf("key schema is %q, the template says %q (remove the data dir to start afresh)", g, w)
	}
	want := map[string]string{}
	for _, i := range in.GlobalSecondaryIndexes {
		want[aws.ToString(i.IndexName)] = keys(i.KeySchema) + " " + string(i.Projection.ProjectionType)
	}
	have := map[string]string{}
	for _, i := range got.GlobalSecondaryIndexes {
		pt := ""
		if i.Projection != nil {
			pt = string(i.Projection.ProjectionType)
		}
		have[aws.ToString(i.IndexName)] = keys(i.KeySchema) + " " + pt
	}
	// A table made before LegacyStatusIndex has the status index as well:
	// its readers list from it until the backfill is complete, as a stack
	// deployed with LegacyStatusIndex=keep does.
	if _, ok := want[dynamostore.IndexByStatus]; !ok {
		delete(have, dynamostore.IndexByStatus)
	}
	if !maps.Equal(want, have) {
		return fmt.Errorf("indexes are %v, the template says %v (remove the data dir to start afresh)", have, want)
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

// useStreamARN puts the table's real stream ARN where the template
// resolved Fn::GetAtt StreamArn to a placeholder (the stream's label is
// its creation time): the functions' environments and the event source
// mappings, which is where the template uses it.
func (s *Stack) useStreamARN(placeholder, arn string) {
	s.replaceInFunctions(placeholder, arn)
	for _, m := range s.Template.GetAllLambdaEventSourceMappingResources() {
		if aws.ToString(m.EventSourceArn) == placeholder {
			m.EventSourceArn = aws.String(arn)
		}
	}
}
