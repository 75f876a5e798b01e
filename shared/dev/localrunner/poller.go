// Package localrunner feeds the functions the way Lambda does, for the demo,
// `make local` and the tests: an SQS event-source loop (batch size, batching
// window, partial batch failures, visibility timeouts honoured) configured
// from the template's event source mappings.
package localrunner

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// SQSAPI is the part of the SQS client the poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// SQSHandler is a Lambda SQS handler with partial batch responses.
type SQSHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Mapping is an SQS event source mapping.
type Mapping struct {
	QueueURL string
	QueueARN string
	Region   string
	// BatchSize is the most messages per invocation (1..10).
	BatchSize int
	// Window is how long to gather a batch before invoking.
	Window time.Duration
	// ReportBatchItemFailures enables partial batch responses.
	ReportBatchItemFailures bool
	// Concurrency is the most invocations at once.
	Concurrency int
}

// MappingFromTemplate reads the AWS::Lambda::EventSourceMapping with the given
// logical id, so the runner cannot drift from the template.
func MappingFromTemplate(t *cloudformation.Template, logicalID, queueURL, queueARN, region string) (Mapping, error) {
	m, err := t.GetLambdaEventSourceMappingWithName(logicalID)
	if err != nil {
		return Mapping{}, err
	}
	if aws.ToString(m.EventSourceArn) != queueARN {
		return Mapping{}, fmt.Errorf("mapping %s reads %s, not %s", logicalID, aws.ToString(m.EventSourceArn), queueARN)
	}
	out := Mapping{QueueURL: queueURL, QueueARN: queueARN, Region: region, BatchSize: 10, Concurrency: 2}
	if m.BatchSize != nil {
		out.BatchSize = *m.BatchSize
	}
	if m.MaximumBatchingWindowInSeconds != nil {
		out.Window = time.Duration(*m.MaximumBatchingWindowInSeconds) * time.Second
	}
	for _, t := range m.FunctionResponseTypes {
		out.ReportBatchItemFailures = out.ReportBatchItemFailures || t == "ReportBatchItemFailures"
	}
	if m.ScalingConfig != nil && m.ScalingConfig.MaximumConcurrency != nil {
		out.Concurrency = *m.ScalingConfig.MaximumConcurrency
	}
	return out, nil
}

