package template_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/demo"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/sigv4front"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// recorder notes the IAM authorization behind every SDK call a function
// makes: action, target ARN and the request's condition keys.
type recorder struct {
	mu       sync.Mutex
	fn       string
	region   string
	account  string
	requests []request
}

func (r *recorder) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("record-iam-requests",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			qs := describe(r.fn, r.region, r.account, awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters)
			r.mu.Lock()
			r.requests = append(r.requests, qs...)
			r.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func (r *recorder) has(action string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.requests, func(q request) bool { return q.Action == action })
}

func (r *recorder) hasOp(op string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.requests, func(q request) bool { return q.Op == op })
}

// tagContext is the request-tag condition keys of a request that sets
// tags: s3:RequestObjectTag/<key> per tag, s3:RequestObjectTagKeys the set.
func tagContext(tags []s3types.Tag) map[string]string {
	ctx := map[string]string{}
	var keys []string
	for _, t := range tags {
		ctx["s3:requestobjecttag/"+strings.ToLower(aws.ToString(t.Key))] = aws.ToString(t.Value)
		keys = append(keys, aws.ToString(t.Key))
	}
	ctx["s3:requestobjecttagkeys"] = strings.Join(keys, "\x00")
	return ctx
}

// describe returns the authorizations one SDK call needs, per the service
// authorization reference and each API's "Permissions" section:
//   - DynamoDB: the action of the operation's name on the table (or
//     index, for Query and Scan with IndexName); a TransactWriteItems is
//     authorized item by item (PutItem, UpdateItem, DeleteItem,
//     ConditionCheckItem), a TransactGetItems as GetItem per item;
//   - S3: HeadObject needs s3:GetObject (s3:GetObjectVersion with a
//     versionId), GetObject likewise, DeleteObject s3:DeleteObject
//     (s3:DeleteObjectVersion with a versionId), ListObjectVersions
//     s3:ListBucketVersions on the bucket, PutObject s3:PutObject plus
//     s3:PutObjectRetention when it sets a retention and
//     s3:PutObjectLegalHold when it sets a legal hold; the tagging calls
//     s3:PutObjectTagging / GetObjectTagging / DeleteObjectTagging (their
//     Version variants with a versionId);
//   - SQS: the action of the operation's name without "Batch" on the
//     queue's ARN (GetQueueUrl on the ARN built from QueueName);
//   - CloudWatch PutMetricData: no resource-level permissions ("*"), the
//     namespace as cloudwatch:namespace;
//   - the DynamoDB item actions carry the item's partition key (dlq_id, the
//     one table's) as dynamodb:LeadingKeys, a BatchGetItem and a
//     BatchWriteItem all of their keys in the table (a put's and a
//     delete's alike); ListObjectsV2 and ListObjectVersions their prefix
//     as s3:prefix;
//   - DynamoDB Streams: the action of the operation's name on the stream
//     ARN (ListStreams on the table's streams);
//   - KMS Sign, Verify, GetPublicKey, DescribeKey: the action of the
//     operation's name on the key the KeyId names.
//
// An operation it does not know is reported as action "unknown" and fails
// the check, so a new call cannot go unchecked.
func describe(fn, region, account, svc, op string, params any) []request {
	base := map[string]string{"aws:securetransport": "true"}
	one := func(action, resource string, ctx map[string]string) request {
		c := maps.Clone(base)
		maps.Copy(c, ctx)
		return request{Function: fn, Op: op, Action: action, Resource: resource, Context: c}
	}
	table := func(name *string) string {
		n := aws.ToString(name)
		if strings.HasPrefix(n, "arn:") {
			return n
		}
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", region, account, n)
	}
	queue := func(url *string) string {
		u := strings.TrimRight(aws.ToString(url), "/")
		parts := strings.Split(u, "/")
		if len(parts) < 2 {
			return "unknown-queue:" + u
		}
		return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, parts[len(parts)-2], parts[len(parts)-1])
	}
	object := func(bucket, key *string) string {
		return "arn:aws:s3:::" + aws.ToString(bucket) + "/" + aws.ToString(key)
	}
	// onObject is the request of an object action, or of its version
	// action when the call names a version.
	onObject := func(action, versionAction string, version, bucket, key *string, ctx map[string]string) []request {
		if version != nil {
			action = versionAction
		}
		return []request{one(action, object(bucket, key), ctx)}
	}
	// leading is the dynamodb:LeadingKeys context of items' keys.
	leading := func(items ...map[string]dtypes.AttributeValue) map[string]string {
		var keys []string
		for _, it := range items {
			if k, ok := it["dlq_id"].(*dtypes.AttributeValueMemberS); ok {
				keys = append(keys, k.Value)
			}
		}
		return map[string]string{"dynamodb:leadingkeys": strings.Join(keys, "\x00")}
	}
	// attributes adds the dynamodb:Attributes context of a put: the
	// names of the item's attributes, and, to be safe, those its
	// expressions name (whether IAM counts them is not documented).
	attributes := func(ctx map[string]string, item map[string]dtypes.AttributeValue, names map[string]string) map[string]string {
		set := map[string]bool{}
		for k := range item {
			set[k] = true
		}
		for _, n := range names {
			set[n] = true
		}
		ctx["dynamodb:attributes"] = strings.Join(slices.Sorted(maps.Keys(set)), "\x00")
		return ctx
	}
	switch svc {
	case "DynamoDB":
		switch p := params.(type) {
		case *dynamodb.GetItemInput:
			return []request{one("dynamodb:GetItem", table(p.TableName), leading(p.Key))}
		case *dynamodb.PutItemInput:
			return []request{one("dynamodb:PutItem", table(p.TableName), attributes(leading(p.Item), p.Item, p.ExpressionAttributeNames))}
		case *dynamodb.UpdateItemInput:
			return []request{one("dynamodb:UpdateItem", table(p.TableName), leading(p.Key))}
		case *dynamodb.DeleteItemInput:
			return []request{one("dynamodb:DeleteItem", table(p.TableName), leading(p.Key))}
		case *dynamodb.QueryInput:
			t := table(p.TableName)
			if p.IndexName != nil {
				t += "/index/" + *p.IndexName
			}
			return []request{one("dynamodb:Query", t, nil)}
		case *dynamodb.ScanInput:
			t := table(p.TableName)
			if p.IndexName != nil {
				t += "/index/" + *p.IndexName
			}
			return []request{one("dynamodb:Scan", t, nil)}
		case *dynamodb.BatchGetItemInput:
			var out []request
			for _, name := range slices.Sorted(maps.Keys(p.RequestItems)) {
				out = append(out, one("dynamodb:BatchGetItem", table(&name), leading(p.RequestItems[name].Keys...)))
			}
			return out
		case *dynamodb.BatchWriteItemInput:
			var out []request
			for _, name := range slices.Sorted(maps.Keys(p.RequestItems)) {
				var items []map[string]dtypes.AttributeValue
				for _, w := range p.RequestItems[name] {
					switch {
					case w.PutRequest != nil:
						items = append(items, w.PutRequest.Item)
					case w.DeleteRequest != nil:
						items = append(items, w.DeleteRequest.Key)
					}
				}
				out = append(out, one("dynamodb:BatchWriteItem", table(&name), leading(items...)))
			}
			return out
		case *dynamodb.TransactWriteItemsInput:
			var out []request
			for _, it := range p.TransactItems {
				switch {
				case it.Put != nil:
					out = append(out, one("dynamodb:PutItem", table(it.Put.TableName), attributes(leading(it.Put.Item), it.Put.Item, it.Put.ExpressionAttributeNames)))
				case it.Update != nil:
					out = append(out, one("dynamodb:UpdateItem", table(it.Update.TableName), leading(it.Update.Key)))
				case it.Delete != nil:
					out = append(out, one("dynamodb:DeleteItem", table(it.Delete.TableName), leading(it.Delete.Key)))
				case it.ConditionCheck != nil:
					out = append(out, one("dynamodb:ConditionCheckItem", table(it.ConditionCheck.TableName), leading(it.ConditionCheck.Key)))
				}
			}
			return out
		case *dynamodb.TransactGetItemsInput:
			var out []request
			for _, it := range p.TransactItems {
				if it.Get != nil {
					out = append(out, one("dynamodb:GetItem", table(it.Get.TableName), leading(it.Get.Key)))
				}
			}
			return out
		}
	case "S3":
		switch p := params.(type) {
		case *s3.HeadObjectInput:
			return onObject("s3:GetObject", "s3:GetObjectVersion", p.VersionId, p.Bucket, p.Key, nil)
		case *s3.GetObjectInput:
			return onObject("s3:GetObject", "s3:GetObjectVersion", p.VersionId, p.Bucket, p.Key, nil)
		case *s3.DeleteObjectInput:
			return onObject("s3:DeleteObject", "s3:DeleteObjectVersion", p.VersionId, p.Bucket, p.Key, nil)
		case *s3.GetObjectRetentionInput:
			return []request{one("s3:GetObjectRetention", object(p.Bucket, p.Key), nil)}
		case *s3.PutObjectRetentionInput:
			return []request{one("s3:PutObjectRetention", object(p.Bucket, p.Key), map[string]string{"s3:object-lock-mode": string(p.Retention.Mode)})}
		case *s3.PutObjectTaggingInput:
			var tags []s3types.Tag
			if p.Tagging != nil {
				tags = p.Tagging.TagSet
			}
			return onObject("s3:PutObjectTagging", "s3:PutObjectVersionTagging", p.VersionId, p.Bucket, p.Key, tagContext(tags))
		case *s3.GetObjectTaggingInput:
			return onObject("s3:GetObjectTagging", "s3:GetObjectVersionTagging", p.VersionId, p.Bucket, p.Key, nil)
		case *s3.DeleteObjectTaggingInput:
			return onObject("s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging", p.VersionId, p.Bucket, p.Key, nil)
		case *s3.ListObjectVersionsInput:
			var ctx map[string]string
			if p.Prefix != nil {
				ctx = map[string]string{"s3:prefix": *p.Prefix}
			}
			return []request{one("s3:ListBucketVersions", "arn:aws:s3:::"+aws.ToString(p.Bucket), ctx)}
		case *s3.ListObjectsV2Input:
			var ctx map[string]string
			if p.Prefix != nil {
				ctx = map[string]string{"s3:prefix": *p.Prefix}
			}
			return []request{one("s3:ListBucket", "arn:aws:s3:::"+aws.ToString(p.Bucket), ctx)}
		case *s3.PutObjectInput:
			ctx := map[string]string{}
			if p.IfNoneMatch != nil {
				ctx["s3:if-none-match"] = *p.IfNoneMatch
			}
			if p.IfMatch != nil {
				ctx["s3:if-match"] = *p.IfMatch
			}
			if p.ServerSideEncryption != "" {
				ctx["s3:x-amz-server-side-encryption"] = string(p.ServerSideEncryption)
			}
			if p.SSEKMSKeyId != nil {
				ctx["s3:x-amz-server-side-encryption-aws-kms-key-id"] = *p.SSEKMSKeyId
			}
			if p.ObjectLockMode != "" {
				ctx["s3:object-lock-mode"] = string(p.ObjectLockMode)
			}
			if p.ObjectLockLegalHoldStatus != "" {
				ctx["s3:object-lock-legal-hold"] = string(p.ObjectLockLegalHoldStatus)
			}
			if p.Tagging != nil {
				q, err := url.ParseQuery(*p.Tagging)
				if err != nil {
					return []request{one("unknown", "S3 PutObject with unreadable Tagging "+*p.Tagging, nil)}
				}
				var tags []s3types.Tag
				for _, k := range slices.Sorted(maps.Keys(q)) {
					tags = append(tags, s3types.Tag{Key: aws.String(k), Value: aws.String(q.Get(k))})
				}
				maps.Copy(ctx, tagContext(tags))
			}
			out := []request{one("s3:PutObject", object(p.Bucket, p.Key), ctx)}
			if p.ObjectLockMode != "" || p.ObjectLockRetainUntilDate != nil {
				out = append(out, one("s3:PutObjectRetention", object(p.Bucket, p.Key), ctx))
			}
			if p.ObjectLockLegalHoldStatus != "" {
				out = append(out, one("s3:PutObjectLegalHold", object(p.Bucket, p.Key), ctx))
			}
			return out
		}
	case "SQS":
		action := "sqs:" + strings.TrimSuffix(op, "Batch")
		switch p := params.(type) {
		case *sqs.GetQueueUrlInput:
			owner := account
			if p.QueueOwnerAWSAccountId != nil {
				owner = *p.QueueOwnerAWSAccountId
			}
			return []request{one(action, fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, owner, aws.ToString(p.QueueName)), nil)}
		case *sqs.SendMessageInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.SendMessageBatchInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.GetQueueAttributesInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.ListQueueTagsInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.ReceiveMessageInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.DeleteMessageInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.DeleteMessageBatchInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		case *sqs.ChangeMessageVisibilityInput:
			return []request{one(action, queue(p.QueueUrl), nil)}
		}
	case "DynamoDB Streams":
		switch p := params.(type) {
		case *dynamodbstreams.DescribeStreamInput:
			return []request{one("dynamodb:DescribeStream", aws.ToString(p.StreamArn), nil)}
		case *dynamodbstreams.GetShardIteratorInput:
			return []request{one("dynamodb:GetShardIterator", aws.ToString(p.StreamArn), nil)}
		case *dynamodbstreams.GetRecordsInput:
			// An iterator starts with its stream's ARN ("arn:…|…").
			if arn, _, ok := strings.Cut(aws.ToString(p.ShardIterator), "|"); ok && strings.HasPrefix(arn, "arn:aws:dynamodb:") {
				return []request{one("dynamodb:GetRecords", arn, nil)}
			}
		case *dynamodbstreams.ListStreamsInput:
			return []request{one("dynamodb:ListStreams", table(p.TableName)+"/stream/*", nil)}
		}
	case "KMS":
		key := func(id *string) string {
			k := aws.ToString(id)
			if strings.HasPrefix(k, "alias/") {
				k = fmt.Sprintf("arn:aws:kms:%s:%s:%s", region, account, k)
			}
			return k
		}
		switch p := params.(type) {
		case *kms.SignInput:
			return []request{one("kms:Sign", key(p.KeyId), nil)}
		case *kms.VerifyInput:
			return []request{one("kms:Verify", key(p.KeyId), nil)}
		case *kms.GetPublicKeyInput:
			return []request{one("kms:GetPublicKey", key(p.KeyId), nil)}
		case *kms.DescribeKeyInput:
			return []request{one("kms:DescribeKey", key(p.KeyId), nil)}
		case *kms.GenerateMacInput:
			return []request{one("kms:GenerateMac", key(p.KeyId), nil)}
		case *kms.VerifyMacInput:
			return []request{one("kms:VerifyMac", key(p.KeyId), nil)}
		}
	case "Lambda":
		// ListEventSourceMappings has no resource-level permission: IAM
		// authorizes it on "*".
		if _, ok := params.(*lambda.ListEventSourceMappingsInput); ok {
			return []request{one("lambda:ListEventSourceMappings", "*", nil)}
		}
	case "CloudWatch":
		if p, ok := params.(*cloudwatch.PutMetricDataInput); ok {
			return []request{one("cloudwatch:PutMetricData", "*", map[string]string{"cloudwatch:namespace": aws.ToString(p.Namespace)})}
		}
	}
	return []request{one("unknown", fmt.Sprintf("%s %s (%T): teach describe this call", svc, op, params), nil)}
}

