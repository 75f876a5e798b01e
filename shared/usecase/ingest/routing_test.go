package ingest_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// Routing with many sources: each message goes by its
// DeadLetterQueueSourceArn to the source with exactly that ARN; anything
// else is quarantined all the same, under a name that says so.

const acct = "arn:aws:sqs:us-east-1:111111111111:"

// sharedQ is a Quarantiner whose sources orders and refunds share one DLQ
// ("shared-dlq"), and lots.fifo has its own.
func sharedQ(t *testing.T) (*ingest.Quarantiner, *memstore.Store) {
	t.Helper()
	cfg := map[string]sources.Config{
		"orders":    {ARN: acct + "orders", DLQ: "shared-dlq"},
		"refunds":   {ARN: acct + "refunds", DLQ: "shared-dlq"},
		"lots.fifo": {ARN: acct + "lots.fifo", DLQ: "lots-dlq.fifo"},
	}
	if err := sources.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	srcs, err := sources.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	return ingest.NewQuarantiner(store, nil, clk.Now, ingest.QuarantinerConfig{Sources: srcs}), store
}

// arrival is a message with a producer-supplied idempotency key: the same
// key whatever queue it comes from.
func arrival(id, dlqARN, sourceARN string) ingest.Message {
	return ingest.Message{MessageID: id, Body: []byte(`{"event_id":"e-1","amount":5}`), DLQARN: dlqARN, SourceARN: sourceARN, ReceiveCount: 3,
		Attributes: map[string]quarantine.Attribute{quarantine.DefaultKeyAttribute: {DataType: "String", StringValue: "order-1"}}}
}

