package template_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// stmt returns one statement of a role's inline policies, by Sid.
func stmt(t *testing.T, s *stack, roleID, sid string) map[string]any {
	t.Helper()
	for _, p := range props(s.resources[roleID])["Policies"].([]any) {
		for _, st := range p.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			if m, ok := st.(map[string]any); ok && m["Sid"] == sid {
				return m
			}
		}
	}
	t.Fatalf("%s has no statement %s", roleID, sid)
	return nil
}

// setResource narrows one statement of a role to the given resources.
func setResource(t *testing.T, s *stack, roleID, sid string, resources ...string) {
	t.Helper()
	var rs []any
	for _, r := range resources {
		rs = append(rs, r)
	}
	stmt(t, s, roleID, sid)["Resource"] = rs
}

func openStack(t *testing.T, params map[string]any) *stack {
	t.Helper()
	e := env
	e.Params = params
	s, err := newStack(openWith(t, params), e)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// indexName is the quarantine table's (first) global secondary index.
func indexName(s *stack) string {
	for _, id := range s.of("AWS::DynamoDB::Table") {
		if gsis, ok := props(s.resources[id])["GlobalSecondaryIndexes"].([]any); ok && len(gsis) > 0 {
			return str(gsis[0].(map[string]any)["IndexName"])
		}
	}
	return ""
}

// sampleCalls are one call of each kind the functions make, built from SDK
// inputs the way the recorder sees them.
func sampleCalls(t *testing.T, s *stack) map[string][]request {
	t.Helper()
	r, a := env.Region, env.Account
	fnEnv := func(fn, k string) string {
		return str(props(s.resources[fn])["Environment"].(map[string]any)["Variables"].(map[string]any)[k])
	}
	table, bucket := fnEnv("IngestFunction", "TABLE_NAME"), fnEnv("IngestFunction", "PAYLOAD_BUCKET")
	src := "https://sqs.eu-west-1.amazonaws.com/111122223333/prod-source"
	d := func(fn, svc, op string, p any) []request { return describe(fn, r, a, svc, op, p) }
	put := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("bodies/prod-source/0123/abcd"), IfNoneMatch: aws.String("*"),
		ServerSideEncryption: s3types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String(fnEnv("IngestFunction", "PAYLOAD_KMS_KEY_ID"))}
	return map[string][]request{
		"IngestFunction": slices.Concat(
			d("IngestFunction", "S3", "PutObject", put),
			d("IngestFunction", "S3", "GetObject", &s3.GetObjectInput{Bucket: aws.String(bucket), Key: put.Key, VersionId: aws.String("v1")}),
			d("IngestFunction", "DynamoDB", "PutItem", &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("prod-source#0123abcd")})),
		"RedriveFunction": slices.Concat(
			d("RedriveFunction", "SQS", "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String(src)}),
			d("RedriveFunction", "SQS", "GetQueueAttributes", &sqs.GetQueueAttributesInput{QueueUrl: aws.String(src)}),
			d("RedriveFunction", "DynamoDB", "Query", &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(indexName(s))})),
		"MetricsFunction": d("MetricsFunction", "CloudWatch", "PutMetricData", &cloudwatch.PutMetricDataInput{Namespace: aws.String("DLQQuarantine")}),
		"LedgerFunction":  ledgerCalls(t, s, "LedgerFunction"),
		"DigestFunction":  ledgerCalls(t, s, "DigestFunction"),
	}
}

// key is a DynamoDB key on dlq_id.
func key(id string) map[string]dtypes.AttributeValue {
	return map[string]dtypes.AttributeValue{"dlq_id": &dtypes.AttributeValueMemberS{Value: id}}
}

