package dlqctl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// A replay to another queue, end to end on the embedded stack: a second
// source queue with its own DLQ is registered beside the template's (a
// redeploy with it in SOURCES); operator-a asks to replay a record of the
// template's source into it, operator-b approves, the plan runs; the
// target's consumer fails the message, SQS moves it to the target's DLQ,
// and ingest appends it to the same record. dlqctl approvals show names
// the target, and dlqctl verify is clean afterwards.
func TestRedriveToAnotherQueueEndToEnd(t *testing.T) {
	l, keys := writerLedger(t)
	ctx := context.Background()
	source := l.fns.Source
	src := l.fns.IngestConfig.Sources[source]
	opA, opB := operators(t)

	// The target: a queue of the source's kind whose consumer fails a
	// message once before SQS moves it to its DLQ (kumo state is global:
	// unique names).
	run := fmt.Sprint(time.Now().UnixNano())
	suffix, attrs := "", map[string]string{}
	if sources.FIFO(source) {
		suffix, attrs["FifoQueue"] = ".fifo", "true"
	}
	target, targetDLQ := "rt-"+run+suffix, "rt-"+run+"-dlq"+suffix
	sqsc := l.st.Clients.SQS
	dlq, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(targetDLQ), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:" + targetDLQ
	tattrs := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":1}`}
	for k, v := range attrs {
		tattrs[k] = v
	}
	tq, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(target), Attributes: tattrs})
	if err != nil {
		t.Fatal(err)
	}
	targetARN := "arn:aws:sqs:us-east-1:000000000000:" + target
	if err := l.fns.AddSource(l.st, target, sources.Config{ARN: targetARN, DLQ: targetDLQ, IdempotencyPointer: src.IdempotencyPointer, Schema: src.Schema}, dlqARN); err != nil {
		t.Fatal(err)
	}

	// A record of the template's source, as ingest writes it.
	key := "rt-" + run
	id := quarantine.RecordID(source, key)
	body := `{"event_id":"` + key + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + key, EventSource: "aws:sqs", EventSourceARN: l.st.QueueARNs["DeadLetterQueue"], Body: body,
		Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": src.ARN, "MessageGroupId": "g1"}}}}
	if resp, err := l.fns.Ingest.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest: %v %v", err, resp.BatchItemFailures)
	}

	// operator-a asks; the request waits for a second person; operator-b
	// approves, and the plan runs as operator-a.
	aprID := "apr-rt-" + run
	asked := operatorCall(t, l.fns.Redrive, opA, fmt.Sprintf(`{"action":"redrive","source":%q,"ids":[%q],"target":%q,"reason":"replacement consumer","approval_id":%q}`,
		source, id, target, aprID))
	if asked["stopped"] != redrive.StoppedPendingApproval {
		t.Fatalf("the request did not wait for a second person: %v", asked)
	}
	out, errOut, code := l.run(false, "approvals", "show", aprID, "--source", source)
	if code != 0 || !strings.Contains(out, "target     "+target+": the records are replayed into this queue") || !strings.Contains(out, "retarget") {
		t.Fatalf("approvals show (exit %d): %s%s", code, out, errOut)
	}
	ran := operatorCall(t, l.fns.Redrive, opB, fmt.Sprintf(`{"action":"approve","source":%q,"approval_id":%q,"reason":"ok"}`, source, aprID))
	rec, err := l.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	claim, send := rec.Attempts[len(rec.Attempts)-2], rec.Attempts[len(rec.Attempts)-1]
	if rec.Status != quarantine.StatusRedriven || claim.Target != target || claim.Approval != aprID || send.Target != target || send.MessageID == "" {
		t.Fatalf("after the approved run (%v): %s, claim %+v, send %+v", ran, rec.Status, claim, send)
	}

	// The target's consumer fails it; SQS moves it to the target's DLQ.
	recv := func(url string) []sqstypes.Message {
		t.Helper()
		res, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages
	}
	got := recv(aws.ToString(tq.QueueUrl))
	if len(got) != 1 || aws.ToString(got[0].Body) != body {
		t.Fatalf("the target queue holds %d messages", len(got))
	}
	if _, err := sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: tq.QueueUrl, ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	if again := recv(aws.ToString(tq.QueueUrl)); len(again) != 0 {
		t.Fatalf("past maxReceiveCount the message is still in the target queue (%d)", len(again))
	}
	dead := recv(aws.ToString(dlq.QueueUrl))
	if len(dead) != 1 {
		t.Fatalf("the target's DLQ holds %d messages", len(dead))
	}
	// As Lambda delivers it: kumo sets no DeadLetterQueueSourceArn (and a
	// FIFO DLQ loses the group id), so the test sets what SQS would.
	m := dead[0]
	back := events.SQSMessage{MessageId: aws.ToString(m.MessageId), EventSource: "aws:sqs", EventSourceARN: dlqARN, Body: aws.ToString(m.Body),
		Attributes:        map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": m.Attributes["SentTimestamp"], "DeadLetterQueueSourceArn": targetARN, "MessageGroupId": "g1"},
		MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for k, v := range m.MessageAttributes {
		back.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	if resp, err := l.fns.Ingest.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{back}}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest of the comeback: %v %v", err, resp.BatchItemFailures)
	}
	rec, err = l.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	last := rec.Attempts[len(rec.Attempts)-1]
	if rec.Status != quarantine.StatusQuarantined || !last.IsArrival() || !strings.Contains(last.Note, "came back from "+target) {
		t.Fatalf("the comeback did not reach its record: %s %+v", rec.Status, last)
	}
	if _, err := l.store.Get(ctx, quarantine.RecordID(target, key)); err == nil {
		t.Fatal("the comeback opened a record under the target's name")
	}

	l.drain()
	l.digest()
	out, errOut, code = l.run(false, "verify", "--writer-keys", strings.Join(keys, ","))
	if code != 0 || strings.Contains(out, "unapproved") || strings.Contains(out, "without an approval") {
		t.Fatalf("verify after the replay to another queue (exit %d): %s%s", code, out, errOut)
	}
}