func TestRoutingOnASharedDLQ(t *testing.T) {
	t.Parallel()
	q, store := sharedQ(t)
	ctx := context.Background()
	dlq := acct + "shared-dlq"
	foreign := "arn:aws:sqs:us-east-1:222222222222:orders"
	ids := map[string][]string{}
	for _, tc := range []struct {
		name          string
		m             ingest.Message
		source, route string
		note          string
	}{
		{"orders", arrival("m1", dlq, acct+"orders"), "orders", ingest.RouteConfigured, ""},
		{"refunds, the same body and key", arrival("m2", dlq, acct+"refunds"), "refunds", ingest.RouteConfigured, ""},
		{"no DeadLetterQueueSourceArn on a shared DLQ", arrival("m3", dlq, ""), "unresolved.shared-dlq", ingest.RouteUnrouted, "2 sources share the DLQ"},
		{"no DeadLetterQueueSourceArn on a DLQ of one source", arrival("m4", acct+"lots-dlq.fifo", ""), "lots.fifo", ingest.RouteConfigured, ""},
		{"an unconfigured source", arrival("m5", dlq, acct+"payments"), "payments", ingest.RouteUnconfigured, "source has no configuration"},
		{"a configured name, another account (its DLQ's)", arrival("m6", "arn:aws:sqs:us-east-1:222222222222:shared-dlq", foreign),
			"unrouted.us-east-1.222222222222.orders", ingest.RouteUnrouted, "its name is a configured source's, its ARN is not"},
		{"a configured name, outside its DLQ's account", arrival("m7", dlq, foreign),
			"unrouted.us-east-1.222222222222.orders", ingest.RouteUnrouted, "outside its DLQ's account and Region"},
		{"an ARN that is no queue ARN", arrival("m8", dlq, "orders"), "unresolved.shared-dlq", ingest.RouteUnrouted, "no queue ARN"},
	} {
		out, err := q.Quarantine(ctx, tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := out.Record
		ids[r.Source] = append(ids[r.Source], r.DLQID)
		if r.Source != tc.source || out.Route != tc.route {
			t.Errorf("%s: source %q route %q, want %q %q", tc.name, r.Source, out.Route, tc.source, tc.route)
		}
		if !strings.HasPrefix(r.DLQID, tc.source+"#") {
			t.Errorf("%s: record id %s is not under %s", tc.name, quarantine.LogRef(r.DLQID), tc.source)
		}
		if note := r.Attempts[len(r.Attempts)-1].Note; tc.note != "" && !strings.Contains(note, tc.note) || tc.note == "" && note != "" {
			t.Errorf("%s: note %q, want one saying %q", tc.name, note, tc.note)
		}
		if sources.ValidQueueName(r.Source) != (tc.route != ingest.RouteUnrouted) {
			t.Errorf("%s: source name %q: a queue name exactly when routed to a queue", tc.name, r.Source)
		}
	}
	// No message was appended to another queue's record: each source's
	// records hold its own arrivals only (m6 and m7 are the same foreign
	// queue's, the same key: one record, two arrivals).
	for src, want := range map[string]int{"orders": 1, "refunds": 1, "payments": 1, "unrouted.us-east-1.222222222222.orders": 2} {
		seen := map[string]bool{}
		n := 0
		for _, id := range ids[src] {
			if !seen[id] {
				seen[id] = true
				n += mustGet(t, store, id).AttemptCount
			}
		}
		if n != want {
			t.Errorf("source %s holds %d arrivals, want %d", src, n, want)
		}
	}
	if ids["orders"][0] == ids["unrouted.us-east-1.222222222222.orders"][0] {
		t.Error("a foreign queue of a configured name shares the configured source's record")
	}
}

// A record kept under a queue's name while that queue had no
// configuration is never the same event as a message of a configured
// source of that name with another ARN: the arrival opens its own record.
func TestArrivalNeverJoinsARecordOfAnotherQueueARN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	unconfigured := ingest.NewQuarantiner(store, nil, clk.Now, ingest.QuarantinerConfig{})
	other := "arn:aws:sqs:us-east-1:222222222222:orders"
	first, err := unconfigured.Quarantine(ctx, arrival("m1", "arn:aws:sqs:us-east-1:222222222222:shared-dlq", other))
	if err != nil || first.Route != ingest.RouteUnconfigured || first.Record.Source != "orders" {
		t.Fatalf("%+v %v", first, err)
	}
	srcs, err := sources.Build(map[string]sources.Config{"orders": {ARN: acct + "orders", DLQ: "shared-dlq"}})
	if err != nil {
		t.Fatal(err)
	}
	q := ingest.NewQuarantiner(store, nil, clk.Now, ingest.QuarantinerConfig{Sources: srcs})
	second, err := q.Quarantine(ctx, arrival("m2", acct+"shared-dlq", acct+"orders"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Result != ingest.ResultCreated || second.Record.DLQID == first.Record.DLQID || second.Record.SourceARN != acct+"orders" {
		t.Fatalf("arrival of the configured queue: %s %s (source arn %s)", second.Result, quarantine.LogRef(second.Record.DLQID), second.Record.SourceARN)
	}
	if r := mustGet(t, store, first.Record.DLQID); r.AttemptCount != 1 || r.SourceARN != other {
		t.Fatalf("the other queue's record was changed: %d attempts, arn %s", r.AttemptCount, r.SourceARN)
	}
}

// The handler reports a message it could not route to a configured source
// (it stores it all the same): counted per source as Unconfigured or
// Unrouted in its EMF metrics.
func TestHandlerCountsUnconfiguredAndUnrouted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	unconfigured := f.message("u1", inventory(secret("route1"), "L1"))
	unconfigured.Attributes["DeadLetterQueueSourceArn"] = "arn:aws:sqs:us-east-1:000000000000:" + f.source + "-other"
	unrouted := f.message("u2", inventory(secret("route2"), "L1"))
	unrouted.Attributes["DeadLetterQueueSourceArn"] = "arn:aws:sqs:us-east-1:111111111111:" + f.source
	if resp := handle(t, f, f.message("c1", inventory(secret("route3"), "L1")), unconfigured, unrouted); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(f.metrics.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"Unconfigured", "Unrouted", "Arrivals"} {
			if v, ok := doc[m].(float64); ok {
				got[doc["Source"].(string)+" "+m] += v
			}
		}
	}
	want := map[string]float64{
		f.source + " Arrivals":       1,
		f.source + "-other Arrivals": 1, f.source + "-other Unconfigured": 1,
		"unrouted.us-east-1.111111111111." + f.source + " Arrivals": 1, "unrouted.us-east-1.111111111111." + f.source + " Unrouted": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
}
