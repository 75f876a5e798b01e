package redrive_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

var stack *embedded.Stack

func TestMain(m *testing.M) { embedded.Main(m, embedded.Options{}, &stack) }

// env is one isolated source: its own queues (emulator state is global).
type env struct {
	src            *quarantine.Source
	srcURL, dlqURL string
	dlqARN         string
	store          *dynamostore.Store
	lister         *dynamostore.Lister
	payloads       *s3store.Store
	q              *ingest.Quarantiner
	clock          *clock.Fake
	// seen holds the source-queue messages a drain has counted: a message
	// is counted once however often it is received.
	seen map[string]bool
}

const cap3 = 3

func newEnv(t *testing.T, fifo bool) *env {
	t.Helper()
	ctx := context.Background()
	name := embedded.RandomName("rd")
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	attrs := map[string]string{}
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	dlq, err := stack.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq" + suffix), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:" + name + "-dlq" + suffix
	srcAttrs := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":2}`}
	if fifo {
		srcAttrs["FifoQueue"] = "true"
	}
	src, err := stack.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix), Attributes: srcAttrs})
	if err != nil {
		t.Fatal(err)
	}
	sch, version, err := schemas.Compile("inventory-movement.v1")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		src: &quarantine.Source{Name: name + suffix, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name + suffix, DLQName: name + "-dlq" + suffix,
			IdempotencyPointer: "/event_id", Schema: sch, SchemaVersion: version, RedriveCap: cap3},
		srcURL: aws.ToString(src.QueueUrl), dlqURL: aws.ToString(dlq.QueueUrl), dlqARN: dlqARN,
		store:    dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]),
		lister:   dynamostore.NewLister(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]),
		payloads: s3store.New(stack.Clients.S3, stack.Names["PayloadBucket"], ""),
		clock:    clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)),
		seen:     map[string]bool{},
	}
	e.q = ingest.NewQuarantiner(e.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{e.src.Name: e.src}})
	return e
}

func (e *env) service(sender redrive.Sender, store quarantine.Store, cfg redrive.Config) *redrive.Service {
	if sender == nil {
		sender = stack.Clients.SQS
	}
	if store == nil {
		store = e.store
	}
	if cfg.ApprovalThreshold == 0 {
		cfg.ApprovalThreshold = 10000
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 20 * time.Millisecond
	}
	return redrive.New(store, e.lister, e.payloads, sender, map[string]*quarantine.Source{e.src.Name: e.src}, e.clock.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), cfg).WithApprovals(memstore.NewApprovals())
}

func body(i int, good bool) string {
	lot := fmt.Sprintf("LOT-%04d", i)
	if !good {
		lot = "LOT-BAD-" + strconv.Itoa(i) // the consumer keeps failing these
	}
	return fmt.Sprintf(`{"event_id":"ev-%05d","ndc":"12345-678-90","lot":%q,"quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`, i, lot)
}

