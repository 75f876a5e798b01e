package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// deadLetter sends gen to the source queue, runs the consumer through the
// outage until the redrive policy has dead-lettered what it rejects, and
// waits until ingest has taken everything off the DLQ.
func deadLetter(ctx context.Context, st *embedded.Stack, gen []Generated) (*consumer, error) {
	if err := produce(ctx, st, gen); err != nil {
		return nil, err
	}
	c := newConsumer(st)
	c.outage.Store(true)
	for _, g := range gen {
		c.byBody[g.Body] = g
		if g.Kind != Good {
			c.deadLettered++
		}
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return c, waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"])
}

func produce(ctx context.Context, st *embedded.Stack, gen []Generated) error {
	url := st.QueueURLs["SourceQueue"]
	for i := 0; i < len(gen); i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, g := range gen[i:min(i+10, len(gen))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(g.Body)})
		}
		out, err := st.Clients.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("produce: %d entries failed", len(out.Failed))
		}
	}
	return nil
}

// consumer is the source queue's consumer: the user's service, simulated.
type consumer struct {
	st                 *embedded.Stack
	byBody             map[string]Generated
	consumed, recalled atomic.Int64
	// replayConsumed and replayFailed count the replays (messages redrive
	// sent, carrying the record-id attribute) consumed and dead-lettered
	// again; consumed and recalled count them too.
	replayConsumed, replayFailed atomic.Int64
	outage                       atomic.Bool
	deadLettered                 int // events the scenario makes fail
	mu                           sync.Mutex
	seen                         map[string]map[string]bool // event id → message ids consumed
	// recalledIDs are the message ids dead-lettered on purpose: a
	// redelivery of one (its delete came too late) is not sent again.
	recalledIDs map[string]bool
	// sends maps a replay, by record id and round (the attributes redrive
	// sets), to the message ids that carried it and when SQS says each was
	// sent: more than one is a duplicate send.
	sends map[replay]map[string]string
}

type replay struct {
	id    string
	round string
}

// consumedCount is how many distinct messages of event id were consumed.
func (c *consumer) consumedCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen[id])
}

// note records a replay's message id under its record and round, and
// reports whether m is a replay.
func (c *consumer) note(m sqstypes.Message) bool {
	id, round := m.MessageAttributes[quarantine.AttrRecordID], m.MessageAttributes[quarantine.AttrRedriveCount]
	if id.StringValue == nil || round.StringValue == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := replay{aws.ToString(id.StringValue), aws.ToString(round.StringValue)}
	if c.sends[k] == nil {
		c.sends[k] = map[string]string{}
	}
	c.sends[k][aws.ToString(m.MessageId)] = sentAt(m)
	return true
}

// sentAt is m's SentTimestamp (epoch milliseconds) as a UTC time, or "?".
func sentAt(m sqstypes.Message) string {
	ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil {
		return "?"
	}
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

func newConsumer(st *embedded.Stack) *consumer {
	return &consumer{st: st, byBody: map[string]Generated{}, seen: map[string]map[string]bool{}, recalledIDs: map[string]bool{}, sends: map[replay]map[string]string{}}
}

func (c *consumer) run(ctx context.Context) error {
	url := c.st.QueueURLs["SourceQueue"]
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				out, err := c.st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
					MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
				if err != nil {
					errs <- fmt.Errorf("consume: %w", err)
					return
				}
				if len(out.Messages) == 0 {
					empty, err := isEmpty(ctx, c.st.Clients.SQS, url)
					if err != nil {
						errs <- err
						return
					}
					if empty {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				for _, m := range out.Messages {
					if err := c.handle(ctx, url, m); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (c *consumer) handle(ctx context.Context, url string, m sqstypes.Message) error {
	g := c.byBody[aws.ToString(m.Body)]
	isReplay := c.note(m)
	sqsc := c.st.Clients.SQS
	mid := aws.ToString(m.MessageId)
	kind := g.Kind
	if kind == Outage && !c.outage.Load() {
		kind = Good
	}
	switch kind {
	case Malformed, Outage:
		// Fail: give the message back at once; SQS counts the receive and
		// the redrive policy dead-letters it after MaxReceiveCount.
		_, err := sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		return redelivered(err)
	case Recalled:
		// Dead-letter on purpose, saying why, then acknowledge. A
		// redelivery of a message already dead-lettered (its delete came
		// after its visibility ran out) is only acknowledged.
		// The id is claimed before the send, so that two deliveries handled
		// at once send it once; a failed send gives the claim back.
		c.mu.Lock()
		again := c.recalledIDs[mid]
		c.recalledIDs[mid] = true
		c.mu.Unlock()
		if !again {
			_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{
				QueueUrl: aws.String(c.st.QueueURLs["DeadLetterQueue"]), MessageBody: m.Body,
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{
					quarantine.AttrFailureReason: {DataType: aws.String("String"), StringValue: aws.String("lot under recall")},
					quarantine.AttrFailureStage:  {DataType: aws.String("String"), StringValue: aws.String("allocation")},
					quarantine.AttrFailureType:   {DataType: aws.String("String"), StringValue: aws.String("permanent")},
					// The DLQ is shared (embedded.WithLocalSources): a
					// message sent to it names no source unless the
					// consumer says which.
					quarantine.AttrFailureSource: {DataType: aws.String("String"), StringValue: aws.String(c.st.Names["SourceQueue"])},
				},
			})
			if err != nil {
				c.mu.Lock()
				delete(c.recalledIDs, mid)
				c.mu.Unlock()
				return err
			}
			c.recalled.Add(1)
			if isReplay {
				c.replayFailed.Add(1)
			}
		}
	default:
		// Counted once per message, however often SQS delivers it.
		c.mu.Lock()
		if c.seen[g.ID] == nil {
			c.seen[g.ID] = map[string]bool{}
		}
		first := !c.seen[g.ID][mid]
		c.seen[g.ID][mid] = true
		c.mu.Unlock()
		if first {
			c.consumed.Add(1)
			if isReplay {
				c.replayConsumed.Add(1)
			}
		}
	}
	_, err := sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	return redelivered(err)
}

// redelivered forgives a receipt handle refused because the message's
// visibility ran out before the consumer answered (a slow machine): SQS
// delivers the message again and handle takes it as the same message, as an
// at-least-once consumer must. Any other error stands.
func redelivered(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ReceiptHandleIsInvalid" {
		return nil
	}
	return err
}

func isEmpty(ctx context.Context, api *sqs.Client, url string) (bool, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return false, fmt.Errorf("queue depth: %w", err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0", nil
}

func waitEmpty(ctx context.Context, api *sqs.Client, url string) error {
	for {
		empty, err := isEmpty(ctx, api, url)
		if err != nil || empty {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to drain: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
