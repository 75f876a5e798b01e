package countstream_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// An event with records but without a shard id (no tumbling window) is
// refused, and every response carries a state (Lambda counts one without
// as a failure).
func TestHandlerRefusesAnEventWithoutShard(t *testing.T) {
	h := countstream.Handler(dynamostore.NewCounts(nil, "table"), "", nil)
	ev := events.DynamoDBTimeWindowEvent{DynamoDBEvent: events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000001"}}}}}
	resp, err := h(context.Background(), ev)
	if err == nil || resp.State == nil {
		t.Fatalf("handler = %+v, %v; want an error and a state", resp, err)
	}
}

// Writes through dynamostore are counted once the stream is drained, and
// once only however often it is drained.
func TestDrainCountsCountsEachWriteOnce(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	s := dynamostore.New(st.Clients.DynamoDB, st.Names[countstream.Table])
	r := storetest.Record(t, storetest.UniqueID("drain"))
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n := storetest.StateCount(t, s, r.Source, r.Status, r.FailureClass); n != 0 {
		t.Fatalf("counted %d before the stream was read: the write wrote a counter", n)
	}
	for range 2 {
		if err := countstream.DrainCounts(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if n := storetest.StateCount(t, countstream.NewReader(st), r.Source, r.Status, r.FailureClass); n != 1 {
		t.Fatalf("state counter %d, want 1", n)
	}
	next, err := r.ParkManual("ops", "look", r.FirstSeen.Add(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, r, next); err != nil {
		t.Fatal(err)
	}
	cr := countstream.NewReader(st)
	if q, p := storetest.StateCount(t, cr, r.Source, quarantine.StatusQuarantined, r.FailureClass), storetest.StateCount(t, cr, r.Source, quarantine.StatusParked, r.FailureClass); q != 0 || p != 1 {
		t.Fatalf("quarantined %d, parked %d; want 0, 1", q, p)
	}
}
