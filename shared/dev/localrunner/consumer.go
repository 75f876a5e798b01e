package localrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ConsumerMode says what a local Consumer does with each delivery.
type ConsumerMode string

// The consumer modes; ConsumerOff is the default of `dlqlocal local`.
const (
	// ConsumerOff consumes nothing: the source queue fills up, as it
	// does when the user's service is down.
	ConsumerOff ConsumerMode = "off"
	// ConsumerFail rejects every delivery, releasing it at once, so each
	// message dead-letters after MaxReceiveCount receives, in seconds.
	ConsumerFail ConsumerMode = "fail"
	// ConsumerFlaky rejects a share (FlakyRate) of deliveries at random and
	// accepts (deletes) the others.
	ConsumerFlaky ConsumerMode = "flaky"
	// ConsumerValidate accepts the messages Accept passes and rejects the
	// others (the source's own validation gate, say).
	ConsumerValidate ConsumerMode = "validate"
)

// ConsumerModes lists the modes, for usage text and errors.
var ConsumerModes = []ConsumerMode{ConsumerOff, ConsumerFail, ConsumerFlaky, ConsumerValidate}

// ParseConsumerMode reads a mode name.
func ParseConsumerMode(s string) (ConsumerMode, error) {
	for _, m := range ConsumerModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("consumer mode %q: want one of off, fail, flaky, validate", s)
}

// ConsumerSQS is the part of the SQS client a Consumer uses.
type ConsumerSQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	// ListQueueTags reads ModeTag and TagQueue writes the mode in force
	// (only when ModeTag is set).
	ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, opts ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error)
	TagQueue(ctx context.Context, in *sqs.TagQueueInput, opts ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
}

// Consumer plays the user's service on a source queue, for a local run:
// without one nothing dead-letters. It deletes a message only when it
// accepts it; a rejected message is released at once (visibility 0), so
// SQS counts the receive and its redrive policy moves the message to the
// DLQ after maxReceiveCount receives, in seconds rather than
// maxReceiveCount × the queue's visibility timeout. It never logs a body.
type Consumer struct {
	SQS      ConsumerSQS
	QueueURL string
	Mode     ConsumerMode
	// ModeTag, when set, names a tag of the queue that changes the mode
	// while Run runs: its value, read at most every TagEvery, is the mode
	// from then on (`aws sqs tag-queue … --tags NAME=validate` ends a
	// failing consumer's outage). A value that is not a mode it can run
	// is logged and ignored; removing the tag keeps the current mode. At
	// the start Run sets the tag to Mode (a tag an earlier run left does
	// not override it). The consumer tags the queue ModeTag+"-mode" with
	// the mode in force, at the start and once a change has taken effect
	// (every delivery received after that is handled in that mode).
	ModeTag string
	// TagEvery is how often ModeTag is read (default 1 s).
	TagEvery time.Duration
	// FlakyRate is the share of deliveries ConsumerFlaky rejects, in [0, 1].
	FlakyRate float64
	// Accept decides for ConsumerValidate; reason, logged when it rejects,
	// must not quote the body.
	Accept func(body []byte) (ok bool, reason string)
	// Rand returns numbers in [0, 1) for ConsumerFlaky (math/rand/v2 when nil).
	Rand func() float64
	// Idle is the pause after an empty receive (default 200 ms).
	Idle time.Duration
	Log  *slog.Logger

	received, accepted, rejected atomic.Int64
	mode                         atomic.Value // ConsumerMode, while Run runs
}

// CurrentMode is the mode in force: Mode, or the last one ModeTag set.
func (c *Consumer) CurrentMode() ConsumerMode {
	if m, ok := c.mode.Load().(ConsumerMode); ok {
		return m
	}
	return c.Mode
}

// ConsumerStats counts a Consumer's deliveries so far.
type ConsumerStats struct {
	Received, Accepted, Rejected int64
}

// Stats returns the counts so far (safe while Run runs).
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{Received: c.received.Load(), Accepted: c.accepted.Load(), Rejected: c.rejected.Load()}
}

// Validate reports a configuration Run cannot work with.
func (c *Consumer) Validate() error {
	var errs []error
	if _, err := ParseConsumerMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if (c.Mode != ConsumerOff || c.ModeTag != "") && (c.SQS == nil || c.QueueURL == "") {
		errs = append(errs, errors.New("consumer: SQS client and queue URL are required"))
	}
	if !(c.FlakyRate >= 0 && c.FlakyRate <= 1) {
		errs = append(errs, fmt.Errorf("consumer: flaky rate %v is outside 0..1", c.FlakyRate))
	}
	if c.Mode == ConsumerValidate && c.Accept == nil {
		errs = append(errs, errors.New("consumer: validate mode needs Accept"))
	}
	return errors.Join(errs...)
}

