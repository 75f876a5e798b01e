package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// shardCache is the stream's last shard listing (shard id → parent).
type shardCache struct {
	mu     sync.Mutex
	shards map[string]string
}

// fromTheStream refuses a batch that is not the event source mapping's
// (review 2's R2-17: anyone allowed lambda:InvokeFunction can hand the
// function an event): the event and every record must name the ledger's
// stream (Config.StreamARN; an empty ARN is refused), and the shard must be
// one DescribeStream lists. It is checked before anything is written.
func (s *Service) fromTheStream(ctx context.Context, ev events.DynamoDBTimeWindowEvent) error {
	want := s.Config.StreamARN
	if want == "" {
		return errors.New("the ledger has no stream ARN configured (STREAM_ARN): every batch is refused")
	}
	switch ev.EventSourceARN {
	case want:
	case "":
		return errors.New("stream event without an eventSourceARN: not the ledger's stream mapping")
	default:
		return fmt.Errorf("stream event from %s, not the ledger's stream", ev.EventSourceARN)
	}
	for i, r := range ev.Records {
		if r.EventSourceArn != want {
			return fmt.Errorf("stream event record %d (seq %q) names eventSourceARN %q, not the ledger's stream", i, r.Change.SequenceNumber, r.EventSourceArn)
		}
	}
	if _, ok, err := s.shard(ctx, ev.ShardID); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("stream event for shard %q: not a shard of the stream (DescribeStream does not list it)", ev.ShardID)
	}
	return nil
}

// shard looks a shard up in the cached listing, listing the stream again
// once when it is not there (a split adds shards); ok is false when the
// fresh listing does not have it either.
func (s *Service) shard(ctx context.Context, id string) (parent string, ok bool, err error) {
	if s.Shards == nil {
		return "", false, errors.New("the ledger has no shard listing (DescribeStream) configured")
	}
	c := &s.shards
	c.mu.Lock()
	defer c.mu.Unlock()
	if parent, ok := c.shards[id]; ok {
		return parent, true, nil
	}
	listed, err := s.Shards.Shards(ctx)
	if err != nil {
		return "", false, fmt.Errorf("list shards: %w", err)
	}
	c.shards = maps.Clone(listed)
	parent, ok = c.shards[id]
	return parent, ok, nil
}

// parentOf is shard's parent shard id as DescribeStream names it ("" when
// it has none or the stream does not list the shard).
func (s *Service) parentOf(ctx context.Context, shard string) (string, error) {
	parent, _, err := s.shard(ctx, shard)
	return parent, err
}
