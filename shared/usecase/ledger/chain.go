package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// maxSteps bounds the segments one batch adopts or writes (each step
// advances the head, so it is never reached on a sound chain).
const maxSteps = 1000

// ledger writes a batch's changes after the shard's head: first it adopts
// the segments an earlier try wrote but did not record in the head (the
// answer lost, or a crash between the PUT and the head's update), then it
// writes the changes the chain does not hold yet as one segment. It
// returns the head it leaves. After a failure the process forgets the
// shard's tip (tip.go): a segment whose answer was lost is then found by
// the next batch's proof even when a late key hides it from the listing.
func (s *Service) ledger(ctx context.Context, arn, shard string, changes []change) (_ Head, err error) {
	defer func() {
		if err != nil {
			s.forgetTip(shard)
		}
	}()
	head, ok, err := s.State.Head(ctx, shard)
	if err != nil {
		return Head{Shard: shard}, fmt.Errorf("read head: %w", err)
	}
	// Never write after a head that is not the chain's true tip (tip.go).
	if head, err = s.trueTip(ctx, shard, head, ok); err != nil {
		return head, err
	}
	for range maxSteps {
		if head, ok, err = s.adoptNext(ctx, head); err != nil {
			return head, err
		} else if ok {
			continue
		}
		entries, err := s.unledgered(ctx, head, changes)
		if err != nil {
			return head, err
		}
		if len(entries) == 0 {
			return head, nil
		}
		seg, err := dl.NewSegment(arn, shard, prevRef(head), entries)
		if err != nil {
			return head, err
		}
		if head.SegmentKey == "" {
			if seg.ParentShard, err = s.parentOf(ctx, shard); err != nil {
				return head, err
			}
		}
		raw, err := seg.Encode()
		if err != nil {
			return head, fmt.Errorf("encode segment: %w", err)
		}
		key := dl.SegmentKey(shard, seg.FirstSeq)
		err = s.Objects.PutIfAbsent(ctx, key, raw, s.now().Add(s.Config.Retention))
		switch {
		case errors.Is(err, dl.ErrExists):
			// An earlier try wrote this key and its answer was lost, or a
			// concurrent one did: adopt what is there (the next step).
			if head, err = s.adopt(ctx, head, key); err != nil {
				return head, err
			}
		case err != nil:
			return head, fmt.Errorf("put segment %s: %w", key, err)
		default:
			s.remember(key, dl.SHA256Hex(raw), seg)
			if head, err = s.advance(ctx, head, key, raw, seg); err != nil {
				return head, err
			}
		}
	}
	return head, fmt.Errorf("shard %s: more than %d segments in one batch", shard, maxSteps)
}

func prevRef(h Head) *dl.Ref {
	if h.SegmentKey == "" {
		return nil
	}
	return &dl.Ref{Key: h.SegmentKey, SHA256: h.SegmentSHA256}
}

// adoptNext adopts the first segment after the head's, if an earlier try
// left one.
func (s *Service) adoptNext(ctx context.Context, head Head) (Head, bool, error) {
	// A segment after the head starts after the chain's last seq (a late
	// segment sorts before it: its retry meets it through the 412).
	after := head.SegmentKey
	if head.LastSeq != "" {
		after = max(after, dl.SegmentKey(head.Shard, head.LastSeq))
	}
	keys, err := s.Objects.List(ctx, dl.SegmentPrefix+head.Shard+"/", after)
	if err != nil {
		return head, false, fmt.Errorf("list segments: %w", err)
	}
	if len(keys) == 0 {
		return head, false, nil
	}
	h, err := s.adopt(ctx, head, keys[0])
	return h, err == nil, err
}

// adopt reads the segment under key and advances the head to it if it
// chains to the head; a segment that does not is a broken chain.
func (s *Service) adopt(ctx context.Context, head Head, key string) (Head, error) {
	if err := s.adoptable(ctx, key); err != nil {
		return head, err
	}
	raw, err := s.Objects.Get(ctx, key)
	if err != nil {
		return head, fmt.Errorf("read segment %s: %w", key, err)
	}
	seg, err := dl.ParseSegment(raw)
	if err != nil {
		return head, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
	}
	prev := prevRef(head)
	chains := seg.Shard == head.Shard && key == dl.SegmentKey(seg.Shard, seg.FirstSeq) &&
		(prev == nil) == (seg.Prev == nil) && (prev == nil || *prev == *seg.Prev) && follows(head.LastSeq, seg)
	if !chains {
		return head, fmt.Errorf("%w: segment %s does not follow the head of shard %s (%s)", dl.ErrChainBroken, key, head.Shard, head.SegmentKey)
	}
	s.remember(key, dl.SHA256Hex(raw), seg)
	s.log().Warn("ledger adopted a segment an earlier try wrote", "shard", head.Shard, "key", key)
	return s.advance(ctx, head, key, raw, seg)
}

// advance moves the head to the segment under key. An update whose answer
// was lost (an error, or a condition failing on its own earlier success)
// is recognised by reading the head back.
func (s *Service) advance(ctx context.Context, head Head, key string, raw []byte, seg dl.Segment) (Head, error) {
	last, err := dl.PadSeq(seg.LastSeq)
	if err != nil {
		return head, err
	}
	last = max(last, head.LastSeq) // a segment of late changes ends below the head
	next := Head{Shard: head.Shard, LastSeq: last, SegmentKey: key, SegmentSHA256: dl.SHA256Hex(raw),
		Segments: head.Segments + 1, AnchoredSeq: head.AnchoredSeq, UpdatedAt: s.now(), Canary: max(head.Canary, segmentCanary(seg))}
	pending := s.now()
	for _, e := range seg.Entries {
		if at, perr := time.Parse(time.RFC3339Nano, e.At); perr == nil && !at.IsZero() && at.Before(pending) {
			pending = at
		}
	}
	err = s.State.AdvanceHead(ctx, next, head.SegmentKey, pending)
	if err == nil {
		s.setTip(next)
		s.markHeadProven(next, prevRef(head)) // written or adopted after a proven tip
		return next, nil
	}
	got, ok, rerr := s.State.Head(ctx, head.Shard)
	if rerr == nil && ok && got.SegmentKey == next.SegmentKey && got.SegmentSHA256 == next.SegmentSHA256 {
		s.setTip(got)
		s.markHeadProven(next, prevRef(head))
		return got, nil // applied; the answer was lost
	}
	return head, errors.Join(fmt.Errorf("advance head of shard %s: %w", head.Shard, err), rerr)
}

// follows reports whether seg can follow a head at lastSeq: its entries
// after lastSeq, except late ones, which are before it.
func follows(lastSeq string, seg dl.Segment) bool {
	for _, e := range seg.Entries {
		if lastSeq != "" && e.Late != dl.SeqLess(e.Seq, lastSeq) {
			return false
		}
		if lastSeq == "" && e.Late {
			return false
		}
	}
	return true
}
