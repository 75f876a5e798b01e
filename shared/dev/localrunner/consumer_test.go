package localrunner_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// syncBuffer is a log sink safe for the consumer's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func depth(t *testing.T, st *embedded.Stack, id string) (visible, inFlight int) {
	t.Helper()
	out, err := st.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.QueueURLs[id]), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessages"], &visible)
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessagesNotVisible"], &inFlight)
	return visible, inFlight
}

func send(t *testing.T, st *embedded.Stack, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := st.Clients.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// drainDLQ receives (and deletes) everything on the DLQ.
func drainDLQ(t *testing.T, st *embedded.Stack) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := st.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs["DeadLetterQueue"]), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := st.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(st.QueueURLs["DeadLetterQueue"]), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// runUntil runs c until done says the queues have settled (or a minute has
// passed, a failure), then stops it and waits for Run to return.
func runUntil(t *testing.T, c *localrunner.Consumer, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			cancel()
			<-errc
			t.Fatalf("queues did not settle; consumer stats %+v", c.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func newConsumer(st *embedded.Stack, mode localrunner.ConsumerMode, log *syncBuffer) *localrunner.Consumer {
	return &localrunner.Consumer{SQS: st.Clients.SQS, QueueURL: st.QueueURLs["SourceQueue"], Mode: mode, Idle: 20 * time.Millisecond,
		Log: slog.New(slog.NewJSONHandler(log, nil))}
}

// fail: a message is received exactly maxReceiveCount times, released at
// once each time, and then sits in the DLQ with its body intact.
func TestConsumerFailDeadLettersAfterMaxReceiveCount(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 3}})
	body := `{"event_id":"secret-value-1"}`
	send(t, st, body)
	var log syncBuffer
	c := newConsumer(st, localrunner.ConsumerFail, &log)
	runUntil(t, c, func() bool { v, _ := depth(t, st, "DeadLetterQueue"); return v == 1 })
	if s := c.Stats(); s.Received != 3 || s.Rejected != 3 || s.Accepted != 0 {
		t.Fatalf("stats %+v, want 3 receives, all rejected", s)
	}
	if v, f := depth(t, st, "SourceQueue"); v != 0 || f != 0 {
		t.Fatalf("source queue holds %d visible, %d in flight", v, f)
	}
	if got := drainDLQ(t, st); !slices.Equal(got, []string{body}) {
		t.Fatalf("DLQ holds %q", got)
	}
	if strings.Contains(log.String(), "secret-value") {
		t.Fatalf("the consumer logged a payload value:\n%s", log.String())
	}
	if !strings.Contains(log.String(), `"consumer rejected"`) {
		t.Fatalf("no rejection logged:\n%s", log.String())
	}
}

// flaky: every message ends either accepted (deleted) or in the DLQ; none
// is lost, none is left on the source queue or in flight.
func TestConsumerFlakyLosesNothing(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 2}})
	var sent []string
	for i := range 40 {
		sent = append(sent, fmt.Sprintf(`{"event_id":"e%02d"}`, i))
	}
	send(t, st, sent...)
	var log syncBuffer
	c := newConsumer(st, localrunner.ConsumerFlaky, &log)
	c.FlakyRate = 0.5
	c.Rand = rand.New(rand.NewPCG(1, 2)).Float64
	dlq := 0
	runUntil(t, c, func() bool {
		v, f := depth(t, st, "SourceQueue")
		dlq, _ = depth(t, st, "DeadLetterQueue")
		return v == 0 && f == 0 && int(c.Stats().Accepted)+dlq == len(sent)
	})
	s := c.Stats()
	if s.Accepted == 0 || dlq == 0 || s.Received != s.Accepted+s.Rejected {
		t.Fatalf("stats %+v, DLQ %d: want some of each", s, dlq)
	}
	got := drainDLQ(t, st)
	if len(got) != dlq {
		t.Fatalf("DLQ said %d, held %d", dlq, len(got))
	}
	seen := map[string]bool{}
	for _, b := range got {
		if seen[b] || !slices.Contains(sent, b) {
			t.Fatalf("DLQ body %q: duplicate or never sent", b)
		}
		seen[b] = true
	}
}

// validate: what Accept passes is deleted, the rest dead-letters.
func TestConsumerValidateDeadLettersWhatFails(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 2}})
	send(t, st, "good-1", "bad-1", "good-2")
	var log syncBuffer
	c := newConsumer(st, localrunner.ConsumerValidate, &log)
	c.Accept = func(b []byte) (bool, string) { return bytes.HasPrefix(b, []byte("good")), "not good" }
	runUntil(t, c, func() bool {
		v, f := depth(t, st, "SourceQueue")
		d, _ := depth(t, st, "DeadLetterQueue")
		return v == 0 && f == 0 && d == 1
	})
	if s := c.Stats(); s.Accepted != 2 || s.Rejected != 2 {
		t.Fatalf("stats %+v", s)
	}
	if got := drainDLQ(t, st); !slices.Equal(got, []string{"bad-1"}) {
		t.Fatalf("DLQ holds %q", got)
	}
	if !strings.Contains(log.String(), `"reason":"not good"`) {
		t.Fatalf("reason not logged:\n%s", log.String())
	}
}

