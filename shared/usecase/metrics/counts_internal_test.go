package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// splitCounters answers every counter with 1 and records which keys each
// kind of read asked for.
type splitCounters struct {
	consistent, eventual []quarantine.CounterKey
}

func ones(keys []quarantine.CounterKey) map[quarantine.CounterKey]int64 {
	out := map[quarantine.CounterKey]int64{}
	for _, k := range keys {
		out[k] = 1
	}
	return out
}

func (s *splitCounters) ReadCounters(_ context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	s.consistent = append(s.consistent, keys...)
	return ones(keys), nil
}

func (s *splitCounters) ReadCountersEventually(_ context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	s.eventual = append(s.eventual, keys...)
	return ones(keys), nil
}

// The gauges (records by state and class) are read eventually
// consistent, at half the read units: a change a read misses, the next
// run reads. The time buckets of the arrivals and of the success window
// are read consistently, since each is read by one or two runs only and a
// change a read missed there would never be published; and so are the
// counts the marks move by (holds, poison by hour), which a read behind a
// fresher one would put below their mark (ErrMarksAhead). The sums are
// the same either way.
func TestGaugesAreReadEventuallyAndBucketsConsistently(t *testing.T) {
	c := &splitCounters{}
	s := &Service{Counters: c}
	rep := &Report{Records: map[string]int64{}}
	now := time.Date(2026, 12, 7, 12, 30, 10, 0, time.UTC)
	if err := s.counts(context.Background(), &quarantine.Source{Name: "src"}, now, rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range c.eventual {
		if k.Kind != quarantine.CounterState {
			t.Errorf("%+v read eventually consistent: only the state gauges may be", k)
		}
	}
	for _, k := range c.consistent {
		if k.Kind == quarantine.CounterState {
			t.Errorf("%+v, a gauge, read consistently", k)
		}
		if k.Bucket.IsZero() && k.Kind != quarantine.CounterHeld {
			t.Errorf("%+v read consistently without a bucket", k)
		}
	}
	shards := int64(quarantine.CounterShards)
	if want := int64(len(allStatuses)*len(allClasses)) * shards; int64(len(c.eventual)) != want {
		t.Errorf("%d gauges read eventually, want %d", len(c.eventual), want)
	}
	if rep.IntegrityHolds != shards || rep.Poison != shards || rep.ArrivalsPerMinute != shards {
		t.Errorf("sums %+v", rep)
	}
	for i := range poisonWindow {
		if h := now.Truncate(time.Hour).Add(-time.Duration(i) * time.Hour); rep.poisoned[h] != shards {
			t.Errorf("poison of %s: %d, want %d (%v)", h, rep.poisoned[h], shards, rep.poisoned)
		}
	}
	if len(rep.poisoned) != poisonWindow {
		t.Errorf("poison of %d hours, want %d", len(rep.poisoned), poisonWindow)
	}
	// A store without eventual reads is read consistently throughout.
	only := &consistentOnly{}
	if err := (&Service{Counters: only}).counts(context.Background(), &quarantine.Source{Name: "src"}, time.Now(), &Report{Records: map[string]int64{}}); err != nil {
		t.Fatal(err)
	}
	if len(only.keys) != len(c.consistent)+len(c.eventual) {
		t.Errorf("%d keys read, want %d", len(only.keys), len(c.consistent)+len(c.eventual))
	}
}

type consistentOnly struct{ keys []quarantine.CounterKey }

func (c *consistentOnly) ReadCounters(_ context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	c.keys = append(c.keys, keys...)
	return ones(keys), nil
}
