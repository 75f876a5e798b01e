package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// BenchmarkMetricsRunOfManySources times one metrics run over
// DLQQ_METRICS_BENCH_SOURCES sources (default 400) sharing the stack's
// DLQ, with the latency model on every call (latency.AWS), and reports
// sources-per-s and how many sources one run measures in the function's
// 60 s less metrics.DeadlineMargin (model-sources-per-run). Records do
// not change a run's calls (TestCallsDoNotGrowWithTheTable): the
// sources have none.
//
//	go test -run '^$' -bench '^BenchmarkMetricsRunOfManySources$' -benchtime=1x ./shared/dev/bench/
func BenchmarkMetricsRunOfManySources(b *testing.B) {
	n := 400
	if v, err := strconv.Atoi(os.Getenv("DLQQ_METRICS_BENCH_SOURCES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	dlq := st.Names["DeadLetterQueue"]
	cfg := metrics.FunctionConfig{TableName: st.Names["QuarantineTable"], Sources: map[string]sources.Config{}}
	for i := range n {
		name := fmt.Sprintf("%s-m%04d", embedded.RandomName("mb"), i)
		cfg.Sources[name] = sources.Config{ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, DLQ: dlq}
	}
	cl := modelClients(st, 41)
	svc, err := wire.Metrics(ctx, cfg, &wire.Clients{DynamoDB: cl.DynamoDB, SQS: cl.SQS, CloudWatch: cl.CloudWatch}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		start := time.Now()
		reps, err := svc.Run(ctx)
		if err != nil || len(reps) != n {
			b.Fatalf("metrics run: %d reports, %v", len(reps), err)
		}
		rate := float64(n) / time.Since(start).Seconds()
		b.ReportMetric(rate, "model-sources/s")
		b.ReportMetric(rate*(60*time.Second-metrics.DeadlineMargin).Seconds(), "model-sources-per-run")
	}
}
