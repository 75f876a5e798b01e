package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// modelLatency is the latency model of a DynamoDB write in the region (a
// single-digit-millisecond service: 5 ms is a typical PutItem from Lambda).
const modelLatency = 5 * time.Millisecond

// latencyClient adds the model's latency to every request: the emulator
// answers in microseconds, so on it alone the CPU work around each call
// (schema validation, the seal, marshalling) weighs as it never does
// against AWS.
type latencyClient struct {
	base aws.HTTPClient
	d    time.Duration
}

func (l latencyClient) Do(req *http.Request) (*http.Response, error) {
	time.Sleep(l.d)
	return l.base.Do(req)
}

// BenchmarkIngestThroughputAtAWSLatency is BenchmarkIngestThroughput with
// the latency model on every DynamoDB call, for ingest and for the raw
// conditional PutItem loop alike (2,000 messages: 4 invocations of batches
// of 10, as Lambda delivers them); ratio-at-5ms is ingest ÷ raw.
func BenchmarkIngestThroughputAtAWSLatency(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	cfg := st.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	cfg.HTTPClient = latencyClient{base: base, d: modelLatency}
	ddb := awsclients.New(cfg, awsclients.Options{Local: true}).DynamoDB
	for i := 0; i < b.N; i++ {
		source := embedded.RandomName("lat")
		icfg := ingest.Config{TableName: table, Sources: map[string]ingest.SourceConfig{
			source: {ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQ: source + "-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
		}}
		h, err := wire.Ingest(ctx, icfg, &wire.Clients{DynamoDB: ddb}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		put := conditionalPut(ctx, b, ddb, table)
		items := rawItems(b, source+"-raw")[:n]
		rawRate := rawRun(items, n, put)
		ingestRate := ingestRun(ctx, b, h, source, icfg.Sources[source].ARN, n)
		b.ReportMetric(ingestRate, "ingest-msgs/s-at-5ms")
		b.ReportMetric(rawRate, "raw-puts/s-at-5ms")
		b.ReportMetric(ingestRate/rawRate, "ratio-at-5ms")
	}
}
