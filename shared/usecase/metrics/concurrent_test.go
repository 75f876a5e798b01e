package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Counters stay exact while the real ingest path, redrive runs and sweeps
// work on the same records at once: compared with a full recount.
func TestCountersExactUnderConcurrentFunctions(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	table := st.Names["QuarantineTable"]
	store, list := dynamostore.New(st.Clients.DynamoDB, table), dynamostore.NewLister(st.Clients.DynamoDB, table)
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	name := embedded.RandomName("cc")
	// No redrive policy and no visibility timeout: the settle window the
	// queue needs is the margin alone, so replays settle within the run.
	if _, err := st.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"VisibilityTimeout": "0"}}); err != nil {
		t.Fatal(err)
	}
	src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, IdempotencyPointer: "/k", RedriveCap: 1}
	srcs := map[string]*quarantine.Source{name: src}
	q := ingest.NewQuarantiner(store, payloads, nil, ingest.QuarantinerConfig{Sources: srcs})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rd := redrive.New(store, list, payloads, st.Clients.SQS, srcs, nil, log, redrive.Config{ApprovalThreshold: 10000, SettleWindow: time.Millisecond, SettleMargin: time.Millisecond})
	sw := sweeper.New(store, list, payloads, s3store.Archiver{API: st.Clients.S3}, nil, nil, log, sweeper.Config{Bucket: st.Names["ArchiveBucket"], Retention: 30 * 24 * time.Hour})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 6 { // ingest: arrivals and re-failures of 60 keys
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				key := fmt.Sprintf("k%02d", (w*13+i)%60)
				if _, err := q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprintf("m%d-%d", w, i), SourceARN: src.ARN, Body: []byte(`{"k":"` + key + `"}`)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 2 { // redrive and settle, and the sweeper, over and over
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := rd.Run(ctx, redrive.Request{Source: name, RequestedBy: "t", MaxMessages: 50, BatchSize: 10}); err != nil {
					t.Error(err)
					return
				}
				if _, err := sw.Run(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	// Full recount against the counters.
	want := map[string]int64{}
	keys := map[string]int{}
	var successors []*quarantine.Record
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		lq := quarantine.ListQuery{Status: stt, Source: name}
		ids, err := quarantine.ListIDs(ctx, list, lq)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			r, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want[string(r.Status)+"/"+string(r.FailureClass)]++
			keys[r.IdempotencyKey]++
			if r.Predecessor != nil {
				successors = append(successors, r)
			}
		}
	}
	// One record per key, plus one successor for each re-failure of an
	// archived record (linked to it).
	if len(keys) != 60 {
		t.Fatalf("records for %d keys, want 60", len(keys))
	}
	n := 0
	for _, c := range keys {
		n += c
	}
	if n != 60+len(successors) {
		t.Fatalf("%d records for 60 keys and %d successors", n, len(successors))
	}
	for _, r := range successors {
		if p, err := store.Get(ctx, r.Predecessor.ID); err != nil || p.Status != quarantine.StatusArchived || p.Seal != r.Predecessor.Seal {
			t.Fatalf("successor linked to a record that is not its archived predecessor: %v", err)
		}
	}
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			if got := storetest.StateCount(t, store, name, stt, c); got != want[string(stt)+"/"+string(c)] {
				t.Errorf("counter %s/%s = %d, recount %d", stt, c, got, want[string(stt)+"/"+string(c)])
			}
		}
	}
	t.Logf("recount %v, %d successors", want, len(successors))
}
