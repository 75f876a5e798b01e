package statemachine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// legal lists, for each status, the statuses one action may lead to.
var legal = map[quarantine.Status][]quarantine.Status{
	quarantine.StatusQuarantined: {quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusParked},
	quarantine.StatusRedriving:   {quarantine.StatusRedriving, quarantine.StatusQuarantined, quarantine.StatusRedriven, quarantine.StatusParked},
	quarantine.StatusRedriven:    {quarantine.StatusRedriven, quarantine.StatusQuarantined, quarantine.StatusResolved},
	quarantine.StatusResolved:    {quarantine.StatusResolved, quarantine.StatusQuarantined, quarantine.StatusArchived},
	quarantine.StatusParked:      {quarantine.StatusParked, quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusArchived},
	quarantine.StatusArchived:    {quarantine.StatusArchived},
}

// seen is the model's memory of one record.
type seen struct {
	status      quarantine.Status
	version     int64
	seal        string
	firstSeen   time.Time
	bodySHA256  string
	corrections int
}

func TestLifecycleProperties(t *testing.T) {
	stack := embedded.ForTest(t, embedded.Options{})
	table := stack.Names["QuarantineTable"]
	store, list := dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table)
	payloads := s3store.New(stack.Clients.S3, stack.Names["PayloadBucket"], "")
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		name := fmt.Sprintf("sm%d-%d", run, time.Now().UnixNano())
		// Each check's records and its source's marker go when it ends:
		// the sweeper lists every source the table names, so sources kept
		// from earlier checks would make each check slower than the last.
		defer func() {
			if err := storetest.RemoveSource(ctx, stack.Clients.DynamoDB, table, name); err != nil {
				rt.Fatal(err)
			}
		}()
		src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, IdempotencyPointer: "/k", RedriveCap: 2}
		clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		q := ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{name: src}})
		k := quarantine.Corrector{Store: store, Payloads: payloads, Now: clk.Now, Sources: map[string]*quarantine.Source{name: src}}
		sw := sweeper.New(store, list, payloads, s3store.Archiver{API: stack.Clients.S3}, nil, clk.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
			sweeper.Config{Bucket: stack.Names["ArchiveBucket"], Retention: 3650 * 24 * time.Hour})
		model := map[string]*seen{}
		keys := []string{"a", "b", "c"}
		msg := 0

		// step applies f to the record of key with one conditional write;
		// a refused transition changes nothing.
		step := func(key string, f func(r *quarantine.Record) (*quarantine.Record, error)) {
			r, err := store.Get(ctx, quarantine.RecordID(name, key))
			if errors.Is(err, quarantine.ErrNotFound) {
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			next, err := f(r)
			if errors.Is(err, quarantine.ErrNotClaimable) || errors.Is(err, quarantine.ErrCapReached) {
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			if err := store.Replace(ctx, r, next); err != nil {
				rt.Fatal(err)
			}
		}
		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for range steps {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			now := clk.Now()
			switch action := rapid.SampledFrom([]string{"ingest", "claim", "mark", "release", "settle", "park", "unpark", "sweep", "tick", "correct", "comeback"}).Draw(rt, "action"); action {
			case "correct":
				msg++
				_, err := k.Correct(ctx, quarantine.RecordID(name, key), quarantine.CorrectionRequest{Actor: "sm", Reason: "fix", Body: []byte(fmt.Sprintf(`{"k":%q,"fix":%d}`, key, msg))})
				var ce *quarantine.CorrectionError
				if err != nil && !errors.As(err, &ce) && !errors.Is(err, quarantine.ErrNotFound) {
					rt.Fatal(err)
				}
			case "comeback":
				// The latest correction's replay fails again and is dead-lettered.
				r, err := store.Get(ctx, quarantine.RecordID(name, key))
				if err != nil || r.Latest() == nil || r.Latest().Body == "" {
					break
				}
				msg++
				body := r.Latest().Body
				if _, err := q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprint("m", msg), SourceARN: src.ARN, Body: []byte(body)}); err != nil {
					rt.Fatal(err)
				}
				if _, err := store.Get(ctx, quarantine.RecordID(name, key)+"#body-"+quarantine.BodySHA256([]byte(body))[:16]); !errors.Is(err, quarantine.ErrNotFound) {
					rt.Fatalf("%s: a corrected replay made a conflict record (%v)", key, err)
				}
			case "ingest":
				msg++
				if _, err := q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprint("m", msg), SourceARN: src.ARN, Body: []byte(`{"k":"` + key + `"}`)}); err != nil {
					rt.Fatal(err)
				}
			case "claim":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) {
					n, err := r.Claim("sm", now, time.Minute)
					if errors.Is(err, quarantine.ErrCapReached) {
						return r.ParkPoison("sm", now)
					}
					return n, err
				})
			case "mark":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) { return r.MarkRedriven("sm", "sent", now) })
			case "release":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Release("sm", "failed", now, nil) })
			case "settle":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(now, 0) })
			case "park":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkManual("sm", "hold", now) })
			case "unpark":
				step(key, func(r *quarantine.Record) (*quarantine.Record, error) { return r.Unpark("sm", "go", now) })
			case "sweep":
				if _, err := sw.Run(ctx); err != nil {
					rt.Fatal(err)
				}
			case "tick":
				clk.Advance(2 * time.Minute) // leases expire
			}
			clk.Advance(time.Millisecond)
			check(rt, store, name, keys, model)
		}
	})
}

