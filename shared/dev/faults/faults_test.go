package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
)

var stack *embedded.Stack

func TestMain(m *testing.M) { embedded.Main(m, embedded.Options{}, &stack) }

// clients with every request faulted and no SDK retries, so the injected
// response is what the caller sees.
func faulty(in *faults.Injector, h aws.HTTPClient) *awsclients.Clients {
	cfg := stack.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, in.APIOption)
	cfg.Retryer = func() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), 1) }
	return awsclients.New(cfg, awsclients.Options{Local: true, HTTPClient: h})
}

// The SDK reads the injected responses as the services' own errors, which
// its retryer retries.
func TestInjectedResponsesAreTheServicesErrors(t *testing.T) {
	ctx := context.Background()
	in := faults.New(1, 1)
	c := faulty(in, in.HTTPClient(awshttp.NewBuildableClient()))
	codes := map[string]bool{}
	for range 40 {
		_, err := c.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(stack.Names["QuarantineTable"])})
		var ae smithy.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("DescribeTable: %v, want an API error", err)
		}
		codes[ae.ErrorCode()] = true
		if !retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
			t.Errorf("%s is not retryable to the SDK", ae.ErrorCode())
		}
	}
	if !codes["ThrottlingException"] || !codes["InternalServerError"] {
		t.Fatalf("codes %v, want ThrottlingException and InternalServerError", codes)
	}
	_, err := c.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(stack.Names["PayloadBucket"])})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Fatalf("HeadBucket: %v, want a 503", err)
	}
	got := in.Counts()
	if got[faults.DynamoDBThrottle]+got[faults.DynamoDB5xx] != 40 || got[faults.S3SlowDown] != 1 {
		t.Fatalf("counts %v", got)
	}
}

// A failed batch entry was never enqueued: only the entries reported
// successful reach the queue.
func TestPartialBatchFailuresAreNotSent(t *testing.T) {
	ctx := context.Background()
	url := stack.QueueURLs["SourceQueue"]
	in := faults.New(0.5, 3)
	c := faulty(in, awshttp.NewBuildableClient())
	sent := map[string]bool{}
	failed := 0
	for b := range 5 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := range 10 {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprintf("m-%d-%d", b, i))})
		}
		out, err := c.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Successful)+len(out.Failed) != 10 {
			t.Fatalf("%d successful + %d failed, want 10 entries accounted for", len(out.Successful), len(out.Failed))
		}
		for _, s := range out.Successful {
			sent[fmt.Sprintf("m-%d-%s", b, aws.ToString(s.Id))] = true
		}
		for _, f := range out.Failed {
			if f.SenderFault || aws.ToString(f.Code) == "" {
				t.Fatalf("failed entry %+v, want a server-side code", f)
			}
		}
		failed += len(out.Failed)
	}
	if failed == 0 || len(sent) == 0 {
		t.Fatalf("failed %d, sent %d: want both", failed, len(sent))
	}
	got := map[string]bool{}
	for body := range receiveAll(t, url) {
		got[body] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("queue holds %d messages, %d reported sent", len(got), len(sent))
	}
}

// A crashed process makes no request after its crash point.
func TestCrashStopsEveryLaterRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := faults.New(0, 1)
	proc := faults.NewCrash(in.HTTPClient(awshttp.NewBuildableClient()), 3, true, cancel)
	c := faulty(in, proc)
	for i := range 6 {
		_, err := c.DynamoDB.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(stack.Names["QuarantineTable"])})
		if (err == nil) != (i < 2) {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if ok, point := proc.Crashed(); !ok || ctx.Err() == nil || point == "" {
		t.Fatalf("crashed %v at %q, ctx %v", ok, point, ctx.Err())
	}
	if n := in.Calls()["dynamodb"]; n != 3 {
		t.Fatalf("%d requests reached the network, want 3 (two, then the applied crash point)", n)
	}
}

// outcome of one request through the injector.
type outcome int

const (
	notApplied  outcome = iota // answered in place of the service
	lost500                    // applied; the caller got a 500
	lostTimeout                // applied; the caller got a timeout
	answered                   // applied and answered
)

// checkLost checks what the caller of a request saw: a lost answer is a
// 500 of the service or a transport timeout, both retryable to the SDK.
func checkLost(t *testing.T, what string, want outcome, err error, code string) {
	t.Helper()
	retryable := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool()
	var ae smithy.APIError
	var ne net.Error
	switch want {
	case answered:
		if err != nil {
			t.Fatalf("%s: %v, want an answer", what, err)
		}
	case lost500:
		if !errors.As(err, &ae) || ae.ErrorCode() != code || !retryable {
			t.Fatalf("%s: %v, want a retryable %s", what, err, code)
		}
	case lostTimeout:
		if !errors.As(err, &ne) || !ne.Timeout() || !retryable {
			t.Fatalf("%s: %v, want a retryable timeout", what, err)
		}
	case notApplied:
		if err == nil || !retryable {
			t.Fatalf("%s: %v, want a retryable fault", what, err)
		}
	}
}