// ledgerCalls are the calls of design section 5, of the stream function
// (LedgerFunction: the head and checkpoint reads, a segment's conditional
// create under COMPLIANCE and its read-back after a 412, the counters'
// transaction with its checkpoint, the shard listing, the signed digest's
// head and its public key) or of the digest function (DigestFunction: the
// heads' BatchGetItem, the digest's Sign and put, the pipeline check's
// mappings and canary).
func ledgerCalls(t *testing.T, s *stack, fn string) []request {
	t.Helper()
	fnEnv := func(k string) string {
		return str(props(s.resources[fn])["Environment"].(map[string]any)["Variables"].(map[string]any)[k])
	}
	table, bucket, stream, signer := fnEnv("TABLE_NAME"), fnEnv("LEDGER_BUCKET"), fnEnv("STREAM_ARN"), fnEnv("SIGNING_KEY_ID")
	if table == "" || bucket == "" || stream == "" || signer == "" {
		t.Fatalf("the %s's environment lacks TABLE_NAME, LEDGER_BUCKET, STREAM_ARN or SIGNING_KEY_ID", fn)
	}
	d := func(svc, op string, p any) []request {
		return describe(fn, env.Region, env.Account, svc, op, p)
	}
	until := time.Date(2033, 12, 1, 0, 0, 0, 0, time.UTC)
	object := func(k string) *s3.PutObjectInput {
		return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), IfNoneMatch: aws.String("*"),
			ObjectLockMode: s3types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: &until, ChecksumSHA256: aws.String("AAAA")}
	}
	const seg = "ledger/segments/shardId-00000001/0000000000000000000000000000000000000100.json"
	common := slices.Concat(
		d("DynamoDB Streams", "DescribeStream", &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(stream)}),
		d("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("#led#digest"), ConsistentRead: aws.Bool(true)}),
		d("KMS", "GetPublicKey", &kms.GetPublicKeyInput{KeyId: aws.String(signer)}),
		d("S3", "GetObject", &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(seg)}),
		d("S3", "ListObjectsV2", &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("ledger/digests/")}),
	)
	if fn == "LedgerFunction" {
		return slices.Concat(common,
			d("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("#led#head#shardId-00000001"), ConsistentRead: aws.Bool(true)}),
			d("S3", "PutObject", object(seg)),
			d("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("#led#head#shardId-00000001")}),
			d("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("#led#ctr#shardId-00000001"), ConsistentRead: aws.Bool(true)}),
			d("DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
				{Update: &dtypes.Update{TableName: aws.String(table), Key: key("#ctr#state#src#QUARANTINED#3")}},
				{Update: &dtypes.Update{TableName: aws.String(table), Key: key("#led#ctr#shardId-00000001")}}}}),
		)
	}
	streamFn := fnEnv("STREAM_FUNCTION_NAME")
	if streamFn == "" {
		t.Fatalf("the %s's environment lacks STREAM_FUNCTION_NAME", fn)
	}
	return slices.Concat(common,
		d("DynamoDB", "BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]dtypes.KeysAndAttributes{
			table: {Keys: []map[string]dtypes.AttributeValue{key("#led#head#shardId-00000001"), key("#led#head#shardId-00000002")}}}}),
		d("KMS", "Sign", &kms.SignInput{KeyId: aws.String(signer), MessageType: kmstypes.MessageTypeDigest, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256}),
		d("S3", "PutObject", object("ledger/digests/000000000001.json")),
		d("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("#led#digest")}),
		// The pipeline check: the stream function's mapping, its own, the
		// canary.
		d("Lambda", "ListEventSourceMappings", &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(streamFn), EventSourceArn: aws.String(stream)}),
		d("Lambda", "ListEventSourceMappings", &lambda.ListEventSourceMappingsInput{FunctionName: aws.String("prod-digest")}),
		d("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("#cny#ledger"), ConsistentRead: aws.Bool(true)}),
		d("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("#cny#ledger")}),
	)
}

func wantFinding(t *testing.T, found []string, prefix, why string) {
	t.Helper()
	if !slices.ContainsFunc(found, func(f string) bool { return strings.HasPrefix(f, prefix) && strings.Contains(f, why) }) {
		t.Fatalf("no finding %q ... %q in %q", prefix, why, found)
	}
}