// check compares every record with the model: only legal transitions, the
// cap never exceeded, first_seen and the original body never changed,
// corrections only added, the seal and its chain intact.
func check(rt *rapid.T, store quarantine.Store, source string, keys []string, model map[string]*seen) {
	for _, key := range keys {
		r, err := store.Get(context.Background(), quarantine.RecordID(source, key))
		if errors.Is(err, quarantine.ErrNotFound) {
			if model[key] != nil {
				rt.Fatalf("%s: record lost", key)
			}
			continue
		}
		if err != nil {
			rt.Fatal(err)
		}
		if err := quarantine.Verify(r); err != nil {
			rt.Fatalf("%s: %v", key, err)
		}
		if r.RedriveCount > r.RedriveCap {
			rt.Fatalf("%s: redrive_count %d above cap %d", key, r.RedriveCount, r.RedriveCap)
		}
		m := model[key]
		if m == nil {
			if r.Version != 1 || r.PrevSeal != "" {
				rt.Fatalf("%s: first seen at version %d", key, r.Version)
			}
			model[key] = &seen{status: r.Status, version: r.Version, seal: r.Seal, firstSeen: r.FirstSeen.Time, bodySHA256: r.BodySHA256}
			continue
		}
		if !r.FirstSeen.Equal(m.firstSeen) {
			rt.Fatalf("%s: first_seen changed from %s to %s", key, m.firstSeen, r.FirstSeen)
		}
		// Corrections sit beside the original: it never changes, and none
		// is ever dropped or beyond the cap.
		if r.BodySHA256 != m.bodySHA256 {
			rt.Fatalf("%s: the original body changed", key)
		}
		if len(r.Corrections) < m.corrections || len(r.Corrections) > r.RedriveCap {
			rt.Fatalf("%s: %d corrections after %d (cap %d)", key, len(r.Corrections), m.corrections, r.RedriveCap)
		}
		m.corrections = len(r.Corrections)
		switch {
		case r.Version == m.version:
			if r.Seal != m.seal {
				rt.Fatalf("%s: content changed without a new version", key)
			}
		case r.Version == m.version+1:
			if r.PrevSeal != m.seal {
				rt.Fatalf("%s: version %d does not chain to %d", key, r.Version, m.version)
			}
			ok := false
			for _, st := range legal[m.status] {
				ok = ok || st == r.Status
			}
			if !ok {
				rt.Fatalf("%s: illegal transition %s → %s", key, m.status, r.Status)
			}
		default:
			rt.Fatalf("%s: version jumped from %d to %d in one step", key, m.version, r.Version)
		}
		m.status, m.version, m.seal = r.Status, r.Version, r.Seal
	}
}
