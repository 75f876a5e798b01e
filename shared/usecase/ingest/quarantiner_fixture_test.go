package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// The fixture of the Quarantiner's own tests: one inventory source on the
// in-memory store, with corrections beside it.

const validBody = `{"event_id":"evt-1","ndc":"12345-678-90","lot":"L1","quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`

// badNDC fails the inventory schema at its ndc; fixed corrects it.
const badNDC = `{"event_id":"evt-9","ndc":"NDC?1","lot":"L1","quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`

func fixed(ndc string) []byte {
	return []byte(strings.Replace(badNDC, `"NDC?1"`, `"`+ndc+`"`, 1))
}

func fixedBody() string { return string(fixed("12345-678-90")) }

func correctReq(body []byte) quarantine.CorrectionRequest {
	return quarantine.CorrectionRequest{Actor: "fixer@example.com", Reason: "NDC typo in the producer", Body: body}
}

// inventorySource is the inventory source as SOURCES configures it.
func inventorySource(t testing.TB) *quarantine.Source {
	t.Helper()
	srcs, err := sources.Build(map[string]sources.Config{"inventory": {
		ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", DLQ: "inventory-dlq",
		IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1", RedriveCap: 3,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return srcs["inventory"]
}

// quarantiner is ingest's use case with corrections beside it, on the
// same store, payloads, clock and sources.
type quarantiner struct {
	*ingest.Quarantiner
	quarantine.Corrector
}

func newQ(t testing.TB) (*quarantiner, *memstore.Store, *memstore.Payloads, *clock.Fake) {
	t.Helper()
	return newQFor(t, inventorySource(t))
}

// newQFor is newQ for src.
func newQFor(t testing.TB, src *quarantine.Source) (*quarantiner, *memstore.Store, *memstore.Payloads, *clock.Fake) {
	t.Helper()
	store, payloads := memstore.New(), memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	srcs := map[string]*quarantine.Source{src.Name: src}
	q := &quarantiner{
		ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: srcs}),
		quarantine.Corrector{Store: store, Payloads: payloads, Now: clk.Now, Sources: srcs},
	}
	return q, store, payloads, clk
}

func msg(id, body string) ingest.Message {
	return ingest.Message{
		MessageID: id, Body: []byte(body), DLQARN: "arn:aws:sqs:us-east-1:000000000000:inventory-dlq",
		SentTimestamp: 1764400000000, ReceiveCount: 1,
	}
}

// quarantined stores m and returns what it did.
func quarantined(t testing.TB, q *quarantiner, m ingest.Message) ingest.Outcome {
	t.Helper()
	out, err := q.Quarantine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustGet(t *testing.T, store quarantine.Store, id string) *quarantine.Record {
	t.Helper()
	r, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// transition is one step of a record's lifecycle.
type transition = func(r *quarantine.Record) (*quarantine.Record, error)

// apply takes the record at id through steps, each read, changed and
// replaced in the store (clk, when set, moves a second after each), and
// returns the last version.
func apply(t *testing.T, store quarantine.Store, clk *clock.Fake, id string, steps ...transition) *quarantine.Record {
	t.Helper()
	ctx := context.Background()
	r := mustGet(t, store, id)
	for _, step := range steps {
		next, err := step(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
		r = next
		if clk != nil {
			clk.Advance(time.Second)
		}
	}
	return r
}

// sendReplay claims the record at id for actor and marks it sent as the
// replay sentID, as redrive does; it returns the REDRIVEN version.
func sendReplay(t *testing.T, store quarantine.Store, clk *clock.Fake, id, actor, sentID string) *quarantine.Record {
	t.Helper()
	return apply(t, store, nil, id,
		func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim(actor, clk.Now(), time.Minute) },
		func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.MarkRedriven(actor, sentID, clk.Now())
		})
}

// archiveRecord moves the record at id to RESOLVED through one replay round
// (so it has a redrive count) and archives it, as redrive and the sweeper
// would; it returns the stub.
func archiveRecord(t *testing.T, store *memstore.Store, clk *clock.Fake, id string) *quarantine.Record {
	t.Helper()
	r := apply(t, store, clk, id,
		func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("ops", clk.Now(), time.Minute) },
		func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.MarkRedriven("ops", "sent-"+r.DLQID, clk.Now())
		},
		func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(clk.Now(), 0) },
		func(r *quarantine.Record) (*quarantine.Record, error) {
			ref := quarantine.ArchiveRef{Bucket: "archive", Key: "archive/" + quarantine.LogRef(r.DLQID), VersionID: "v1",
				RetainUntil: quarantine.At(clk.Now().Add(24 * time.Hour)), SHA256: strings.Repeat("a", 64), Seal: r.Seal, ArchivedAt: quarantine.At(clk.Now())}
			return r.ArchiveStub("sweeper", ref, clk.Now())
		},
	)
	if r.Status != quarantine.StatusArchived {
		t.Fatalf("%s after archiving", r.Status)
	}
	return r
}

// checkCounters compares the state counters with a recount of the records.
func checkCounters(t *testing.T, store *memstore.Store, source string) {
	t.Helper()
	type sc struct {
		st quarantine.Status
		c  quarantine.Class
	}
	want := map[sc]int64{}
	for _, r := range store.All() {
		if r.Source == source {
			want[sc{r.Status, r.FailureClass}]++
		}
	}
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			if got := storetest.StateCount(t, store, source, st, c); got != want[sc{st, c}] {
				t.Errorf("counter %s/%s = %d, recount %d", st, c, got, want[sc{st, c}])
			}
		}
	}
}

// counterSum is the sum of a counter's shards (key names each shard's key).
func counterSum(store *memstore.Store, key func(shard int) quarantine.CounterKey) int64 {
	var keys []quarantine.CounterKey
	for s := range quarantine.CounterShards {
		keys = append(keys, key(s))
	}
	got, _ := store.ReadCounters(context.Background(), keys)
	var n int64
	for _, v := range got {
		n += v
	}
	return n
}

// bucketCount is the inventory source's hourly counter kind of hour.
func bucketCount(store *memstore.Store, kind string, hour time.Time) int64 {
	return counterSum(store, func(s int) quarantine.CounterKey { return quarantine.BucketCounterKey("inventory", kind, hour, s) })
}
