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
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
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

// ListQueueTags: the model's queue carries no tags (its source is not
// granted by tag).
func (q *modelQueue) ListQueueTags(_ context.Context, _ *sqs.ListQueueTagsInput, _ ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	q.w.Wait("sqs ListQueueTags")
	return &sqs.ListQueueTagsOutput{}, nil
}

// modelledSource is a fresh source (FIFO in groups when groups > 0) with
// n records quarantined in memory.
func modelledSource(b *testing.B, n, groups int) (*quarantine.Source, *memstore.Store) {
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
	return src, mem
}

// modelledRun replays n records of a fresh source (FIFO in groups when
// groups > 0) with the redrive service on the model's store and queue,
// and returns the rate and the queue.
func modelledRun(b *testing.B, n, groups int) (float64, *modelQueue) {
	ctx := context.Background()
	src, mem := modelledSource(b, n, groups)
	w := latency.AWS.Waiter(uint64(n + groups))
	store := modelStore{Store: mem, w: w}
	queue := &modelQueue{w: w, order: map[string][]string{}}
	svc := redrive.New(store, store, nil, queue, map[string]*quarantine.Source{src.Name: src}, nil,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: n})
	start := time.Now()
	rep, err := svc.Run(ctx, redrive.Request{Source: src.Name, RequestedBy: "bench", MaxMessages: n, BatchSize: 50, Approve: true})
	if err != nil || rep.Redriven.Count != n {
		b.Fatalf("redrive: %v, %d redriven of %d (deferred %d, remaining %d)", err, rep.Redriven.Count, n, rep.Deferred.Count, rep.Remaining)
	}
	return float64(n) / time.Since(start).Seconds(), queue
}

// modelledRaw is the raw loop of the calls a replay of n records of a
// standard queue needs, on the same model's store and queue: per batch of
// 50, the claims (a conditional write each), the SendMessageBatch calls of
// 10, then the marks, each step redrive.Concurrency at a time, batch after
// batch. The versions written are made before the clock starts: only the
// calls are timed. It returns the rate.
func modelledRaw(b *testing.B, n int) float64 {
	ctx := context.Background()
	src, mem := modelledSource(b, n, 0)
	ids, err := quarantine.ListIDs(ctx, mem, quarantine.ListQuery{Source: src.Name, Status: quarantine.StatusQuarantined, Limit: 1000})
	if err != nil || len(ids) != n {
		b.Fatalf("%d records listed of %d: %v", len(ids), n, err)
	}
	type step struct{ prev, claimed, marked *quarantine.Record }
	steps := make([]step, n)
	now := time.Now()
	for i, id := range ids {
		r, err := mem.Get(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		c, err := r.Claim("bench", now, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		m, err := c.MarkRedriven("bench", "m-"+strconv.Itoa(i), now)
		if err != nil {
			b.Fatal(err)
		}
		steps[i] = step{r, c, m}
	}
	w := latency.AWS.Waiter(uint64(n) + 7)
	store := modelStore{Store: mem, w: w}
	queue := &modelQueue{w: w, order: map[string][]string{}}
	url := aws.String("https://sqs.us-east-1.amazonaws.com/000000000000/" + src.Name)
	must := func(errs []error) {
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	start := time.Now()
	for from := 0; from < n; from += 50 {
		batch := steps[from:min(from+50, n)]
		must(fanout.Run(ctx, len(batch), redrive.Concurrency, func(ctx context.Context, i int) error {
			return store.Replace(ctx, batch[i].prev, batch[i].claimed)
		}))
		calls := (len(batch) + 9) / 10
		must(fanout.Run(ctx, calls, redrive.Concurrency, func(ctx context.Context, c int) error {
			in := &sqs.SendMessageBatchInput{QueueUrl: url}
			for k, st := range batch[c*10 : min(c*10+10, len(batch))] {
				in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), MessageBody: aws.String(st.prev.Body)})
			}
			_, err := queue.SendMessageBatch(ctx, in)
			return err
		}))
		must(fanout.Run(ctx, len(batch), redrive.Concurrency, func(ctx context.Context, i int) error {
			return store.Replace(ctx, batch[i].claimed, batch[i].marked)
		}))
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkRedriveAtModelledLatency replays 2,000 records with the redrive
// service against in-memory DynamoDB and SQS that answer after the latency
// model's wait (latency.AWS), on a standard queue (model-fake-msgs/s) and a
// FIFO queue with 100 message groups (model-fake-fifo-msgs/s; each group's
// order checked), and the raw loop of a standard queue's calls on the same
// fakes (model-fake-raw-msgs/s, model-fake-ratio: the service's own
// overhead under AWS's latencies, without the emulators' CPU).
func BenchmarkRedriveAtModelledLatency(b *testing.B) {
	for i := 0; i < b.N; i++ {
		std, _ := modelledRun(b, modelledRedriveRecords, 0)
		raw := modelledRaw(b, modelledRedriveRecords)
		fifo, queue := modelledRun(b, modelledRedriveRecords, 100)
		for g, ids := range queue.order {
			for k := 1; k < len(ids); k++ {
				if ids[k] < ids[k-1] {
					b.Fatalf("group %s sent out of order: %v", g, ids)
				}
			}
		}
		b.ReportMetric(std, "model-fake-msgs/s")
		b.ReportMetric(raw, "model-fake-raw-msgs/s")
		b.ReportMetric(std/raw, "model-fake-ratio")
		b.ReportMetric(fifo, "model-fake-fifo-msgs/s")
	}
}