// A lost answer in a live process: the service applies the request (a
// clean client sees its effect), the caller gets a 500 or a timeout. Only
// DynamoDB writes, S3 PutObject and SQS SendMessageBatch lose answers;
// FailFirst makes the first two of each meet one of each kind.
func TestLostAnswersAreAppliedAndFail(t *testing.T) {
	ctx := context.Background()
	in := faults.New(0, 5)
	in.FailFirst = true
	c := faulty(in, in.HTTPClient(awshttp.NewBuildableClient()))
	run := embedded.RandomName("lost")
	// The first DynamoDB and S3 requests are FailFirst's not-applied faults.
	seq := []outcome{notApplied, lost500, lostTimeout, answered}

	table := stack.Names["QuarantineTable"]
	for i, want := range seq {
		key := fmt.Sprintf("#faults#%s#%d", run, i)
		_, err := c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: key}}})
		checkLost(t, fmt.Sprintf("PutItem %d", i), want, err, "InternalServerError")
		got, err := stack.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		if applied := len(got.Item) > 0; applied != (want != notApplied) {
			t.Fatalf("PutItem %d (%v): applied %v", i, want, applied)
		}
	}
	// Reads never lose an answer.
	if _, err := c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: "#faults#" + run + "#1"}}}); err != nil {
		t.Fatalf("GetItem: %v", err)
	}

	bucket := stack.Names["PayloadBucket"]
	for i, want := range seq {
		key := fmt.Sprintf("faults/%s/%d", run, i)
		_, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")})
		checkLost(t, fmt.Sprintf("PutObject %d", i), want, err, "InternalError")
		_, err = stack.Clients.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if applied := err == nil; applied != (want != notApplied) {
			t.Fatalf("PutObject %d (%v): applied %v (%v)", i, want, applied, err)
		}
	}

	q, err := stack.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run)})
	if err != nil {
		t.Fatal(err)
	}
	// The first entry is FailFirst's partial failure: never sent, no call.
	for i, want := range seq {
		out, err := c.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl,
			Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("e"), MessageBody: aws.String(fmt.Sprint(i))}}})
		if want == notApplied {
			if err != nil || len(out.Failed) != 1 {
				t.Fatalf("batch %d: %+v %v, want the entry failed", i, out, err)
			}
			continue
		}
		checkLost(t, fmt.Sprintf("SendMessageBatch %d", i), want, err, "InternalError")
	}
	if got := receiveAll(t, aws.ToString(q.QueueUrl)); fmt.Sprint(got) != "map[1:1 2:1 3:1]" {
		t.Fatalf("queue holds %v, want batches 1 (lost 500), 2 (lost timeout) and 3, once each", got)
	}

	counts := in.Counts()
	for _, k := range faults.LostKinds {
		if counts[k] != 1 {
			t.Errorf("%s counted %d, want 1 (counts %v)", k, counts[k], counts)
		}
	}
}

// The SDK's retryer retries a lost answer, so the request is applied again:
// a SendMessageBatch whose first two answers are lost is enqueued three
// times and reported successful.
func TestSDKRetriesALostAnswer(t *testing.T) {
	ctx := context.Background()
	in := faults.New(0, 7)
	in.FailFirst = true
	cfg := stack.AWS.Copy()
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 3; o.MaxBackoff = time.Millisecond })
	}
	c := awsclients.New(cfg, awsclients.Options{Local: true, HTTPClient: in.HTTPClient(awshttp.NewBuildableClient())})
	q, err := stack.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(embedded.RandomName("retry"))})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl,
		Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("e"), MessageBody: aws.String("once")}}})
	if err != nil || len(out.Successful) != 1 {
		t.Fatalf("%+v %v, want success on the third try", out, err)
	}
	if got := receiveAll(t, aws.ToString(q.QueueUrl)); got["once"] != 3 {
		t.Fatalf("queue holds %v, want the message three times", got)
	}
	if n := in.Calls()["sqs"]; n != 3 {
		t.Fatalf("%d SQS requests, want 3", n)
	}
}

// receiveAll drains a queue and counts its messages by body.
func receiveAll(t *testing.T, url string) map[string]int {
	t.Helper()
	ctx := context.Background()
	got := map[string]int{}
	for {
		out, err := stack.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)]++
			if _, err := stack.Clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
