package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/awsclients"
	"github.com/dlqquarantine/dlqq/shared/embedded"
	"github.com/dlqquarantine/dlqq/shared/faults"
)

var stack *embedded.Stack

func TestMain(m *testing.M) {
	st, err := embedded.Start(context.Background(), embedded.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stack = st
	code := m.Run()
	st.Close()
	os.Exit(code)
}

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
	for {
		out, err := stack.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = true
			_, _ = stack.Clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
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
