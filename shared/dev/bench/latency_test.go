package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// BenchmarkIngestThroughputAtAWSLatency is BenchmarkIngestThroughput with
// the latency model (latency.AWS, docs/performance.md) on every DynamoDB
// call, for ingest and for the raw conditional PutItem loop alike (2,000
// messages: 4 invocations of batches of 10, as Lambda delivers them):
// model-ingest-msgs/s, model-raw-puts/s and model-ratio.
func BenchmarkIngestThroughputAtAWSLatency(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	ddb := modelClients(st, 37).DynamoDB
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
		b.ReportMetric(ingestRate, "model-ingest-msgs/s")
		b.ReportMetric(rawRate, "model-raw-puts/s")
		b.ReportMetric(ingestRate/rawRate, "model-ratio")
	}
}