// seed quarantines n records as ingest would; every k-th one is "bad".
func (e *env) seed(t *testing.T, n int, bad func(i int) bool) []string {
	t.Helper()
	var ids []string
	for i := range n {
		m := ingest.Message{MessageID: fmt.Sprintf("dlq-%d", i), Body: []byte(body(i, !bad(i))), SourceARN: e.src.ARN, ReceiveCount: 2}
		if e.src.Name[len(e.src.Name)-5:] == ".fifo" {
			m.MessageGroupID = fmt.Sprintf("group-%d", i%3)
		}
		out, err := e.q.Quarantine(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		// Distinct first_seen values: kumo's status-index pagination loses
		// its place among equal sort keys (docs/emulators.md).
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(time.Second)
	if strings.HasSuffix(e.src.Name, ".fifo") {
		// Past the guard a FIFO run keeps for the eventually consistent index.
		e.clock.Advance(redrive.IndexSettleGuard)
	}
	return ids
}

// seeded is a standard source with n records quarantined, none "bad".
func seeded(t *testing.T, n int) (*env, []string) {
	t.Helper()
	e := newEnv(t, false)
	return e, e.seed(t, n, none)
}

// none says no record is "bad" (seed) or failed (drain).
func none[T any](T) bool { return false }

// received is one message the consumer saw.
type received struct {
	recordID, messageID, groupID, dedupID string
	count                                 string
}

// drain receives everything in the source queue. fail decides, per record
// id, whether the consumer fails it (back to the queue until the redrive
// policy dead-letters it); others are deleted.
func (e *env) drain(t *testing.T, fail func(recordID string) bool) []received {
	t.Helper()
	ctx := context.Background()
	var out []received
	receiveAll(t, e.srcURL, func(m sqstypes.Message) {
		rid := aws.ToString(m.MessageAttributes[quarantine.AttrRecordID].StringValue)
		if mid := aws.ToString(m.MessageId); !e.seen[mid] {
			e.seen[mid] = true
			if n := m.Attributes["ApproximateReceiveCount"]; n != "1" {
				// Received before by a receive whose answer was lost (the SDK
				// retried it): still one message sent, counted once here.
				t.Logf("message %s of record %s first seen at receive %s", mid, rid, n)
			}
			out = append(out, received{recordID: rid, messageID: aws.ToString(m.MessageId), groupID: m.Attributes["MessageGroupId"],
				dedupID: m.Attributes["MessageDeduplicationId"], count: aws.ToString(m.MessageAttributes[quarantine.AttrRedriveCount].StringValue)})
		}
		var err error
		if fail(rid) {
			err = e.failMessage(m)
		} else {
			_, err = stack.Clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.srcURL), ReceiptHandle: m.ReceiptHandle})
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	return out
}

// ingestDLQ quarantines whatever reached the DLQ, as the ingest function
// would, and deletes it.
func (e *env) ingestDLQ(t *testing.T) int {
	t.Helper()
	n := 0
	receiveAll(t, e.dlqURL, func(m sqstypes.Message) {
		attrs := map[string]quarantine.Attribute{}
		for k, v := range m.MessageAttributes {
			attrs[k] = quarantine.Attribute{DataType: aws.ToString(v.DataType), StringValue: aws.ToString(v.StringValue), BinaryValue: v.BinaryValue}
		}
		if _, err := e.q.Quarantine(context.Background(), ingest.Message{
			MessageID: aws.ToString(m.MessageId), Body: []byte(aws.ToString(m.Body)), Attributes: attrs, SourceARN: e.src.ARN, DLQARN: e.dlqARN, ReceiveCount: 1,
			MessageGroupID: m.Attributes["MessageGroupId"],
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := stack.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		n++
	})
	return n
}

// failMessage is the consumer failing m: it is visible again at once.
func (e *env) failMessage(m sqstypes.Message) error {
	_, err := stack.Clients.SQS.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(e.srcURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	return err
}

// receive makes one ReceiveMessage call on the source queue, with every
// message attribute.
func (e *env) receive(t *testing.T) []sqstypes.Message {
	t.Helper()
	res, err := stack.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.srcURL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Messages
}

// receiveAll receives every message of queue url, with all its attributes,
// and hands each to f, until three receives in a row come back empty and
// no message is in flight. A receive whose answer is lost (the SDK retries
// a call that timed out under load) leaves its messages invisible: the
// short visibility timeout of these receives brings them back, so a slow
// machine cannot make a sent message look never sent.
func receiveAll(t *testing.T, url string, f func(m sqstypes.Message)) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for idle := 0; ; {
		res, err := stack.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}, VisibilityTimeout: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) > 0 {
			idle = 0
			for _, m := range res.Messages {
				f(m)
			}
			continue
		}
		if idle++; idle < 3 {
			continue
		}
		if inFlight(t, url) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: messages still in flight after 2 minutes", url)
		}
		idle = 0
		time.Sleep(500 * time.Millisecond)
	}
}

// inFlight is the number of messages of queue url received and neither
// deleted nor visible again.
func inFlight(t *testing.T, url string) int {
	t.Helper()
	out, err := stack.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) get(t *testing.T, id string) *quarantine.Record {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// change writes step's successor of record id's stored version, as
// another actor would, and returns it.
func (e *env) change(t *testing.T, id string, step func(r *quarantine.Record) (*quarantine.Record, error)) *quarantine.Record {
	t.Helper()
	r := e.get(t, id)
	next, err := step(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(context.Background(), r, next); err != nil {
		t.Fatal(err)
	}
	return next
}

func (e *env) request(max int) redrive.Request {
	return redrive.Request{Source: e.src.Name, RequestedBy: "test@ops", MaxMessages: max}
}