// The checker sees a grant narrowed or removed in every place one can hide:
// a statement's resource, its action list, its condition, the key's
// policy, a deny, the event source mapping's polling, and a policy outside
// the role (the extra DLQ's).
func TestIAMCheckerCatchesMissingGrants(t *testing.T) {
	base := openStack(t, nil)
	calls := sampleCalls(t, base)
	for fn, qs := range calls {
		if found := base.check(fn, qs); len(found) > 0 {
			t.Fatalf("the template as written: %q", found)
		}
	}
	if found := base.checkServices(); len(found) > 0 {
		t.Fatalf("the template as written: %q", found)
	}
	const key = "arn:aws:kms:eu-west-1:111122223333:alias/prod-quarantine"
	const dlq = "arn:aws:sqs:eu-west-1:111122223333:prod-dlq"
	fnEnv := func(k string) string {
		return str(props(base.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)[k])
	}
	bucket := "arn:aws:s3:::" + fnEnv("PAYLOAD_BUCKET")
	table := "arn:aws:dynamodb:eu-west-1:111122223333:table/" + fnEnv("TABLE_NAME")
	t.Run("resource", func(t *testing.T) {
		s := base.clone()
		setResource(t, s, "IngestRole", "ClaimCheckPayloads", bucket+"/corrections/*")
		wantFinding(t, s.check("IngestFunction", calls["IngestFunction"]),
			"IngestFunction (role IngestRole): s3:PutObject on "+bucket+"/bodies/prod-source/0123/abcd", "no statement")
	})
	t.Run("index", func(t *testing.T) {
		s := base.clone()
		setResource(t, s, "RedriveRole", "ClaimAndMarkRecords", table)
		wantFinding(t, s.check("RedriveFunction", calls["RedriveFunction"]),
			"RedriveFunction (role RedriveRole): dynamodb:Query on "+table+"/index/"+indexName(base), "no statement")
	})
	t.Run("kms for an encrypted queue", func(t *testing.T) {
		s := base.clone()
		stmt(t, s, "RedriveRole", "UseTheKey")["Action"] = []any{"kms:Decrypt"}
		wantFinding(t, s.check("RedriveFunction", calls["RedriveFunction"]),
			"RedriveFunction (role RedriveRole): kms:GenerateDataKey on "+key+" (for sqs:SendMessage on arn:aws:sqs:eu-west-1:111122223333:prod-source)", "no statement")
	})
	t.Run("kms for an encrypted table", func(t *testing.T) {
		s := base.clone()
		setResource(t, s, "IngestRole", "UseTheKey", "arn:aws:kms:eu-west-1:111122223333:key/other")
		wantFinding(t, s.check("IngestFunction", calls["IngestFunction"]),
			"IngestFunction (role IngestRole): kms:Decrypt on "+key+" (for dynamodb:PutItem on "+table+")", "no statement")
	})
	t.Run("key policy", func(t *testing.T) {
		s := base.clone()
		kp := props(s.resources["QuarantineKey"])["KeyPolicy"].(map[string]any)
		kp["Statement"] = slices.DeleteFunc(kp["Statement"].([]any), func(st any) bool { return st.(map[string]any)["Sid"] == "AccountAdministers" })
		wantFinding(t, s.check("IngestFunction", calls["IngestFunction"]),
			"IngestFunction (role IngestRole): kms:GenerateDataKey on "+key+" (for s3:PutObject", "key policy allows it neither")
	})
	t.Run("condition", func(t *testing.T) {
		s := base.clone()
		stmt(t, s, "MetricsRole", "PublishMetrics")["Condition"] = map[string]any{"StringEquals": map[string]any{"cloudwatch:namespace": "Other"}}
		wantFinding(t, s.check("MetricsFunction", calls["MetricsFunction"]), "MetricsFunction (role MetricsRole): cloudwatch:PutMetricData on *", "no statement")
	})
	t.Run("unmodeled condition", func(t *testing.T) {
		s := base.clone()
		stmt(t, s, "MetricsRole", "PublishMetrics")["Condition"] = map[string]any{"StringEquals": map[string]any{"aws:RequestTag/team": "x"}}
		wantFinding(t, s.check("MetricsFunction", calls["MetricsFunction"]), "MetricsFunction (role MetricsRole): cloudwatch:PutMetricData on *", "condition on aws:RequestTag/team not modeled")
	})
	t.Run("deny", func(t *testing.T) {
		s := base.clone()
		st := stmt(t, s, "IngestRole", "ClaimCheckPayloads")
		doc := s.resources["IngestRole"]["Properties"].(map[string]any)["Policies"].([]any)[0].(map[string]any)["PolicyDocument"].(map[string]any)
		doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Sid": "OnlyCreate", "Effect": "Deny", "Action": "s3:PutObject", "Resource": st["Resource"],
			"Condition": map[string]any{"Null": map[string]any{"s3:if-none-match": "true"}}})
		if found := s.check("IngestFunction", calls["IngestFunction"]); len(found) > 0 {
			t.Fatalf("a conditional create was denied: %q", found)
		}
		blind := slices.Clone(calls["IngestFunction"])
		blind[0].Context = map[string]string{"aws:securetransport": "true"}
		wantFinding(t, s.check("IngestFunction", blind), "IngestFunction (role IngestRole): s3:PutObject on "+bucket+"/bodies/", "denied by IngestRole/ingest/OnlyCreate")
	})
	t.Run("bucket policy", func(t *testing.T) {
		plain := slices.Clone(calls["IngestFunction"])
		plain[0].Context = map[string]string{"aws:securetransport": "false", "s3:if-none-match": "*"}
		wantFinding(t, base.check("IngestFunction", plain), "IngestFunction (role IngestRole): s3:PutObject", "denied by PayloadBucketPolicy/DenyInsecureTransport")
	})
	t.Run("event source mapping", func(t *testing.T) {
		s := base.clone()
		stmt(t, s, "IngestRole", "ReadTheDLQ")["Action"] = []any{"sqs:ReceiveMessage", "sqs:GetQueueAttributes"}
		wantFinding(t, s.check("IngestFunction", calls["IngestFunction"]), "IngestFunction (role IngestRole): sqs:DeleteMessage on "+dlq+" (for IngestDLQMapping)", "no statement")
		s = base.clone()
		setResource(t, s, "IngestRole", "UseTheKey", "arn:aws:kms:eu-west-1:111122223333:key/other")
		wantFinding(t, s.check("IngestFunction", calls["IngestFunction"]),
			"IngestFunction (role IngestRole): kms:Decrypt on "+key+" (for sqs:ReceiveMessage on "+dlq+" (for IngestDLQMapping))", "no statement")
	})
	t.Run("logs", func(t *testing.T) {
		s := base.clone()
		setResource(t, s, "SweeperRole", "WriteLogs", "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/prod-other:*")
		wantFinding(t, s.check("SweeperFunction", nil), "SweeperFunction (role SweeperRole): logs:PutLogEvents on arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/prod-sweeper:log-stream:", "no statement")
	})
	t.Run("on-failure destination", func(t *testing.T) {
		s := base.clone()
		s.resources["FailureQueue"] = map[string]any{"Type": "AWS::SQS::Queue", "Properties": map[string]any{"QueueName": "prod-failures", "KmsMasterKeyId": "alias/prod-quarantine"}}
		s.resources["RedriveFailures"] = map[string]any{"Type": "AWS::Lambda::EventInvokeConfig", "Properties": map[string]any{"FunctionName": "prod-redrive", "Qualifier": "$LATEST",
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{"Destination": "arn:aws:sqs:eu-west-1:111122223333:prod-failures"}}}}
		s.derive()
		wantFinding(t, s.check("RedriveFunction", calls["RedriveFunction"]),
			"RedriveFunction (role RedriveRole): sqs:SendMessage on arn:aws:sqs:eu-west-1:111122223333:prod-failures (for RedriveFailures OnFailure)", "no statement")
		st := stmt(t, s, "RedriveRole", "ReplayIntoTheSource")
		st["Resource"] = append(st["Resource"].([]any), "arn:aws:sqs:eu-west-1:111122223333:prod-failures")
		if found := s.check("RedriveFunction", calls["RedriveFunction"]); len(found) > 0 {
			t.Fatalf("a granted destination: %q", found)
		}
		stmt(t, s, "RedriveRole", "UseTheKey")["Action"] = []any{"kms:Decrypt"}
		wantFinding(t, s.check("RedriveFunction", calls["RedriveFunction"]),
			"RedriveFunction (role RedriveRole): kms:GenerateDataKey on "+key+" (for sqs:SendMessage on arn:aws:sqs:eu-west-1:111122223333:prod-failures (for RedriveFailures OnFailure))", "no statement")
	})
	t.Run("alarms and the encrypted topic", func(t *testing.T) {
		s := base.clone()
		kp := props(s.resources["QuarantineKey"])["KeyPolicy"].(map[string]any)
		var cw map[string]any
		for _, st := range kp["Statement"].([]any) {
			if m := st.(map[string]any); m["Sid"] == "AlarmsPublishToTheEncryptedTopic" {
				cw = m
			}
		}
		cw["Condition"] = map[string]any{"ArnLike": map[string]any{"aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:prod.*"}}
		if found := s.checkServices(); len(found) > 0 {
			t.Fatalf("alarms named after the stack: %q", found)
		}
		cw["Condition"] = map[string]any{"ArnLike": map[string]any{"aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:other-*"}}
		wantFinding(t, s.checkServices(), "cloudwatch.amazonaws.com: kms:GenerateDataKey on "+key+" (for alarm DLQDepthAlarm notifying arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic)", "no statement of the resource's policy allows cloudwatch.amazonaws.com")
		s = base.clone()
		s.resources["AlarmTopicPolicy"] = map[string]any{"Type": "AWS::SNS::TopicPolicy", "Properties": map[string]any{"Topics": []any{"arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic"},
			"PolicyDocument": map[string]any{"Statement": []any{map[string]any{"Sid": "TLSOnly", "Effect": "Deny", "Principal": "*", "Action": "sns:Publish", "Resource": "*",
				"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}}}}}
		wantFinding(t, s.checkServices(), "cloudwatch.amazonaws.com: sns:Publish on arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic (for alarm ", "no statement of the resource's policy allows cloudwatch.amazonaws.com")
	})
	t.Run("schedule dead-letter queue", func(t *testing.T) {
		s := base.clone()
		const q = "arn:aws:sqs:eu-west-1:111122223333:prod-schedule-dlq"
		s.resources["ScheduleDLQ"] = map[string]any{"Type": "AWS::SQS::Queue", "Properties": map[string]any{"QueueName": "prod-schedule-dlq", "KmsMasterKeyId": "alias/prod-quarantine"}}
		props(s.resources["SweeperSchedule"])["Targets"].([]any)[0].(map[string]any)["DeadLetterConfig"] = map[string]any{"Arn": q}
		s.derive()
		wantFinding(t, s.checkServices(), "events.amazonaws.com: sqs:SendMessage on "+q+" (for rule SweeperSchedule's dead-letter queue)", "no statement of the resource's policy allows events.amazonaws.com")
		s.resources["ScheduleDLQPolicy"] = map[string]any{"Type": "AWS::SQS::QueuePolicy", "Properties": map[string]any{"Queues": []any{"https://sqs.eu-west-1.amazonaws.com/111122223333/prod-schedule-dlq"},
			"PolicyDocument": map[string]any{"Statement": []any{map[string]any{"Sid": "Events", "Effect": "Allow", "Principal": map[string]any{"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage", "Resource": q,
				"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": "arn:aws:events:eu-west-1:111122223333:rule/prod-SweeperSchedule"}}}}}}}
		found := s.checkServices()
		wantFinding(t, found, "events.amazonaws.com: kms:GenerateDataKey on "+key+" (for rule SweeperSchedule's dead-letter queue)", "no statement of the resource's policy allows events.amazonaws.com")
		if slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, "sqs:SendMessage") }) {
			t.Fatalf("the queue policy allows the send: %q", found)
		}
	})
	// The extra DLQ is polled with the ingest role under a separate
	// AWS::IAM::Policy, with kms:Decrypt on its key behind an Fn::If.
	t.Run("extra DLQ policy", func(t *testing.T) {
		const extra, extraKey = "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		s := openStack(t, map[string]any{"ExtraDLQArn": extra, "ExtraSourceQueueArn": "arn:aws:sqs:eu-west-1:111122223333:legacy", "ExtraDLQKmsKeyArn": extraKey})
		s.external[extra] = extraKey
		if found := s.check("IngestFunction", calls["IngestFunction"]); len(found) > 0 {
			t.Fatalf("the extra DLQ's mapping is not granted: %q", found)
		}
		c := s.clone()
		c.external[extra] = extraKey
		doc := props(c.resources["IngestExtraDLQPolicy"])["PolicyDocument"].(map[string]any)
		doc["Statement"] = doc["Statement"].([]any)[:1]
		wantFinding(t, c.check("IngestFunction", calls["IngestFunction"]),
			"IngestFunction (role IngestRole): kms:Decrypt on "+extraKey+" (for sqs:ReceiveMessage on "+extra+" (for IngestExtraDLQMapping))", "no statement")
		c = s.clone()
		delete(c.resources, "IngestExtraDLQPolicy")
		wantFinding(t, c.check("IngestFunction", calls["IngestFunction"]), "IngestFunction (role IngestRole): sqs:ReceiveMessage on "+extra+" (for IngestExtraDLQMapping)", "no statement")
	})
}

