package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
)

// The real metrics bootstrap, configured from the template, publishes when
// invoked with the scheduled event from events/, and logs no payload value.
func TestBootstrapPublishesOnTheScheduledEvent(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	raw := lambdatest.ScheduledSample(t, "metrics-scheduled.json")
	fn, err := st.Template.GetServerlessFunctionWithName("MetricsFunction")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := sources.Parse(fn.Environment.Variables["SOURCES"])
	srcs, _ := sources.Build(cfg)
	source := st.Names["SourceQueue"]
	q := ingest.NewQuarantiner(dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"]), nil, nil, ingest.QuarantinerConfig{Sources: srcs})
	if _, err := q.Quarantine(ctx, ingest.Message{MessageID: "m1", SourceARN: srcs[source].ARN, Body: []byte(`{"event_id":"SECRET-PAYLOAD-1"}`)}); err != nil {
		t.Fatal(err)
	}
	// Counters come from the table's stream (the ledger function's job).
	if err := countstream.DrainCounts(ctx, st); err != nil {
		t.Fatal(err)
	}
	f := lambdatest.ForTest(t, st, "metrics", "MetricsFunction", 60*time.Second)
	payload := f.MustInvoke(t, raw)
	var reps []metrics.Report
	if err := json.Unmarshal(payload, &reps); err != nil || len(reps) != 1 || reps[0].OpenRecords != 1 || reps[0].Records["QUARANTINED/validation"] != 1 {
		t.Fatalf("report %s: %v", payload, err)
	}
	if strings.Contains(f.Output(), "SECRET-PAYLOAD") || !strings.Contains(f.Output(), "dominant_signature") {
		t.Fatalf("logs: %s", f.Output())
	}
}
