package ledger

import (
	"context"
	"fmt"
	"sync"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// maxWalk bounds the segments read back to prove that a batch's changes
// at or below the head are in the chain (a retry replays the batch just
// written: normally one segment).
const maxWalk = 1000

// segmentCacheSize is how many segments a Service keeps between batches
// (segments are immutable: a cached one is always right).
const segmentCacheSize = 8

// segmentCache holds the segments a Service wrote or read last, with the
// SHA-256 of their bytes.
type segmentCache struct {
	mu    sync.Mutex
	segs  map[string]cachedSegment
	order []string
}

type cachedSegment struct {
	seg dl.Segment
	sha string
}

// remember caches the segment under key, whose bytes hash to sha.
func (s *Service) remember(key, sha string, seg dl.Segment) {
	c := &s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.segs == nil {
		c.segs = map[string]cachedSegment{}
	}
	if _, ok := c.segs[key]; ok {
		return
	}
	c.segs[key] = cachedSegment{seg: seg, sha: sha}
	c.order = append(c.order, key)
	if len(c.order) > segmentCacheSize {
		delete(c.segs, c.order[0])
		c.order = c.order[1:]
	}
}

// segment reads the segment under key (from the cache when it is there),
// checking that its bytes hash to sha (what the head or the next segment
// says; a cached segment is checked against the hash of the bytes it was
// read or written as).
func (s *Service) segment(ctx context.Context, key, sha string) (dl.Segment, error) {
	s.cache.mu.Lock()
	c, ok := s.cache.segs[key]
	s.cache.mu.Unlock()
	if ok {
		if c.sha != sha {
			return dl.Segment{}, fmt.Errorf("%w: segment %s does not hash to %s", dl.ErrChainBroken, key, sha)
		}
		return c.seg, nil
	}
	raw, err := s.Objects.Get(ctx, key)
	if err != nil {
		return dl.Segment{}, fmt.Errorf("read segment %s: %w", key, asRead(err))
	}
	if dl.SHA256Hex(raw) != sha {
		return dl.Segment{}, fmt.Errorf("%w: segment %s does not hash to %s", dl.ErrChainBroken, key, sha)
	}
	seg, err := dl.ParseSegment(raw)
	if err != nil {
		return dl.Segment{}, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
	}
	s.remember(key, sha, seg)
	return seg, nil
}

// unledgered returns the entries of the changes the chain under head does
// not hold: those after the head, and those at or below it that are in no
// segment (a retry delivered out of order: marked late). "At or below the
// head" is proven by reading the chain back from the head until a segment
// holds a not-late entry at or below the oldest such change (every entry
// of the segments before it is below that entry).
func (s *Service) unledgered(ctx context.Context, head Head, changes []change) ([]dl.Entry, error) {
	var entries []dl.Entry
	var below []change
	for _, c := range changes {
		if head.LastSeq != "" && c.padded <= head.LastSeq {
			below = append(below, c)
			continue
		}
		e, err := s.entry(c)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(below) == 0 {
		return entries, nil
	}
	present := map[string]bool{}
	oldest := below[0].padded
	key, sha := head.SegmentKey, head.SegmentSHA256
	for steps := 0; ; steps++ {
		if steps == maxWalk {
			return nil, fmt.Errorf("shard %s: change %s not found in the %d segments before the head", head.Shard, below[0].rec.Change.SequenceNumber, maxWalk)
		}
		seg, err := s.segment(ctx, key, sha)
		if err != nil {
			return nil, err
		}
		done := seg.Prev == nil
		for _, e := range seg.Entries {
			p, err := dl.PadSeq(e.Seq)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
			}
			present[p] = true
			done = done || (!e.Late && p <= oldest)
		}
		if done {
			break
		}
		key, sha = seg.Prev.Key, seg.Prev.SHA256
	}
	for _, c := range below {
		if present[c.padded] {
			continue
		}
		e, err := s.entry(c)
		if err != nil {
			return nil, err
		}
		e.Late = true
		entries = append(entries, e)
		s.log().Warn("ledger change arrived after a later one (a retry out of order): ledgered late", "shard", head.Shard, "seq", c.rec.Change.SequenceNumber)
	}
	return entries, nil
}
