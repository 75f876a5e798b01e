package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// Service is the ledger function.
type Service struct {
	Objects Objects
	State   State
	Signer  Signer
	Shards  Shards
	// Counts is nil when counting is off (the changes are only ledgered).
	Counts Counts
	Decode ImageDecoder
	// Metrics receives the EMF documents (nil drops them).
	Metrics io.Writer
	Log     *slog.Logger
	Now     func() time.Time
	Config  Config

	// Mappings, Canaries and OwnMappings check the pipeline in each
	// digest run (pipeline.go); nil turns that part of the check off.
	// Mappings lists the stream function's mappings on the stream,
	// OwnMappings the digest function's own mappings on any source (it
	// should have none).
	Mappings    Mappings
	Canaries    Canaries
	OwnMappings Mappings

	cache  segmentCache
	proven provenCache // proven.go
	shards shardCache
	tips   tipCache // tip.go
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// change is one ledgered stream record with its padded sequence number.
type change struct {
	rec    events.DynamoDBEventRecord
	padded string
}

// HandleStream ledgers one batch of a shard (design §5): the changes of
// records and policies become the shard's next segment (or segments, when
// an earlier try left one), the head advances, and the counters get the
// batch. A failure after the event was read is a partial batch response
// from the first record not fully processed; a malformed event, an event
// without a shard id, a batch that is not the mapping's (fromTheStream) and
// a broken chain are errors.
func (s *Service) HandleStream(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	resp := events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}
	if len(ev.Records) == 0 {
		// A tumbling window's final invoke may carry no record: nothing to
		// ledger or count, and it must succeed (Lambda holds the shard
		// until the final invoke does).
		return resp, nil
	}
	shard := ev.ShardID
	if shard == "" {
		return resp, errors.New("stream event without a shard id (the mapping needs a tumbling window)")
	}
	if err := s.fromTheStream(ctx, ev); err != nil {
		s.log().Error("ledger batch refused", "shard", shard, "records", len(ev.Records), "error", err.Error())
		return resp, err
	}
	changes, err := ledgeredChanges(ev.Records)
	if err != nil {
		return resp, err
	}
	if len(changes) == 0 {
		return resp, nil // nothing to ledger or count: no write at all
	}
	fail := func(from string, err error) (events.DynamoDBTimeWindowEventResponse, error) {
		s.log().Error("ledger batch failed", "shard", shard, "from_seq", from, "records", len(changes), "error", err.Error())
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: from}}
		return resp, nil
	}
	head, err := s.ledger(ctx, s.Config.StreamARN, shard, changes)
	if errors.Is(err, dl.ErrChainBroken) {
		s.log().Error("ledger chain broken", "shard", shard, "error", err.Error())
		return resp, err
	}
	if err != nil {
		// From the first change: one at or below the head may be a late
		// change not yet ledgered (the retry proves what is there).
		return fail(changes[0].rec.Change.SequenceNumber, err)
	}
	if s.Counts != nil {
		if err := s.count(ctx, head); err != nil {
			return fail(changes[0].rec.Change.SequenceNumber, fmt.Errorf("counters: %w", err))
		}
	}
	s.log().Info("ledger batch", "shard", shard, "records", len(ev.Records), "ledgered", len(changes), "head_seq", head.LastSeq)
	return resp, nil
}

// count counts the segments of head's chain after the counters'
// checkpoint, oldest first (read back from the bucket when they are not
// the ones this Service just wrote: after a crash between a segment's PUT
// and its counting, the retry counts it).
func (s *Service) count(ctx context.Context, head Head) error {
	done, err := s.Counts.Counted(ctx, head.Shard)
	if err != nil {
		return err
	}
	if done >= head.Segments {
		return nil
	}
	type ref struct{ key, sha string }
	refs := make([]ref, head.Segments-done)
	key, sha := head.SegmentKey, head.SegmentSHA256
	for i := len(refs) - 1; i >= 0; i-- {
		refs[i] = ref{key, sha}
		seg, err := s.segment(ctx, key, sha)
		if err != nil {
			return err
		}
		if seg.Prev == nil {
			if i > 0 {
				return fmt.Errorf("%w: shard %s's chain holds fewer than the head's %d segments", dl.ErrChainBroken, head.Shard, head.Segments)
			}
			break
		}
		key, sha = seg.Prev.Key, seg.Prev.SHA256
	}
	for i, r := range refs {
		seg, err := s.segment(ctx, r.key, r.sha)
		if err != nil {
			return err
		}
		if err := s.Counts.Count(ctx, head.Shard, done+1+int64(i), seg); err != nil {
			return err
		}
	}
	return nil
}

// ledgeredChanges keeps the records and policies of a batch, sorted by
// sequence number, each once. A record without a valid sequence number or
// key is an error.
func ledgeredChanges(recs []events.DynamoDBEventRecord) ([]change, error) {
	var out []change
	for i, r := range recs {
		key := r.Change.Keys[dl.KeyAttr]
		if key.DataType() != events.DataTypeString {
			return nil, fmt.Errorf("stream record %d has no %s key", i, dl.KeyAttr)
		}
		p, err := dl.PadSeq(r.Change.SequenceNumber)
		if err != nil {
			return nil, fmt.Errorf("stream record %d: %w", i, err)
		}
		if !dl.Kept(key.String()) { // records, policies and the canary (pipeline.go)
			continue
		}
		out = append(out, change{rec: r, padded: p})
	}
	slices.SortFunc(out, func(a, b change) int { return strings.Compare(a.padded, b.padded) })
	return slices.CompactFunc(out, func(a, b change) bool { return a.padded == b.padded }), nil
}

// entry is a change as the segment records it.
func (s *Service) entry(c change) (dl.Entry, error) {
	r := c.rec
	e := dl.Entry{Seq: r.Change.SequenceNumber, Event: r.EventName, Key: r.Change.Keys[dl.KeyAttr].String(),
		At: r.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339Nano)}
	var err error
	var old dl.Item
	if r.Change.OldImage != nil {
		if old, err = s.Decode(r.Change.OldImage); err != nil {
			return dl.Entry{}, fmt.Errorf("change %s: old image: %w", e.Seq, err)
		}
	}
	switch r.EventName {
	case dl.EventInsert, dl.EventModify:
		if r.Change.NewImage == nil {
			return dl.Entry{}, fmt.Errorf("change %s: %s without a new image (the stream must carry new and old images)", e.Seq, r.EventName)
		}
		if e.Item, err = s.Decode(r.Change.NewImage); err != nil {
			return dl.Entry{}, fmt.Errorf("change %s: new image: %w", e.Seq, err)
		}
	case dl.EventRemove:
		if old == nil {
			return dl.Entry{}, fmt.Errorf("change %s: REMOVE without an old image", e.Seq)
		}
		e.Removed = old
	default:
		return dl.Entry{}, fmt.Errorf("change %s: event %q", e.Seq, r.EventName)
	}
	if r.EventName != dl.EventInsert {
		e.OldItem = old // a segment alone determines its counter deltas
	}
	if v, ok := old.Int(dl.VersionAttr); ok && old.S(dl.SealAttr) != "" {
		e.Old = &dl.Old{Version: v, Seal: old.S(dl.SealAttr)}
	}
	return e, nil
}