// notDriven are grants TestEveryCallIsGrantedByItsRole finds unused,
// each with the path that needs it and that the test does not drive. The
// ledger's role has none: its paths are all driven (driveLedger).
var notDriven = map[string]string{
	"IngestRole/ingest/ReadTheDLQ grants sqs:ChangeMessageVisibility: no call uses it":     "no function code calls it; kept from the ingest role's first version",
	"RedriveRole/redrive/ReadClaimCheckPayloads grants s3:GetObject: no call uses it":      "a claim-check reference without a version id (unversioned bucket) and the current-version fallback",
	"RedriveRole/redrive/StoreLargeCorrections grants s3:PutObject: no call uses it":       "a correction too large to keep in its record",
	"SweeperRole/sweeper/WriteTheArchive grants s3:GetObject: no call uses it":             "the archive object's read-back after a 412 (a crashed or lost earlier archive put)",
	"SweeperRole/sweeper/WriteTheArchive grants s3:GetObjectVersion: no call uses it":      "the same, by version",
	"SweeperRole/sweeper/WriteTheArchive grants s3:GetObjectRetention: no call uses it":    "the same: the existing object's retention checked",
	"SweeperRole/sweeper/MoveClaimCheckPayloads grants s3:GetObject: no call uses it":      "a claim-check reference without a version id",
	"SweeperRole/sweeper/MarkArchivedPayloads grants s3:PutObjectTagging: no call uses it": "the same: tagging the unversioned object",
	"SweeperRole/sweeper/StubRecords grants dynamodb:GetItem: no call uses it":             "a stub write whose answer was lost, read back",
	"SweeperRole/sweeper/TellGoneFromRefused grants s3:ListBucket: no call uses it":        "no call: it makes S3 answer a missing payload key or version 404, not 403 (s3store.DeletePayload)",
	"SweeperRole/sweeper/StubRecords grants dynamodb:UpdateItem: no call uses it":          "an integrity hold of a record that fails verification when swept",
	// The writer keys (issue 25): granted before the writer proofs that
	// call GenerateMac are wired into the functions; remove these once
	// they are.
	"IngestWriterMacPolicy/ProveWrites grants kms:GenerateMac: no call uses it":  "writer proofs, not wired into ingest yet",
	"RedriveWriterMacPolicy/ProveWrites grants kms:GenerateMac: no call uses it": "writer proofs, not wired into redrive yet",
	"SweeperWriterMacPolicy/ProveWrites grants kms:GenerateMac: no call uses it": "writer proofs, not wired into the sweeper yet",
}

