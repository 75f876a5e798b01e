package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/latency"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// modelStore is the in-memory store with the latency model's wait on every
// call, as DynamoDB answers it: what the redrive service does under AWS's
// latencies, without the emulator's CPU (which, on a small machine, weighs
// more than the model's waits: docs/performance.md).
type modelStore struct {
	*memstore.Store
	w *latency.Waiter
}

func (s modelStore) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	s.w.Wait("dynamodb GetItem")
	return s.Store.Get(ctx, id)
}

func (s modelStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	s.w.Wait("dynamodb PutItem")
	return s.Store.Replace(ctx, prev, r)
}

func (s modelStore) GetMany(ctx context.Context, ids []string) (map[string]*quarantine.Record, error) {
	s.w.Wait("dynamodb BatchGetItem")
	return s.Store.GetMany(ctx, ids)
}

func (s modelStore) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	s.w.Wait("dynamodb Query")
	return s.Store.List(ctx, q)
}

func (s modelStore) Update(ctx context.Context, id string, fn func(cur *quarantine.Record) (*quarantine.Record, error)) (*quarantine.Record, error) {
	return quarantine.Update(ctx, s, id, fn)
}

// modelQueue is an SQS queue that takes every entry, after the model's
// wait per call, and counts the messages.
type modelQueue struct {
	w    *latency.Waiter
	sent atomic.Int64
	mu   sync.Mutex
	// order is each FIFO group's record ids in the order they were sent.
	order map[string][]string
}

func (q *modelQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.w.Wait("sqs SendMessageBatch")
	out := &sqs.SendMessageBatchOutput{}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range in.Entries {
		n := q.sent.Add(1)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(strconv.FormatInt(n, 10))})
		if g := aws.ToString(e.MessageGroupId); g != "" {
			q.order[g] = append(q.order[g], aws.ToString(e.MessageAttributes[quarantine.AttrRecordID].StringValue))
		}
	}
	return out, nil
}

func (q *modelQueue) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	q.w.Wait("sqs GetQueueUrl")
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/000000000000/" + aws.ToString(in.QueueName))}, nil
}

func (q *modelQueue) GetQueueAttributes(_ context.Context, _ *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q.w.Wait("sqs GetQueueAttributes")
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30"}}, nil
}

// modelledRun replays n records of a fresh source (FIFO in groups when
// groups > 0) with the redrive service on the model's store and queue,
// and returns the rate and the queue.
func modelledRun(b *testing.B, n, groups int) (float64, *modelQueue) {
	ctx := context.Background()
	name := fmt.Sprintf("model-%d", time.Now().UnixNano())
	if groups > 0 {
		name += ".fifo"
	}
	src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, DLQName: name + "-dlq", IdempotencyPointer: "/event_id", RedriveCap: 3}
	mem := memstore.New()
	clock := time.Now().Add(-time.Hour)
	q := ingest.NewQuarantiner(mem, nil, func() time.Time { return clock }, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{name: src}})
	for i := range n {
		clock = clock.Add(time.Millisecond)
		m := ingest.Message{MessageID: strconv.Itoa(i), Body: []byte(inventory(i)), SourceARN: src.ARN}
		if groups > 0 {
			m.MessageGroupID, m.SequenceNumber = fmt.Sprintf("g%03d", i%groups), strconv.Itoa(i)
		}
		if _, err := q.Quarantine(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	w := latency.AWS.Waiter(uint64(n + groups))
	store := modelStore{Store: mem, w: w}
	queue := &modelQueue{w: w, order: map[string][]string{}}
	svc := redrive.New(store, store, nil, queue, map[string]*quarantine.Source{name: src}, nil,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: n})
	start := time.Now()
	rep, err := svc.Run(ctx, redrive.Request{Source: name, RequestedBy: "bench", MaxMessages: n, BatchSize: 50, Approve: true})
	if err != nil || rep.Redriven.Count != n {
		b.Fatalf("redrive: %v, %d redriven of %d (deferred %d, remaining %d)", err, rep.Redriven.Count, n, rep.Deferred.Count, rep.Remaining)
	}
	return float64(n) / time.Since(start).Seconds(), queue
}

// BenchmarkRedriveAtModelledLatency replays 2,000 records with the redrive
// service against in-memory DynamoDB and SQS that answer after the latency
// model's wait (latency.AWS), on a standard queue (model-fake-msgs/s) and a
// FIFO queue with 100 message groups (model-fake-fifo-msgs/s; each group's
// order checked).
func BenchmarkRedriveAtModelledLatency(b *testing.B) {
	for i := 0; i < b.N; i++ {
		std, _ := modelledRun(b, modelledRedriveRecords, 0)
		fifo, queue := modelledRun(b, modelledRedriveRecords, 100)
		for g, ids := range queue.order {
			for k := 1; k < len(ids); k++ {
				if ids[k] < ids[k-1] {
					b.Fatalf("group %s sent out of order: %v", g, ids)
				}
			}
		}
		b.ReportMetric(std, "model-fake-msgs/s")
		b.ReportMetric(fifo, "model-fake-fifo-msgs/s")
	}
}
