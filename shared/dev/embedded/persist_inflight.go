package embedded

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// kumo's snapshot of a queue holds its queued messages only: a message in
// flight (received and not deleted, including one released with
// ChangeMessageVisibility 0 and not received again, which kumo keeps in
// flight until the next ReceiveMessage) is not written, so a persistent
// stack restarted loses it. Copying such messages back (send a copy, delete
// the original) is not done: a copy cannot carry the system attributes
// (DeadLetterQueueSourceArn, which ingest reads to name a message's source;
// ApproximateReceiveCount, which the redrive policy counts; SentTimestamp),
// and on a FIFO queue a copy with the original's deduplication id inside
// the 5-minute window is dropped, so deleting the original would lose it.
// InFlight counts them instead, for a warning.

// QueueInFlight is how many messages of one queue are in flight.
type QueueInFlight struct {
	Name string // the queue's name
	N    int
}

// InFlight counts, for each of the stack's queues that has some, the
// messages in flight (ApproximateNumberOfMessagesNotVisible), by queue
// name. Call it after everything that receives has stopped and before
// Close: these are the messages a restart with DataDir will not find.
func (s *Stack) InFlight(ctx context.Context) ([]QueueInFlight, error) {
	ids := make([]string, 0, len(s.QueueURLs))
	for id := range s.QueueURLs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []QueueInFlight
	for _, id := range ids {
		a, err := s.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(s.QueueURLs[id]),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			return out, fmt.Errorf("queue %s: %w", s.Names[id], err)
		}
		raw := a.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
		n, err := strconv.Atoi(raw)
		if err != nil {
			return out, fmt.Errorf("queue %s: ApproximateNumberOfMessagesNotVisible %q: %w", s.Names[id], raw, err)
		}
		if n > 0 {
			name := s.Names[id]
			if name == "" {
				name = id
			}
			out = append(out, QueueInFlight{Name: name, N: n})
		}
	}
	return out, nil
}

// ReleaseOneOfTwo sends two messages to queue url, receives one and
// releases it (visibility 0), as a consumer that rejects it does: one
// message queued, one in flight until the next receive. For the tests of
// what -data keeps.
func (s *Stack) ReleaseOneOfTwo(ctx context.Context, url string) error {
	for _, b := range []string{"first", "second"} {
		if _, err := s.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			return err
		}
	}
	got, err := s.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1})
	if err != nil {
		return err
	}
	if len(got.Messages) != 1 {
		return fmt.Errorf("received %d messages, want 1", len(got.Messages))
	}
	_, err = s.Clients.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 0})
	return err
}