// IngestMappings reads every SQS event source mapping of the template
// whose condition holds (the stack's DLQ's, IngestDLQMapping, first; then
// the attached DLQ's, IngestExtraDLQMapping), each with the URL of the
// stack's queue it reads (the template's or an existing one).
func IngestMappings(st *embedded.Stack) ([]Mapping, error) {
	t := st.Template
	ids := []string{}
	for id, m := range t.GetAllLambdaEventSourceMappingResources() {
		if c := m.AWSCloudFormationCondition; c != "" {
			if v, ok := t.Conditions[c].(bool); !ok || !v {
				continue
			}
		}
		if strings.HasPrefix(aws.ToString(m.EventSourceArn), "arn:aws:sqs:") {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(boolInt(b == ingestMapping)-boolInt(a == ingestMapping), strings.Compare(a, b))
	})
	out := make([]Mapping, 0, len(ids))
	for _, id := range ids {
		arn := aws.ToString(t.GetAllLambdaEventSourceMappingResources()[id].EventSourceArn)
		url, ok := st.QueueURLByARN(arn)
		if !ok {
			return nil, fmt.Errorf("mapping %s reads %s, which is not one of the stack's queues", id, arn)
		}
		m, err := MappingFromTemplate(t, id, url, arn, st.AWS.Region)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(out) == 0 || out[0].QueueARN != st.QueueARNs["DeadLetterQueue"] {
		return nil, fmt.Errorf("the template has no %s reading the stack's DLQ", ingestMapping)
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Stats counts what a poller did.
type Stats struct {
	Invocations int
	Received    int
	Deleted     int
	Failed      int
}

// Poller runs one event source mapping.
type Poller struct {
	SQS     SQSAPI
	Mapping Mapping
	Handler SQSHandler
	Log     *slog.Logger
	// PollWait is the long-poll wait of each receive (default 0: short
	// polls, because emulators do not wake long polls on visibility expiry).
	PollWait time.Duration

	mu    sync.Mutex
	stats Stats
}

// batchGrace bounds the invocation and the deletes of a batch gathered
// before a stop.
const batchGrace = 2 * time.Minute

// Stats returns the counts so far.
func (p *Poller) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// MaxLocalPollers bounds the pollers of one mapping on this machine. On
// AWS a mapping scales its pollers up to its MaximumConcurrency (the
// template's default is 400, for a storm); locally each function is one
// process that serves one invoke at a time, so more pollers than a few
// only hold messages invisible and memory busy.
const MaxLocalPollers = 4

// Run polls until ctx is done, with Mapping.Concurrency pollers, at most
// MaxLocalPollers.
func (p *Poller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range min(max(p.Mapping.Concurrency, 1), MaxLocalPollers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n, err := p.PollOnce(ctx)
				if err != nil && ctx.Err() == nil && p.Log != nil {
					p.Log.Warn("poll failed", "queue", p.Mapping.QueueARN, "error", err.Error())
				}
				if n == 0 || err != nil {
					sleep(ctx, 20*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// PollOnce gathers one batch (up to BatchSize messages or until the
// window closes), invokes the handler, and deletes what the handler stored:
// every message on success, all but the reported failures with partial
// batch responses, none when the handler errs or names an unknown id. It
// returns the number of messages received.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	batch, err := p.gather(ctx)
	if err != nil || len(batch) == 0 {
		return len(batch), err
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(batch))}
	for i, m := range batch {
		ev.Records[i] = toEvent(m, p.Mapping)
	}
	// A batch gathered is seen through, stop or not: the invocation runs to
	// its end and what it stored is deleted, as Lambda's mapping does; a
	// stop only ends the gathering. Bounded, so that a stop cannot hang.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchGrace)
	defer cancel()
	resp, herr := p.Handler(ctx, ev)
	keep := map[string]bool{}
	switch {
	case herr != nil:
		for _, m := range batch {
			keep[aws.ToString(m.MessageId)] = true
		}
	case p.Mapping.ReportBatchItemFailures:
		ids := map[string]bool{}
		for _, m := range batch {
			ids[aws.ToString(m.MessageId)] = true
		}
		for _, f := range resp.BatchItemFailures {
			if !ids[f.ItemIdentifier] {
				// Lambda treats an unknown or empty id as a failed batch.
				for id := range ids {
					keep[id] = true
				}
				break
			}
			keep[f.ItemIdentifier] = true
		}
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range batch {
		if !keep[aws.ToString(m.MessageId)] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	deleted := 0
	if len(entries) > 0 {
		out, err := p.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.Mapping.QueueURL), Entries: entries})
		if err != nil {
			return len(batch), fmt.Errorf("delete batch: %w", err)
		}
		deleted = len(out.Successful)
	}
	p.mu.Lock()
	p.stats.Invocations++
	p.stats.Received += len(batch)
	p.stats.Deleted += deleted
	p.stats.Failed += len(batch) - len(entries)
	p.mu.Unlock()
	if herr != nil {
		return len(batch), fmt.Errorf("handler: %w", herr)
	}
	return len(batch), nil
}

func (p *Poller) gather(ctx context.Context) ([]sqstypes.Message, error) {
	size := min(max(p.Mapping.BatchSize, 1), 10)
	deadline := time.Now().Add(p.Mapping.Window)
	var batch []sqstypes.Message
	for len(batch) < size {
		out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.Mapping.QueueURL),
			MaxNumberOfMessages:         int32(size - len(batch)),
			WaitTimeSeconds:             int32(p.PollWait / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return batch, nil
			}
			return batch, fmt.Errorf("receive: %w", err)
		}
		batch = append(batch, out.Messages...)
		if len(out.Messages) == 0 || !time.Now().Before(deadline) {
			return batch, nil
		}
	}
	return batch, nil
}

// toEvent builds the aws-lambda-go event record Lambda would deliver.
func toEvent(m sqstypes.Message, mp Mapping) events.SQSMessage {
	body := aws.ToString(m.Body)
	sum := md5.Sum([]byte(body))
	ev := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: body,
		Md5OfBody: hex.EncodeToString(sum[:]), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: mp.QueueARN, AWSRegion: mp.Region,
	}
	if len(m.MessageAttributes) > 0 {
		ev.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			ev.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType),
			}
		}
	}
	return ev
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
