package main_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
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
	st, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir(), NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := os.ReadFile("../../events/metrics-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(raw, &ev); err != nil || ev.DetailType != "Scheduled Event" {
		t.Fatalf("sample event: %+v %v", ev, err)
	}
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
	bin, err := lambdatest.Build(ctx, "metrics", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, err := lambdatest.Env(st, "MetricsFunction")
	if err != nil {
		t.Fatal(err)
	}
	f, err := lambdatest.Start(ctx, st, embedded.RandomName("metrics"), bin, env, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := f.Invoke(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if res.FunctionError != nil {
		t.Fatalf("function error: %s\n%s", res.Payload, f.Output())
	}
	var reps []metrics.Report
	if err := json.Unmarshal(res.Payload, &reps); err != nil || len(reps) != 1 || reps[0].OpenRecords != 1 || reps[0].Records["QUARANTINED/validation"] != 1 {
		t.Fatalf("report %s: %v", res.Payload, err)
	}
	if strings.Contains(f.Output(), "SECRET-PAYLOAD") || !strings.Contains(f.Output(), "dominant_signature") {
		t.Fatalf("logs: %s", f.Output())
	}
}
