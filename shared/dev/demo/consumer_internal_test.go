package demo

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// A message whose visibility runs out before the consumer deletes it is
// delivered again: the refused delete is forgiven, and the second delivery
// is the same message, consumed or dead-lettered once.
func TestConsumerTakesARedeliveryAsTheSameMessage(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", embedded.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", embedded.SecretKey)
	t.Setenv("AWS_REGION", embedded.Region)
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	ctx := context.Background()
	api, url := st.Clients.SQS, st.QueueURLs["SourceQueue"]
	c := newConsumer(st)
	twice := func(body string) (first, again sqstypes.Message) {
		t.Helper()
		if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		receive := func() sqstypes.Message {
			out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1})
			if err != nil || len(out.Messages) != 1 {
				t.Fatalf("receive: %v %v", out, err)
			}
			return out.Messages[0]
		}
		first = receive()
		// Its visibility runs out: SQS delivers it again, with a new handle.
		if _, err := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
		again = receive()
		if aws.ToString(again.MessageId) != aws.ToString(first.MessageId) {
			t.Fatal("not the same message")
		}
		return first, again
	}

	good, recalled := `{"event_id":"ev-good"}`, `{"event_id":"ev-recalled"}`
	c.byBody[good] = Generated{ID: "ev-good", Kind: Good}
	c.byBody[recalled] = Generated{ID: "ev-recalled", Kind: Recalled}
	for _, body := range []string{good, recalled} {
		first, again := twice(body)
		if err := c.handle(ctx, url, first); err != nil {
			t.Fatalf("the late delete of %s: %v", body, err)
		}
		if err := c.handle(ctx, url, again); err != nil {
			t.Fatalf("the redelivery of %s: %v", body, err)
		}
	}
	if c.consumed.Load() != 1 || c.consumedCount("ev-good") != 1 || c.recalled.Load() != 1 {
		t.Fatalf("consumed %d (%d distinct), recalled %d; want 1, 1, 1", c.consumed.Load(), c.consumedCount("ev-good"), c.recalled.Load())
	}
	out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs["DeadLetterQueue"]), MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("the DLQ holds %d messages (%v), want the recalled one once", len(out.Messages), err)
	}
	if empty, err := isEmpty(ctx, api, url); err != nil || !empty {
		t.Fatalf("the source queue is not empty: %v", err)
	}
	if err := redelivered(errors.New("boom")); err == nil {
		t.Fatal("redelivered forgave another error")
	}
}
