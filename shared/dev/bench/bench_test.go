// Package bench holds the project's load benchmarks on the embedded stack.
// They report figures, never assert timings: run them with `make bench`.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

const (
	messages    = 10000
	batchSize   = 10
	invocations = 4
)

func inventory(i int) string {
	return fmt.Sprintf(`{"event_id":"bench-%06d","ndc":"12345-678-90","lot":"LOT-%04d","quantity_delta":-5,"schedule":"CII","facility":"FAC-1","occurred_at":"2026-11-29T10:00:00Z"}`, i, i%5000)
}

// BenchmarkIngestThroughput pushes 10,000 dead-lettered messages through the
// real ingest handler in batches of 10 with 4 concurrent invocations, then
// runs a raw loop of the conditional PutItem calls ingest must make at the
// same concurrency (4 workers × batches of 10) in the same run, and reports
// both rates and their ratio; free-puts/s is the same puts with 40 always in
// flight (no batch barrier), for reference.
func BenchmarkIngestThroughput(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	for i := 0; i < b.N; i++ {
		source := embedded.RandomName("bench")
		cfg := ingest.Config{TableName: table, Sources: map[string]ingest.SourceConfig{
			source: {ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQ: source + "-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
		}}
		h, err := wire.Ingest(context.Background(), cfg, &wire.Clients{DynamoDB: st.Clients.DynamoDB}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		// The raw loop: the same items, written with the same conditional
		// put, shaped as Lambda delivers them: 4 workers, each putting a
		// batch of 10 at once and waiting for the batch before the next.
		cond, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("dlq_id"))).Build()
		put := func(it map[string]ddbtypes.AttributeValue) {
			if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table), Item: it, ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
			}); err != nil {
				b.Error(err)
			}
		}
		rawBarrier := func(items []map[string]ddbtypes.AttributeValue) float64 {
			work := make(chan []map[string]ddbtypes.AttributeValue, messages/batchSize)
			for n := 0; n < messages; n += batchSize {
				work <- items[n : n+batchSize]
			}
			close(work)
			start := time.Now()
			run(invocations, func() {
				for batch := range work {
					var wg sync.WaitGroup
					for _, it := range batch {
						wg.Add(1)
						go func() { defer wg.Done(); put(it) }()
					}
					wg.Wait()
				}
			})
			return messages / time.Since(start).Seconds()
		}

		// Raw, ingest, raw again: the table grows as the run goes, so the raw
		// rate is the mean of one run before and one after the ingest run.
		raw1 := rawBarrier(rawItems(b, source+"-raw1"))
		batches := make(chan events.SQSEvent, messages/batchSize)
		for n := 0; n < messages; n += batchSize {
			var ev events.SQSEvent
			for j := n; j < n+batchSize; j++ {
				ev.Records = append(ev.Records, events.SQSMessage{
					MessageId: fmt.Sprintf("m-%d", j), Body: inventory(j), EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source + "-dlq",
					Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": cfg.Sources[source].ARN},
				})
			}
			batches <- ev
		}
		close(batches)
		start := time.Now()
		run(invocations, func() {
			for ev := range batches {
				resp, err := h.Handle(ctx, ev)
				if err != nil || len(resp.BatchItemFailures) > 0 {
					b.Errorf("batch failed: %v %v", err, resp.BatchItemFailures)
				}
			}
		})
		ingestRate := messages / time.Since(start).Seconds()

		raw2 := rawBarrier(rawItems(b, source+"-raw2"))
		rawRate := (raw1 + raw2) / 2
		// For reference: the same puts free-running, 40 always in flight.
		free := make(chan map[string]ddbtypes.AttributeValue, messages)
		for _, it := range rawItems(b, source+"-free") {
			free <- it
		}
		close(free)
		start = time.Now()
		run(invocations*batchSize, func() {
			for it := range free {
				put(it)
			}
		})
		freeRate := messages / time.Since(start).Seconds()
		b.ReportMetric(freeRate, "free-puts/s")
		b.ReportMetric(ingestRate, "ingest-msgs/s")
		b.ReportMetric(rawRate, "raw-puts/s")
		b.ReportMetric(ingestRate/rawRate, "ratio")
	}
}

// rawItems builds the DynamoDB items ingest would write, outside the timing.
func rawItems(b *testing.B, source string) []map[string]ddbtypes.AttributeValue {
	store := memstore.New()
	q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{
		source: {Name: source, ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQName: source + "-dlq", IdempotencyPointer: "/event_id"},
	}})
	for j := range messages {
		if _, err := q.Quarantine(context.Background(), ingest.Message{
			MessageID: fmt.Sprintf("m-%d", j), Body: []byte(inventory(j)), SourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source,
		}); err != nil {
			b.Fatal(err)
		}
	}
	var items []map[string]ddbtypes.AttributeValue
	for _, r := range store.All() {
		it, err := dynamostore.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, it)
	}
	return items
}

func run(workers int, f func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}

// BenchmarkIngestBootstrap reports the size of the linux/arm64 bootstrap that
// ships, and the start-up time of this machine's build of the same code to
// its first Runtime API poll on kumo (median of 10 cold starts).
func BenchmarkIngestBootstrap(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	root := filepath.Join("..", "..", "..")
	arm := filepath.Join(dir, "arm64-bootstrap")
	if out, err := lambdatest.Command(ctx, root, "GOOS=linux", "GOARCH=arm64", "-o", arm, "./functions/ingest").CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	fi, err := os.Stat(arm)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := lambdatest.Build(ctx, "ingest", dir)
	if err != nil {
		b.Fatal(err)
	}
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	env, err := lambdatest.Env(st, "IngestFunction")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		var starts []time.Duration
		for range 10 {
			f, err := lambdatest.Start(ctx, st, embedded.RandomName("ingest"), bin, env, 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			starts = append(starts, f.StartUp)
			f.Close()
		}
		slices.Sort(starts)
		b.ReportMetric(float64(starts[len(starts)/2].Microseconds())/1000, "startup-ms")
		b.ReportMetric(float64(fi.Size())/1e6, "arm64-MB")
	}
}
