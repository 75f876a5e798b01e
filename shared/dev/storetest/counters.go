package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// CounterReader reads counter shards (memstore.Store, which counts on each
// write; for dynamostore, whose counters follow the table's stream, a
// countstream.Reader, which lets the counting catch up before each read).
type CounterReader interface {
	ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// SignatureReader lists a source's open records by signature.
type SignatureReader interface {
	OpenSignatures(ctx context.Context, source string) (map[string]int64, error)
}

// StateCount sums a status × class counter over its shards.
func StateCount(t testing.TB, cr CounterReader, source string, st quarantine.Status, c quarantine.Class) int64 {
	t.Helper()
	return sumShards(t, cr, func(shard int) quarantine.CounterKey { return quarantine.StateCounterKey(source, st, c, shard) })
}

// sumShards reads the counter whose shard keys key names and sums them.
func sumShards(t testing.TB, cr CounterReader, key func(shard int) quarantine.CounterKey) int64 {
	t.Helper()
	var keys []quarantine.CounterKey
	for shard := range quarantine.CounterShards {
		keys = append(keys, key(shard))
	}
	got, err := cr.ReadCounters(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range got {
		n += v
	}
	return n
}

// RunCounters drives concurrent arrivals, re-failures, claims, sends,
// settles and parks through s, then compares every counter (read through
// cr and sr, caught up with every write) with a full recount of the
// records (read back through l).
func RunCounters(t *testing.T, s quarantine.Store, l quarantine.Lister, cr CounterReader, sr SignatureReader) {
	ctx := context.Background()
	source := UniqueID("csrc")
	src := &quarantine.Source{Name: source, ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, IdempotencyPointer: "/k", RedriveCap: 2}
	q := ingest.NewQuarantiner(s, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{source: src}})
	reasons := []string{"timeout", "db down", "bad lot"}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				key := fmt.Sprintf("k%d", (w*7+i)%40) // keys shared between workers
				reason := reasons[(w+i)%len(reasons)]
				m := ingest.Message{MessageID: fmt.Sprintf("m-%d-%d", w, i), SourceARN: src.ARN, Body: []byte(`{"k":"` + key + `"}`),
					Attributes: map[string]quarantine.Attribute{quarantine.AttrFailureReason: {DataType: "String", StringValue: reason}}}
				out, err := q.Quarantine(ctx, m)
				if err != nil {
					t.Error(err)
					return
				}
				// Move the record along, as redrive, settle and operators do.
				for attempt := 0; attempt < 5; attempt++ {
					r, err := s.Get(ctx, out.Record.DLQID)
					if err != nil {
						t.Error(err)
						return
					}
					now := time.Now()
					var next *quarantine.Record
					switch {
					case r.Status == quarantine.StatusQuarantined && (w+i)%3 == 0:
						next, err = r.Claim("w", now, time.Minute)
						if errors.Is(err, quarantine.ErrCapReached) {
							next, err = r.ParkPoison("w", now)
						}
					case r.Status == quarantine.StatusRedriving:
						next, err = r.MarkRedriven("w", "sent", now)
					case r.Status == quarantine.StatusRedriven && i%2 == 0:
						next, err = r.Settle(now, 0)
					default:
						attempt = 5
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					if err := s.Replace(ctx, r, next); err != nil && !errors.Is(err, quarantine.ErrVersionConflict) {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()

	// Full recount.
	type sc struct {
		st quarantine.Status
		c  quarantine.Class
	}
	want := map[sc]int64{}
	wantOpen := map[string]int64{}
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		lq := quarantine.ListQuery{Status: st, Source: source}
		for {
			page, err := l.List(ctx, lq)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range page.IDs {
				r, err := s.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				want[sc{r.Status, r.FailureClass}]++
				if r.Status == quarantine.StatusQuarantined {
					wantOpen[r.FailureSignature]++
				}
			}
			if page.Cursor == "" {
				break
			}
			lq.Cursor = page.Cursor
		}
	}
	total := int64(0)
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			got := StateCount(t, cr, source, st, c)
			total += got
			if got != want[sc{st, c}] {
				t.Errorf("counter %s/%s = %d, recount %d", st, c, got, want[sc{st, c}])
			}
		}
	}
	if total != 40 {
		t.Errorf("counters total %d records, want 40", total)
	}
	open, err := sr.OpenSignatures(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != len(wantOpen) {
		t.Errorf("open signatures %v, recount %v", open, wantOpen)
	}
	for sig, n := range wantOpen {
		if open[sig] != n {
			t.Errorf("open %q = %d, recount %d", sig, open[sig], n)
		}
	}
}
