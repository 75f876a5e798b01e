package bench

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// BenchmarkLifecycleCost takes COST_MESSAGES (default 1,000) dead-lettered
// messages through their whole life on the embedded stack under the
// latency model (capacity.Lifecycle: ingest, one replay each, settle, the
// sweeper's archive, the ledger on every version) and reports what a
// million cost: Lambda GB-seconds and invocations, DynamoDB write and
// read units, S3, KMS and SQS requests, and dollars at us-east-1 list
// prices; and, per scheduled run whatever the traffic, the digest's and
// the metrics function's GB-seconds and requests.
func BenchmarkLifecycleCost(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("COST_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		st := embedded.ForTest(b, embedded.Options{Params: capacity.LifecycleParams})
		res, err := capacity.Lifecycle(context.Background(), st, n, nil)
		if err != nil {
			b.Fatal(err)
		}
		m := res.PerMillion()
		b.ReportMetric(m.GBSeconds, "GB-s/Mmsg")
		b.ReportMetric(m.Invocations, "invocations/Mmsg")
		b.ReportMetric(m.WriteUnits, "WRU/Mmsg")
		b.ReportMetric(m.ReadUnits, "RRU/Mmsg")
		b.ReportMetric(m.S3Tier1, "s3-put-list/Mmsg")
		b.ReportMetric(m.S3Tier2, "s3-get/Mmsg")
		b.ReportMetric(m.KMSRequests, "kms/Mmsg")
		b.ReportMetric(m.SQSRequests, "sqs/Mmsg")
		b.ReportMetric(m.Dollars, "USD/Mmsg")
		b.ReportMetric(res.Digest.GBSeconds(), "digest-GB-s/run")
		b.ReportMetric(res.Metrics.GBSeconds(), "metrics-GB-s/run")
		for _, p := range res.Phases {
			b.Logf("%s: %d invocations, %s in the handler at %d MB, %d WRU, %.1f RRU; %s", p.Function, p.Invocations, p.Duration, p.MemoryMB, p.WriteUnits, p.ReadUnits, p.Calls)
		}
		for _, p := range []capacity.Phase{res.Digest, res.Metrics} {
			b.Logf("%s (one scheduled run): %s at %d MB, %d WRU, %.1f RRU; %s", p.Function, p.Duration, p.MemoryMB, p.WriteUnits, p.ReadUnits, p.Calls)
		}
		b.Logf("%d messages of %d bytes; per million:", res.Messages, res.BodyBytes)
		for _, l := range m.Lines() {
			b.Log(l)
		}
	}
}