// off: Run returns at once and the message stays on the source queue.
func TestConsumerOffConsumesNothing(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	send(t, st, "x")
	c := newConsumer(st, localrunner.ConsumerOff, &syncBuffer{})
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, f := depth(t, st, "SourceQueue"); v != 1 || f != 0 || c.Stats() != (localrunner.ConsumerStats{}) {
		t.Fatalf("source %d visible, %d in flight, stats %+v", v, f, c.Stats())
	}
}

// ModeTag: the queue's tag changes the mode while Run runs. A consumer
// started off takes nothing until the tag says fail, then dead-letters; a
// tag that names no mode is logged once and ignored; validate then takes
// what Accept passes (the outage is over).
func TestConsumerModeTagChangesTheMode(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 2}})
	var log syncBuffer
	c := newConsumer(st, localrunner.ConsumerOff, &log)
	c.ModeTag, c.TagEvery = "dlqlocal-consumer", 20*time.Millisecond
	reads := &countedTagReads{ConsumerSQS: c.SQS}
	c.SQS = reads
	c.Accept = func(b []byte) (bool, string) { return bytes.HasPrefix(b, []byte("good")), "not good" }
	tag := func(v string) {
		t.Helper()
		if _, err := st.Clients.SQS.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), Tags: map[string]string{c.ModeTag: v}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within a minute; mode %s, stats %+v\n%s", what, c.CurrentMode(), c.Stats(), log.String())
			}
		}
	}
	// A tag an earlier run left (a queue kept with -data) does not
	// override the mode Run starts with.
	tag("validate")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()

	send(t, st, "good-0")
	// Two tag reads done: the first one's answer has been acted on (the
	// loop reads one at a time), and the mode is still off.
	waitFor("two reads of the mode tag", func() bool { return reads.n.Load() >= 2 })
	if m := c.CurrentMode(); m != localrunner.ConsumerOff {
		t.Fatalf("the tag an earlier run left set the mode to %s, want off", m)
	}
	if v, f := depth(t, st, "SourceQueue"); v != 1 || f != 0 || c.Stats().Received != 0 {
		t.Fatalf("off: source %d visible, %d in flight, stats %+v", v, f, c.Stats())
	}
	confirmed := func(mode string) func() bool {
		return func() bool {
			out, err := st.Clients.SQS.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"])})
			return err == nil && out.Tags["dlqlocal-consumer-mode"] == mode
		}
	}
	waitFor("the mode off confirmed at the start", confirmed("off"))
	tag("fail")
	waitFor("dead-lettered message", func() bool { d, _ := depth(t, st, "DeadLetterQueue"); return d == 1 })
	if c.CurrentMode() != localrunner.ConsumerFail || c.Stats().Accepted != 0 {
		t.Fatalf("mode %s, stats %+v", c.CurrentMode(), c.Stats())
	}
	tag("sometimes")
	waitFor("refusal of the tag", func() bool { return strings.Contains(log.String(), "consumer ignores the queue's mode tag") })
	if c.CurrentMode() != localrunner.ConsumerFail {
		t.Fatalf("a bad tag changed the mode to %s", c.CurrentMode())
	}
	tag("validate")
	// The consumer confirms the mode in force with a tag of its own: once
	// it says validate, every delivery is handled in that mode.
	waitFor("the consumer's confirmation", confirmed("validate"))
	if c.CurrentMode() != localrunner.ConsumerValidate {
		t.Fatalf("the tag confirms validate, the mode is %s", c.CurrentMode())
	}
	send(t, st, "good-1")
	waitFor("accepted message", func() bool { return c.Stats().Accepted == 1 })
	if d, _ := depth(t, st, "DeadLetterQueue"); d != 1 {
		t.Fatalf("DLQ holds %d, want only the one sent while failing", d)
	}
	if n := strings.Count(log.String(), "consumer ignores the queue's mode tag"); n != 1 {
		t.Fatalf("the bad tag was logged %d times, want once:\n%s", n, log.String())
	}
}

// countedTagReads counts the consumer's ListQueueTags calls answered.
type countedTagReads struct {
	localrunner.ConsumerSQS
	n atomic.Int32
}

func (c *countedTagReads) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, opts ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	out, err := c.ConsumerSQS.ListQueueTags(ctx, in, opts...)
	if err == nil {
		c.n.Add(1)
	}
	return out, err
}

func TestConsumerRefusesBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		c    *localrunner.Consumer
		want string
	}{
		{&localrunner.Consumer{Mode: "sometimes", QueueURL: "q"}, `consumer mode "sometimes": want one of off, fail, flaky, validate`},
		{&localrunner.Consumer{Mode: localrunner.ConsumerFlaky, QueueURL: "q", FlakyRate: 1.5}, "flaky rate 1.5 is outside 0..1"},
		{&localrunner.Consumer{Mode: localrunner.ConsumerValidate, QueueURL: "q"}, "validate mode needs Accept"},
		{&localrunner.Consumer{Mode: localrunner.ConsumerFail}, "SQS client and queue URL are required"},
	} {
		err := tc.c.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.c.Mode, err, tc.want)
		}
	}
	if m, err := localrunner.ParseConsumerMode("flaky"); err != nil || m != localrunner.ConsumerFlaky {
		t.Fatalf("ParseConsumerMode(flaky) = %q, %v", m, err)
	}
}
