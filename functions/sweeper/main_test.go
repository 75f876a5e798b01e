package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// The real sweeper bootstrap, configured from the template, archives a
// parked record when invoked with the scheduled event from events/.
func TestBootstrapSweepsOnTheScheduledEvent(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{Params: map[string]any{"ParkAgeSeconds": 0}})
	raw := lambdatest.ScheduledSample(t, "sweeper-scheduled.json")
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
	out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m1", Body: []byte(`{"event_id":"inv-1"}`), SourceARN: "arn:aws:sqs:us-east-1:000000000000:" + st.Names["SourceQueue"]})
	if err != nil {
		t.Fatal(err)
	}
	parked, err := out.Record.ParkPoison("test", time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, out.Record, parked); err != nil {
		t.Fatal(err)
	}

	f := lambdatest.ForTest(t, st, "sweeper", "SweeperFunction", 60*time.Second)
	payload := f.MustInvoke(t, raw)
	var rep sweeper.Report
	if err := json.Unmarshal(payload, &rep); err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != parked.DLQID {
		t.Fatalf("report %s: %v", payload, err)
	}
	stub, err := store.Get(ctx, parked.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := s3store.VerifyStub(ctx, st.Clients.S3, stub); err != nil || len(problems) != 0 {
		t.Fatal(problems, err)
	}
	if strings.Contains(f.Output(), "inv-1") {
		t.Fatal("a payload value reached the sweeper's logs")
	}
}