func TestIAMWildcards(t *testing.T) {
	for _, c := range []struct {
		pattern, value string
		want           bool
	}{
		{"*", "", true},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/bodies/x", true},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b", false},
		{"arn:aws:s3:::b/corrections/*", "arn:aws:s3:::b/bodies/x", false},
		{"arn:aws:sqs:*:111122223333:prod-?lq", "arn:aws:sqs:eu-west-1:111122223333:prod-dlq", true},
		{"arn:aws:sqs:*:111122223333:prod-?lq", "arn:aws:sqs:eu-west-1:111122223333:prod-dlqx", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXcYYb", false},
		{"arn:aws:logs:r:a:log-group:/aws/lambda/f:*", "arn:aws:logs:r:a:log-group:/aws/lambda/f:log-stream:x", true},
		{"arn:aws:logs:r:a:log-group:/aws/lambda/f", "arn:aws:logs:r:a:log-group:/aws/lambda/f:log-stream:x", false},
	} {
		if got := match(c.pattern, c.value); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pattern, c.value, got)
		}
	}
	if !anyMatch([]string{"SQS:sendmessage"}, "sqs:SendMessage", true) || anyMatch([]string{"arn:aws:s3:::B/*"}, "arn:aws:s3:::b/x", false) {
		t.Error("actions match case-insensitively, resources case-sensitively")
	}
}

