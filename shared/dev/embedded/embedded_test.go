package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// The stack built from the template really dead-letters: after
// MaxReceiveCount receives a message moves to the DLQ, body intact.
func TestStackFromTemplateRoutesToDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{Params: map[string]any{"MaxReceiveCount": 2}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	src, dlq := st.QueueURLs["SourceQueue"], st.QueueURLs["DeadLetterQueue"]
	if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		out, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(src)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 1 {
			t.Fatalf("receive %d: got %d messages", i, len(out.Messages))
		}
		// A consumer that fails gives the message back at once.
		if _, err := st.Clients.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(src), ReceiptHandle: out.Messages[0].ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			t.Fatal(err)
		}
	}
	var got []sqstypes.Message
	for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		// The move happens on the next receive of the source queue.
		_, _ = st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(src)})
		out, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		got = out.Messages
	}
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"x":1}` {
		t.Fatalf("DLQ got %+v", got)
	}
	t.Logf("DLQ system attributes: %v", got[0].Attributes)

	if _, err := st.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.Names["QuarantineTable"])}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clients.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.Names["PayloadBucket"])}); err != nil {
		t.Fatal(err)
	}
}

// A local stack given SettleMarginSeconds settles with that margin: the
// redrive function gets no ingest timeout and DLQ visibility to raise it
// to the ingest lag they imply (a deployed stack always does).
func TestALocalSettleMarginIsTakenAsGiven(t *testing.T) {
	for _, c := range []struct {
		params map[string]any
		floor  bool
	}{{nil, true}, {map[string]any{"SettleMarginSeconds": 1}, false}} {
		st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: c.params})
		fn, err := st.Template.GetServerlessFunctionWithName("RedriveFunction")
		if err != nil {
			t.Fatal(err)
		}
		_, timeout := fn.Environment.Variables["INGEST_TIMEOUT_SECONDS"]
		_, vis := fn.Environment.Variables["DLQ_VISIBILITY_SECONDS"]
		if timeout != c.floor || vis != c.floor {
			t.Errorf("params %v: INGEST_TIMEOUT_SECONDS set %v, DLQ_VISIBILITY_SECONDS set %v; want %v", c.params, timeout, vis, c.floor)
		}
	}
}

// The local stack's SDK clients send through sdkhttp (docs/emulators.md).
func TestTheStackSendsThroughSDKHTTP(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	if !sdkhttp.Wraps(st.AWS.HTTPClient) {
		t.Fatalf("the stack's HTTP client is %T, not sdkhttp's", st.AWS.HTTPClient)
	}
}
