package policy

import (
	"context"
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// CounterReader reads summed counter shards.
type CounterReader interface {
	ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// Counts returns what a policy sent and what came back, over all time.
func Counts(ctx context.Context, cr CounterReader, source, id string) (sent, cameBack int64, err error) {
	var keys []quarantine.CounterKey
	for shard := range quarantine.CounterShards {
		keys = append(keys, quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicySent, shard),
			quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicyCameBack, shard))
	}
	got, err := cr.ReadCounters(ctx, keys)
	if err != nil {
		return 0, 0, fmt.Errorf("read policy counters: %w", err)
	}
	for shard := range quarantine.CounterShards {
		sent += got[quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicySent, shard)]
		cameBack += got[quarantine.PolicyCounterKey(source, id, quarantine.CounterPolicyCameBack, shard)]
	}
	return sent, cameBack, nil
}
