package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// Two source queues share one DLQ: each message SQS moves there names its
// own source in DeadLetterQueueSourceArn, as on AWS (kumo sets none; the
// dev kit's front does). A message sent to the DLQ directly names none,
// and a receive that does not ask for the attribute gets none.
func TestSharedDLQMessagesNameTheirSourceQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	api := st.Clients.SQS
	prefix := embedded.RandomName("shared")
	create := func(name string, attrs map[string]string) (url, arn string) {
		t.Helper()
		out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		a, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl), a.Attributes["QueueArn"]
	}
	dlqURL, dlqARN := create(prefix+"-dlq", nil)
	policy := map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlqARN), "VisibilityTimeout": "0"}
	ordersURL, ordersARN := create(prefix+"-orders", policy)
	// The second source is attached afterwards, as an existing queue is.
	refundsURL, refundsARN := create(prefix+"-refunds", nil)
	if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(refundsURL), Attributes: policy}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, q := range []struct{ url, arn, body string }{{ordersURL, ordersARN, "order-1"}, {refundsURL, refundsARN, "refund-1"}, {ordersURL, ordersARN, "order-2"}} {
		if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(q.body)}); err != nil {
			t.Fatal(err)
		}
		want[q.body] = q.arn
	}
	if _, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(refundsURL), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("refund-2")}, {Id: aws.String("b"), MessageBody: aws.String("refund-3")},
	}}); err != nil {
		t.Fatal(err)
	}
	want["refund-2"], want["refund-3"] = refundsARN, refundsARN
	if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlqURL), MessageBody: aws.String("direct")}); err != nil {
		t.Fatal(err)
	}
	want["direct"] = ""

	got := map[string]string{}
	for deadline := time.Now().Add(10 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		// Each source's consumer fails its one receive (visibility 0);
		// the next receive moves the message.
		for _, u := range []string{ordersURL, refundsURL} {
			if _, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 10}); err != nil {
				t.Fatal(err)
			}
		}
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = m.Attributes["DeadLetterQueueSourceArn"]
			if m.Attributes["SentTimestamp"] == "" {
				t.Errorf("%s: the other system attributes are gone: %v", aws.ToString(m.Body), m.Attributes)
			}
		}
	}
	for body, arn := range want {
		if g, ok := got[body]; !ok || g != arn {
			t.Errorf("%s: DeadLetterQueueSourceArn %q (received %v), want %q", body, g, ok, arn)
		}
	}

	// Not asked for, not given.
	if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(ordersURL), MessageBody: aws.String("order-3")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(ordersURL)}); err != nil {
			t.Fatal(err)
		}
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 1 {
			if a, has := out.Messages[0].Attributes["DeadLetterQueueSourceArn"]; has {
				t.Errorf("a receive that asks for SentTimestamp only got DeadLetterQueueSourceArn %q", a)
			}
			return
		}
	}
	t.Fatal("order-3 never reached the DLQ")
}

// A FIFO message keeps its group and deduplication ids, in its source
// queue and in the FIFO DLQ it is moved to (kumo gives neither as an
// attribute, and drops the group in the DLQ), and names its source there.
func TestFIFOMessagesKeepTheirGroupInTheDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	api := st.Clients.SQS
	prefix := embedded.RandomName("fifo")
	all := []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
	dlq, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-dlq.fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := "arn:aws:sqs:" + embedded.Region + ":" + embedded.Account + ":" + prefix + "-dlq.fifo"
	src, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + ".fifo"), Attributes: map[string]string{"FifoQueue": "true",
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlqARN), "VisibilityTimeout": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: src.QueueUrl, MessageBody: aws.String("one"), MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String("d1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: src.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("x"), MessageBody: aws.String("two"), MessageGroupId: aws.String("g2"), MessageDeduplicationId: aws.String("d2")},
	}}); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"one": {"g1", "d1"}, "two": {"g2", "d2"}}
	inSource := map[string][2]string{}
	inDLQ := map[string][3]string{}
	for deadline := time.Now().Add(10 * time.Second); len(inDLQ) < len(want) && time.Now().Before(deadline); {
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: src.QueueUrl, MaxNumberOfMessages: 10, MessageSystemAttributeNames: all})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			inSource[aws.ToString(m.Body)] = [2]string{m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"]}
			if a, has := m.Attributes["DeadLetterQueueSourceArn"]; has {
				t.Errorf("a message in its source queue names a DLQ source %q", a)
			}
		}
		out, err = api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageSystemAttributeNames: all})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			inDLQ[aws.ToString(m.Body)] = [3]string{m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"], m.Attributes["DeadLetterQueueSourceArn"]}
		}
	}
	srcARN := dlqARN[:len(dlqARN)-len("-dlq.fifo")] + ".fifo"
	for body, w := range want {
		if inSource[body] != w {
			t.Errorf("%s in its source queue: group, dedup %q, want %q", body, inSource[body], w)
		}
		if g := inDLQ[body]; g != [3]string{w[0], w[1], srcARN} {
			t.Errorf("%s in the DLQ: group, dedup, source %q, want %q", body, g, [3]string{w[0], w[1], srcARN})
		}
	}
}