// Run consumes until ctx is cancelled and then returns nil (at once for
// ConsumerOff without ModeTag). Receive errors are logged and retried; a failed delete or
// release leaves the message to come back after the visibility timeout,
// so no message is lost.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Mode == ConsumerOff && c.ModeTag == "" {
		return nil
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	idle := c.Idle
	if idle <= 0 {
		idle = 200 * time.Millisecond
	}
	tagEvery := c.TagEvery
	if tagEvery <= 0 {
		tagEvery = time.Second
	}
	c.mode.Store(c.Mode)
	if c.ModeTag != "" {
		// Mode wins over a tag an earlier run left (a queue kept with
		// -data keeps its tags): the start sets the tag to it.
		c.confirmMode(ctx, log, c.ModeTag)
	}
	var tagRead time.Time
	ignored := ""
	for ctx.Err() == nil {
		if c.ModeTag != "" && time.Since(tagRead) >= tagEvery {
			tagRead = time.Now()
			ignored = c.readModeTag(ctx, log, ignored)
		}
		if c.CurrentMode() == ConsumerOff {
			sleep(ctx, min(idle, tagEvery))
			continue
		}
		out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(c.QueueURL), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("consumer receive failed", "queue", c.QueueURL, "error", err.Error())
			sleep(ctx, time.Second)
			continue
		}
		if len(out.Messages) == 0 {
			sleep(ctx, idle)
			continue
		}
		for i, m := range out.Messages {
			if ctx.Err() != nil {
				// Stopping: give the rest back now rather than after the
				// visibility timeout.
				c.release(context.WithoutCancel(ctx), log, out.Messages[i:])
				break
			}
			c.handle(ctx, log, m)
		}
	}
	return nil
}

// handle decides and acts on one delivery; the decision is carried out
// even when ctx is cancelled meanwhile.
func (c *Consumer) handle(ctx context.Context, log *slog.Logger, m sqstypes.Message) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c.received.Add(1)
	ok, reason := c.decide(m)
	attrs := []any{"mode", string(c.CurrentMode()), "message_id", aws.ToString(m.MessageId), "receive_count", m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]}
	if !ok {
		c.rejected.Add(1)
		log.Info("consumer rejected", append(attrs, "reason", reason)...)
		c.release(ctx, log, []sqstypes.Message{m})
		return
	}
	if _, err := c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Warn("consumer delete failed; the message comes back after the visibility timeout", append(attrs, "error", err.Error())...)
		return
	}
	c.accepted.Add(1)
	log.Info("consumer accepted", attrs...)
}

// readModeTag sets the mode from ModeTag's value, if it names one the
// consumer can run; ignored is the value last refused (logged once), and
// the new one is returned.
func (c *Consumer) readModeTag(ctx context.Context, log *slog.Logger, ignored string) string {
	out, err := c.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(c.QueueURL)})
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("consumer could not read the queue's tags; the mode stays", "queue", c.QueueURL, "tag", c.ModeTag, "error", err.Error())
		}
		return ignored
	}
	v, ok := out.Tags[c.ModeTag]
	if !ok || ConsumerMode(v) == c.CurrentMode() {
		return ""
	}
	m, err := ParseConsumerMode(v)
	if err == nil && m == ConsumerValidate && c.Accept == nil {
		err = errors.New("validate mode needs Accept")
	}
	if err != nil {
		if v != ignored {
			log.Warn("consumer ignores the queue's mode tag", "tag", c.ModeTag, "error", err.Error(), "mode", string(c.CurrentMode()))
		}
		return v
	}
	c.mode.Store(m)
	log.Info("consumer mode changed by the queue's tag", "tag", c.ModeTag, "mode", string(m))
	c.confirmMode(ctx, log)
	return ""
}

// confirmMode tags the queue ModeTag+"-mode", and each of also, with the
// mode in force.
func (c *Consumer) confirmMode(ctx context.Context, log *slog.Logger, also ...string) {
	mode := string(c.CurrentMode())
	tags := map[string]string{c.ModeTag + "-mode": mode}
	for _, name := range also {
		tags[name] = mode
	}
	if _, err := c.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(c.QueueURL), Tags: tags}); err != nil && ctx.Err() == nil {
		log.Warn("consumer could not tag the queue with its mode", "queue", c.QueueURL, "tag", c.ModeTag+"-mode", "error", err.Error())
	}
}

func (c *Consumer) decide(m sqstypes.Message) (bool, string) {
	mode := c.CurrentMode()
	switch mode {
	case ConsumerFail:
		return false, "fail mode"
	case ConsumerFlaky:
		r := c.Rand
		if r == nil {
			r = rand.Float64
		}
		if r() < c.FlakyRate {
			return false, "flaky mode"
		}
		return true, ""
	case ConsumerValidate:
		return c.Accept([]byte(aws.ToString(m.Body)))
	}
	return false, "unknown mode"
}

// release makes messages visible again at once; SQS has counted their receive.
func (c *Consumer) release(ctx context.Context, log *slog.Logger, ms []sqstypes.Message) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, m := range ms {
		if _, err := c.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(c.QueueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			log.Warn("consumer release failed; the message comes back after the visibility timeout", "message_id", aws.ToString(m.MessageId), "error", err.Error())
		}
	}
}