func TestIAMConditions(t *testing.T) {
	tagged := func(keys ...string) map[string]string {
		ctx := map[string]string{"s3:requestobjecttagkeys": strings.Join(keys, "\x00")}
		for _, k := range keys {
			ctx["s3:requestobjecttag/"+k] = "true"
		}
		return ctx
	}
	ns := map[string]string{"cloudwatch:namespace": "DLQQuarantine"}
	leading := func(keys ...string) map[string]string {
		return map[string]string{"dynamodb:leadingkeys": strings.Join(keys, "\x00")}
	}
	for _, c := range []struct {
		op, key string
		want    []string
		ctx     map[string]string
		out     outcome
	}{
		{"StringEquals", "cloudwatch:namespace", []string{"DLQQuarantine"}, ns, matches},
		{"StringEquals", "cloudwatch:namespace", []string{"Other", "DLQQuarantine"}, ns, matches},
		{"StringEquals", "cloudwatch:namespace", []string{"Other"}, ns, noMatch},
		{"StringEquals", "cloudwatch:namespace", []string{"DLQQuarantine"}, nil, noMatch},
		{"StringNotEquals", "cloudwatch:namespace", []string{"DLQQuarantine"}, ns, noMatch},
		{"StringNotEquals", "cloudwatch:namespace", []string{"Other"}, nil, matches},
		{"StringEqualsIfExists", "cloudwatch:namespace", []string{"Other"}, nil, matches},
		{"StringLike", "cloudwatch:namespace", []string{"DLQ*"}, ns, matches},
		{"Null", "s3:if-none-match", []string{"true"}, nil, matches},
		{"Null", "s3:if-none-match", []string{"true"}, map[string]string{"s3:if-none-match": "*"}, noMatch},
		{"Bool", "aws:SecureTransport", []string{"false"}, map[string]string{"aws:securetransport": "true"}, noMatch},
		{"StringEquals", "s3:RequestObjectTag/dlqq-archived", []string{"true"}, tagged("dlqq-archived"), matches},
		{"StringEquals", "s3:RequestObjectTag/dlqq-archived", []string{"true"}, tagged("other"), noMatch},
		{"ForAllValues:StringEquals", "s3:RequestObjectTagKeys", []string{"dlqq-archived"}, tagged("dlqq-archived"), matches},
		{"ForAllValues:StringEquals", "s3:RequestObjectTagKeys", []string{"dlqq-archived"}, tagged("dlqq-archived", "other"), noMatch},
		{"ForAllValues:StringEquals", "s3:RequestObjectTagKeys", []string{"dlqq-archived"}, nil, matches},
		{"ForAnyValue:StringEquals", "s3:RequestObjectTagKeys", []string{"dlqq-archived"}, tagged("other", "dlqq-archived"), matches},
		{"ForAnyValue:StringEquals", "s3:RequestObjectTagKeys", []string{"dlqq-archived"}, nil, noMatch},
		// The ledger's keys: a Deny with ForAnyValue matches a request
		// with one of them among its keys, and neither one without them
		// nor one without the key (a Scan, DescribeTable).
		{"ForAnyValue:StringLike", "dynamodb:LeadingKeys", []string{"#led#*", "#ctr#*"}, leading("src#k", "#led#head#shard-1"), matches},
		{"ForAnyValue:StringLike", "dynamodb:LeadingKeys", []string{"#led#*", "#ctr#*"}, leading("src#k", "#pol#src#p"), noMatch},
		{"ForAnyValue:StringLike", "dynamodb:LeadingKeys", []string{"#led#*", "#ctr#*"}, nil, noMatch},
		{"ForAllValues:StringLike", "dynamodb:LeadingKeys", []string{"#led#*", "#ctr#*"}, leading("#ctr#src#state#3", "#led#ctr#shard-1"), matches},
		{"ForAllValues:StringLike", "dynamodb:LeadingKeys", []string{"#led#*", "#ctr#*"}, leading("#ctr#src#state#3", "src#k"), noMatch},
		{"ForAllValues:StringEquals", "cloudwatch:namespace", []string{"DLQQuarantine"}, ns, undecidable},
		{"StringEquals", "aws:RequestTag/team", []string{"x"}, nil, undecidable},
		{"NumericLessThan", "cloudwatch:namespace", []string{"1"}, ns, undecidable},
	} {
		ctx := map[string]string{}
		for k, v := range c.ctx {
			ctx[strings.ToLower(k)] = v
		}
		if got := condOutcome(c.op, strings.ToLower(c.key), c.want, ctx); got != c.out {
			t.Errorf("%s %s %v with %v: %v, want %v", c.op, c.key, c.want, c.ctx, got, c.out)
		}
	}
}