// Every AWS call each function makes, through every path the tests drive
// (ingest with a claim-checked body, redrive, settle, correct, standing
// policies, the sweeper, metrics, the ledger's batches, retries and
// digests), is granted by its role in the template, and every grant of a
// role is used by one of its calls (or listed in notDriven).
// The emulators enforce no IAM, so this is what stands between a green
// suite and AccessDenied on the first deploy.
func TestEveryCallIsGrantedByItsRole(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{Params: demo.StackParams})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	recs := map[string]*recorder{}
	fns := map[string]*localrunner.Functions{}
	clients := map[string]*awsclients.Clients{}
	crash := &crasher{}
	for _, name := range []string{"IngestFunction", "RedriveFunction", "SweeperFunction", "MetricsFunction", "LedgerFunction", "DigestFunction"} {
		recs[name] = &recorder{fn: name, region: st.Env.Region, account: st.Env.Account}
		cfg := st.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, recs[name].option)
		if name == "LedgerFunction" || name == "DigestFunction" {
			cfg.APIOptions = append(cfg.APIOptions, crash.option)
		}
		clients[name] = awsclients.New(cfg, awsclients.Options{Local: true})
		var err error
		if fns[name], err = localrunner.NewFunctions(st, clients[name], log, io.Discard); err != nil {
			t.Fatal(err)
		}
		// NewFunctions builds every function on the clients; what the
		// building calls is the digest function's (its signer reads the
		// public key: Functions.Ledger is built as the digest function),
		// so it counts for the digest function only. The stream function
		// is built below on its own recorder (its signer reads it too).
		if name != "DigestFunction" {
			for _, q := range recs[name].requests {
				if q.Action != "kms:GetPublicKey" {
					t.Fatalf("building the functions called %s: teach this test whose call it is", q)
				}
			}
			recs[name].requests = nil
		}
	}
	stream, err := fns["LedgerFunction"].NewLedger(clients["LedgerFunction"], io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f := fns["IngestFunction"]
	src := f.IngestConfig.Sources[f.Source]
	var msgs []events.SQSMessage
	for i, body := range []string{
		`{"event_id":"e1","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e2","ndc":"NDC?","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e3","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z","note":"` + strings.Repeat("x", 200<<10) + `"}`,
		`{"event_id":"e4","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e5","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e6","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z","note":"` + strings.Repeat("y", 200<<10) + `"}`,
		`{"event_id":"e7","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
	} {
		msgs = append(msgs, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: body, EventSource: "aws:sqs", EventSourceARN: st.QueueARNs["DeadLetterQueue"],
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": src.ARN}})
	}
	// e3's body is claim-checked. Its object is there already, as after a
	// crash between the upload and the record's write (or a put whose
	// answer was lost): ingest's conditional put gets 412 and reads the
	// existing object to verify it (HeadObject, maybe GetObject).
	e3 := msgs[2].Body
	if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(f.IngestConfig.PayloadBucket), Body: strings.NewReader(e3),
		Key: aws.String("bodies/" + f.Source + "/" + quarantine.BodySHA256([]byte(quarantine.RecordID(f.Source, "e3")))[:32] + "/" + quarantine.BodySHA256([]byte(e3))),
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := f.Ingest.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest: %+v %v", resp, err)
	}
	id := func(key string) string { return quarantine.RecordID(f.Source, key) }
	store := dynamostore.New(st.Clients.DynamoDB, f.IngestConfig.TableName)
	get := func(key string) *quarantine.Record {
		rec, err := store.Get(ctx, id(key))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	park := func(key string) {
		rec := get(key)
		parked, err := rec.ParkManual("ops", "audit", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, rec, parked); err != nil {
			t.Fatal(err)
		}
	}

	// Park two for the sweeper (parked records are due at once here).
	park("e4")
	// And a claim-checked one: archiving it reads its object and deletes
	// it from the payload bucket.
	park("e6")
	// Tamper with e5 behind its seal: redrive holds it (a conditional
	// update and a counter in one transaction).
	forged := get("e5")
	forged.RedriveCap = 99
	item, err := dynamostore.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.IngestConfig.TableName), Item: item}); err != nil {
		t.Fatal(err)
	}
	// The operator function (<stack>-operate) runs the redrive code with
	// the redrive function's role, writer key and environment behind the
	// operator endpoint (functions/operator: wire.Redrive on
	// redrive.ConfigFromEnv), so it is built here from the redrive
	// function's configuration, on a recorder of its own: an operator's
	// read of a claim-checked payload, and a park and an unpark of a
	// record (e7 is QUARANTINED again after it: the sweeper leaves it).
	// (Compared as the template declares them: the embedded stack adjusts
	// the redrive function's environment for local runs.)
	declared, err := template.Open(template.Path(), st.Env)
	if err != nil {
		t.Fatal(err)
	}
	redriveFn := lookup(t, declared.GetServerlessFunctionWithName, "RedriveFunction")
	operatorFn := lookup(t, declared.GetServerlessFunctionWithName, "OperatorFunction")
	if !maps.Equal(operatorFn.Environment.Variables, redriveFn.Environment.Variables) || aws.ToString(operatorFn.Role) != aws.ToString(redriveFn.Role) {
		t.Fatalf("the operator function is not configured as the redrive function: environment %v (redrive: %v), role %s", operatorFn.Environment.Variables, redriveFn.Environment.Variables, aws.ToString(operatorFn.Role))
	}
	recs["OperatorFunction"] = &recorder{fn: "OperatorFunction", region: st.Env.Region, account: st.Env.Account}
	opCfg := st.AWS.Copy()
	opCfg.APIOptions = append(opCfg.APIOptions, recs["OperatorFunction"].option)
	operator, err := fns["RedriveFunction"].NewRedrive(awsclients.New(opCfg, awsclients.Options{Local: true}))
	if err != nil {
		t.Fatal(err)
	}
	// Through a local operator endpoint (a SigV4 check against local
	// identities, as the function URL's AWS_IAM is): operator-a asks,
	// operator-b approves what is high-risk (the unpark, the correction),
	// so the approval items' writes are on the operator's recorder too.
	ep, err := lambdatest.ServeHandler(st, operator.OperatorHandler, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	asker, _ := ep.Client(st, "operator-a")
	approver, _ := ep.Client(st, "operator-b")
	post := func(c sigv4front.Client, body string) redrive.Report {
		t.Helper()
		status, answer, err := c.Post(ctx, []byte(body))
		var rep redrive.Report
		if err != nil || status != http.StatusOK || json.Unmarshal(answer, &rep) != nil {
			t.Fatalf("operator %s as %s: %d %s %v", body[:30], c.Identity.Name, status, answer, err)
		}
		return rep
	}
	approvals := 0
	for _, req := range []string{
		`{"action":"read","source":"` + f.Source + `","ids":["` + id("e3") + `"]}`,
		`{"action":"park","source":"` + f.Source + `","ids":["` + id("e7") + `"],"reason":"hold for the consumer's fix"}`,
		`{"action":"unpark","source":"` + f.Source + `","ids":["` + id("e7") + `"],"reason":"the consumer is fixed"}`,
		`{"action":"correct","source":"` + f.Source + `","ids":["` + id("e2") + `"],"reason":"typo","payload":"{\"event_id\":\"e2\",\"ndc\":\"12345-678-90\",\"lot\":\"L\",\"quantity_delta\":1,\"schedule\":\"CII\",\"facility\":\"F\",\"occurred_at\":\"2026-11-29T09:00:00Z\"}"}`,
	} {
		if rep := post(asker, req); rep.Stopped == redrive.StoppedPendingApproval {
			post(approver, `{"action":"approve","source":"`+f.Source+`","approval_id":"`+rep.Approval.ID+`"}`)
			approvals++
		}
	}
	if approvals != 2 {
		t.Fatalf("%d approvals, want the unpark's and the correction's", approvals)
	}
	if !recs["OperatorFunction"].has("s3:GetObjectVersion") || !recs["OperatorFunction"].has("dynamodb:PutItem") && !recs["OperatorFunction"].has("dynamodb:UpdateItem") {
		t.Fatalf("the operator's read, park and unpark made no payload read or record write: %v", recs["OperatorFunction"].requests)
	}
	r := fns["RedriveFunction"].Redrive
	for _, req := range []string{
		`{"source":"` + f.Source + `","ids":["` + id("e1") + `","` + id("e3") + `","` + id("e5") + `"],"requested_by":"ops"}`,
		`{"action":"settle","source":"` + f.Source + `","requested_by":"schedule:settle"}`,
		`{"action":"policies","source":"` + f.Source + `","requested_by":"schedule:policies"}`,
	} {
		if strings.Contains(req, `"policies"`) {
			p, err := policy.New(policy.Spec{Source: f.Source, MinAge: time.Nanosecond, MaxPerRun: 5, ExpiresAt: time.Now().Add(time.Hour)}, "lead", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := dynamostore.NewPolicyStore(st.Clients.DynamoDB, f.IngestConfig.TableName).Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := r.Handle(ctx, []byte(req))
		if err != nil {
			t.Fatalf("redrive %s: %v", req[:40], err)
		}
		if strings.Contains(req, id("e5")) && rep.Integrity.Count != 1 {
			t.Fatalf("the tampered record was not held: %+v", rep)
		}
	}
	if rep, err := fns["SweeperFunction"].Sweeper.Run(ctx); err != nil || len(rep.Archived) != 2 {
		t.Fatalf("sweeper: %+v %v", rep, err)
	}
	if _, err := fns["MetricsFunction"].Metrics.Run(ctx); err != nil {
		t.Fatal(err)
	}

	driveLedger(t, st, fns["LedgerFunction"], stream, fns["DigestFunction"].Ledger, recs, crash)
	// Once the ledger has counted e5's hold, a metrics run publishes it as
	// new and moves the source's marks.
	reps, err := fns["MetricsFunction"].Metrics.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(reps, func(r metrics.Report) bool { return r.Source == f.Source }); i < 0 || reps[i].NewIntegrityHolds != 1 {
		t.Fatalf("the metrics run after the ledger did not publish e5's hold as new: %+v", reps)
	}

	if !recs["IngestFunction"].has("s3:GetObject") {
		t.Fatal("ingest did not read the existing claim-check object: the 412 path was not driven")
	}
	if !recs["SweeperFunction"].has("s3:DeleteObject") {
		t.Fatal("the sweeper did not delete an archived record's claim-check object: that path was not driven")
	}
	stk, err := newStack(st.Template, st.Env)
	if err != nil {
		t.Fatal(err)
	}
	stk.realKeys = realKeyARNs(t, st)
	stk.derive()
	byRole := map[string]map[string][]request{}
	for _, fn := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[fn]
		if len(rec.requests) == 0 {
			t.Fatalf("%s: no calls recorded", fn)
		}
		for _, f := range stk.check(fn, rec.requests) {
			t.Error(f)
		}
		role := stk.roleOf(fn)
		if byRole[role] == nil {
			byRole[role] = map[string][]request{}
		}
		byRole[role][fn] = rec.requests
		actions := map[string]bool{}
		for _, q := range rec.requests {
			actions[q.Action] = true
		}
		t.Logf("%s uses %v", fn, slices.Sorted(maps.Keys(actions)))
	}
	// What a role grants and these paths do not use: nothing for the
	// ledger's role (exactly the calls of its stream and digest functions
	// together), and for the others only the grants of paths listed in
	// notDriven.
	for _, role := range slices.Sorted(maps.Keys(byRole)) {
		var unexplained []string
		for _, f := range stk.unused(role, byRole[role]) {
			if _, ok := notDriven[f]; !ok {
				unexplained = append(unexplained, f)
			}
		}
		if len(unexplained) > 0 {
			t.Errorf("%s: the role grants what none of its functions' calls uses (remove the grant, or drive the path that needs it, or list it in notDriven): %q", role, unexplained)
		}
	}
	// The digest function's calls are its own: the stream function never
	// signs, reads the mappings or writes the canary, and the digest
	// function never ledgers a segment or applies counters.
	for fn, not := range map[string][]string{
		"LedgerFunction": {"kms:Sign", "lambda:ListEventSourceMappings", "dynamodb:Scan"},
		"DigestFunction": {"dynamodb:GetRecords", "dynamodb:GetShardIterator"},
	} {
		for _, a := range not {
			if recs[fn].has(a) {
				t.Errorf("%s made %s: that call is the other ledger function's", fn, a)
			}
		}
	}
	if recs["DigestFunction"].hasOp("TransactWriteItems") {
		t.Error("the digest function applied counters: only the stream function does")
	}
	for _, q := range recs["DigestFunction"].requests {
		if q.Action == "s3:PutObject" && strings.Contains(q.Resource, "/ledger/segments/") {
			t.Errorf("the digest function wrote a segment: %s", q)
		}
	}

	for _, f := range stk.checkServices() {
		t.Error(f)
	}
	checkVerifyAsAuditor(t, st, stk)

	// The same calls against a template whose ingest role may write
	// claim-check objects only under corrections/: the checker names the
	// function, the action and the object.
	narrowed := stk.clone()
	setResource(t, narrowed, "IngestRole", "ClaimCheckPayloads", "arn:aws:s3:::"+f.IngestConfig.PayloadBucket+"/corrections/*")
	found := narrowed.check("IngestFunction", recs["IngestFunction"].requests)
	if !slices.ContainsFunc(found, func(s string) bool {
		return strings.HasPrefix(s, "IngestFunction (role IngestRole): s3:PutObject on arn:aws:s3:::"+f.IngestConfig.PayloadBucket+"/bodies/")
	}) {
		t.Fatalf("a narrowed claim-check grant went unnoticed: %q", found)
	}
}

// realKeyARNs maps the ARN the stack's KMS gave each of the template's
// keys to the key's alias.
func realKeyARNs(t *testing.T, st *embedded.Stack) map[string]string {
	t.Helper()
	out := map[string]string{}
	for id := range st.Template.GetAllKMSKeyResources() {
		alias := st.Names[id]
		d, err := st.Clients.KMS.DescribeKey(context.Background(), &kms.DescribeKeyInput{KeyId: aws.String(alias)})
		if err != nil {
			t.Fatalf("key %s (%s): %v", id, alias, err)
		}
		out[aws.ToString(d.KeyMetadata.Arn)] = alias
	}
	return out
}
