package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// tipCache keeps, per shard, the head this process last proved or
// advanced: a table head equal to it needs no proof (only the ledger
// writes the head, one batch per shard at a time), and the signing key's
// public part.
type tipCache struct {
	mu   sync.Mutex
	tips map[string]Head
	pub  []byte
}

// sameHead reports whether two heads name the same point of a chain.
func sameHead(a, b Head) bool {
	return a.Shard == b.Shard && a.SegmentKey == b.SegmentKey && a.SegmentSHA256 == b.SegmentSHA256 &&
		a.Segments == b.Segments && a.LastSeq == b.LastSeq
}

// streamReserve is the part of a batch's time kept, after the head's
// walk, for writing the batch's segment and head.
const streamReserve = 10 * time.Second

func (s *Service) knownTip(shard string) (Head, bool) {
	s.tips.mu.Lock()
	defer s.tips.mu.Unlock()
	h, ok := s.tips.tips[shard]
	return h, ok
}

func (s *Service) forgetTip(shard string) {
	s.tips.mu.Lock()
	defer s.tips.mu.Unlock()
	delete(s.tips.tips, shard)
}

func (s *Service) setTip(h Head) {
	s.tips.mu.Lock()
	defer s.tips.mu.Unlock()
	if s.tips.tips == nil {
		s.tips.tips = map[string]Head{}
	}
	s.tips.tips[h.Shard] = h
}

// trueTip returns the head the stream handler may write after: the true
// tip of the shard's chain in the bucket. The table's head (head; ok
// false when there is none) is taken as it is when it is the one this
// process last advanced. Otherwise it must be proven (walkChain) against
// the newest signed digest's head of the shard (or the shard's root), and
// no segment of the bucket may already follow it. A head that is proven
// but that segments follow (a crash left them, or the head was rolled
// back along its own chain) is moved to the chain's end; one that is not
// proven is rebuilt from the signed head by following the chain in the
// bucket, and the head item rewritten to it (an error log and
// MetricHeadsUnproven). When neither works (a fork or a gap in the
// bucket, the signed head itself not there) it fails with
// dl.ErrChainBroken and nothing is written.
func (s *Service) trueTip(ctx context.Context, shard string, head Head, ok bool) (Head, error) {
	if !ok {
		head = Head{Shard: shard}
	}
	if t, known := s.knownTip(shard); known && sameHead(t, head) {
		// Still the tip only if nothing follows it: another process may
		// have advanced the shard since and the head been rolled back to
		// this value (a late successor's key sorts below the head's).
		keys, err := s.Objects.List(ctx, dl.SegmentPrefix+shard+"/", "")
		if err != nil {
			return head, fmt.Errorf("list segments: %w", err)
		}
		if int64(len(keys)) <= head.Segments {
			return head, nil
		}
		s.forgetTip(shard)
	}
	anchor, err := s.signedAnchor(ctx, shard)
	if err != nil {
		return head, err
	}
	if err := s.proveAnchor(ctx, anchor); err != nil {
		return head, err
	}
	walkCtx, cancel := ctx, context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		walkCtx, cancel = context.WithDeadline(ctx, deadline.Add(-streamReserve))
	}
	path, base, perr := s.walkChain(walkCtx, head, anchor)
	cancel()
	if isRead(perr) || errors.Is(perr, errNotReached) {
		// Nothing proven either way: the batch fails and is retried.
		return head, fmt.Errorf("shard %s: prove the head: %w", shard, perr)
	}
	if perr == nil {
		// Proven; segments the listing after it finds (an earlier try's)
		// are adopted as before, then the shard's count must match.
		for range maxSteps {
			h, adopted, err := s.adoptNext(ctx, head)
			if err != nil {
				return head, err
			}
			if !adopted {
				break
			}
			head = h
		}
		if err := s.forkFree(ctx, head, base, path); err != nil {
			if isRead(err) {
				return head, err
			}
			s.forgetProven(shard)
			return head, fmt.Errorf("%w: shard %s: %v", dl.ErrChainBroken, shard, err)
		}
		s.provePath(path)
	}
	keys, err := s.Objects.List(ctx, dl.SegmentPrefix+shard+"/", "")
	if err != nil {
		return head, fmt.Errorf("list segments: %w", err)
	}
	if perr == nil && int64(len(keys)) <= head.Segments {
		s.setTip(head)
		return head, nil
	}
	// Unproven, or the bucket holds segments the head does not count:
	// follow the chain in the bucket from the last proven point.
	start, from := head, "the head"
	if perr != nil {
		start = Head{Shard: shard, LastSeq: anchor.LastSeq, SegmentKey: anchor.SegmentKey, SegmentSHA256: anchor.SegmentSHA256,
			Segments: anchor.Segments, AnchoredSeq: head.AnchoredSeq}
		from = "the signed head"
	}
	kids, err := s.segmentsOf(ctx, shard, keys, nil)
	if err != nil {
		return head, err
	}
	tip, err := s.follow(ctx, start, kids)
	if err != nil {
		return head, err
	}
	if perr == nil && sameHead(tip, head) {
		s.log().Warn("ledger shard holds segments off its chain (dlqctl verify names them)", "shard", shard, "segments", len(keys), "chain", head.Segments)
		s.setTip(head)
		return head, nil
	}
	if tip.SegmentKey == "" {
		return head, fmt.Errorf("%w: shard %s's head is unproven (%s) and the bucket holds no chain to rebuild it from", dl.ErrChainBroken, shard, capped(perr.Error()))
	}
	if perr != nil {
		s.log().Error("ledger shard head unproven: rebuilt from the bucket", "shard", shard, "segment_key", capped(head.SegmentKey),
			"segments", head.Segments, "rebuilt_key", tip.SegmentKey, "rebuilt_segments", tip.Segments, "reason", capped(perr.Error()))
		s.emitUnproven(s.now(), 1)
	} else {
		s.log().Warn("ledger shard head behind its chain: moved to the chain's end", "shard", shard, "from", from,
			"segment_key", head.SegmentKey, "to", tip.SegmentKey, "segments", tip.Segments)
	}
	prev := head.SegmentKey
	if !ok {
		prev = ""
	}
	tip.UpdatedAt = s.now()
	if err := s.State.AdvanceHead(ctx, tip, prev, s.now()); err != nil {
		got, gok, rerr := s.State.Head(ctx, shard)
		if rerr != nil || !gok || !sameHead(got, tip) {
			return head, errors.Join(fmt.Errorf("rewrite head of shard %s: %w", shard, err), rerr)
		}
		tip = got // applied; the answer was lost
	}
	s.setTip(tip)
	return tip, nil
}

// follow walks the chain of kids (segments by their prev) forward from
// start to its end, each segment checked to be adoptable (one version)
// and to follow the chain before it; a fork is a broken chain.
func (s *Service) follow(ctx context.Context, start Head, kids map[dl.Ref][]chainNode) (Head, error) {
	cur := start
	var ref dl.Ref
	if start.SegmentKey != "" {
		ref = dl.Ref{Key: start.SegmentKey, SHA256: start.SegmentSHA256}
	}
	seen := map[string]bool{}
	for {
		ks := kids[ref]
		switch {
		case len(ks) == 0:
			return cur, nil
		case len(ks) > 1:
			return cur, fmt.Errorf("%w: shard %s forks: %s and %s both follow %q", dl.ErrChainBroken, start.Shard, ks[0].key, ks[1].key, ref.Key)
		}
		n := ks[0]
		if seen[n.key] {
			return cur, fmt.Errorf("%w: shard %s's chain loops at %s", dl.ErrChainBroken, start.Shard, n.key)
		}
		seen[n.key] = true
		if !follows(cur.LastSeq, n.seg) {
			return cur, fmt.Errorf("%w: segment %s does not follow its chain's end %s", dl.ErrChainBroken, n.key, cur.LastSeq)
		}
		if err := s.adoptable(ctx, n.key); err != nil {
			return cur, err
		}
		last, err := dl.PadSeq(n.seg.LastSeq)
		if err != nil {
			return cur, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, n.key, err)
		}
		cur = Head{Shard: start.Shard, LastSeq: max(last, cur.LastSeq), SegmentKey: n.key, SegmentSHA256: n.sha,
			Segments: cur.Segments + 1, AnchoredSeq: cur.AnchoredSeq}
		ref = n.ref()
	}
}

// signedAnchor is the shard's head in the newest signed digest of the
// bucket (an empty head when there is none or it names none): the digest
// head item's digest, or a newer one the bucket holds after it (the item
// may be behind, or rewritten), its signature checked.
func (s *Service) signedAnchor(ctx context.Context, shard string) (dl.Head, error) {
	none := dl.Head{Shard: shard}
	dh, ok, err := s.State.DigestHead(ctx)
	if err != nil {
		return none, fmt.Errorf("read digest head: %w", err)
	}
	after := ""
	if ok {
		after = dh.Key
	}
	keys, err := s.Objects.List(ctx, dl.DigestPrefix, after)
	if err != nil {
		return none, fmt.Errorf("list digests: %w", err)
	}
	key := after
	if len(keys) > 0 {
		key = keys[len(keys)-1]
	}
	if key == "" {
		return none, nil
	}
	raw, err := s.Objects.Get(ctx, key)
	if errors.Is(err, dl.ErrNotFound) && ok && len(keys) == 0 {
		// The item names a digest the bucket does not hold: the bucket's
		// newest is the one to trust.
		if keys, err = s.Objects.List(ctx, dl.DigestPrefix, ""); err != nil {
			return none, fmt.Errorf("list digests: %w", err)
		}
		if len(keys) == 0 {
			return none, fmt.Errorf("%w: the digest head names %s, and the bucket holds no digest", dl.ErrChainBroken, dh.Key)
		}
		key = keys[len(keys)-1]
		raw, err = s.Objects.Get(ctx, key)
	}
	if err != nil {
		return none, fmt.Errorf("read digest %s: %w", key, err)
	}
	d, err := dl.ParseDigest(raw)
	if err != nil || dl.DigestKey(d.N) != key {
		return none, fmt.Errorf("%w: %s is not a well-formed digest under its own key (%v)", dl.ErrChainBroken, key, err)
	}
	pub, err := s.publicKey(ctx)
	if err != nil {
		return none, err
	}
	if err := dl.VerifyDigest(d, pub); err != nil {
		return none, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
	}
	for _, h := range d.Shards {
		if h.Shard == shard && h.SegmentKey != "" {
			return h, nil
		}
	}
	return none, nil
}

// publicKey is the signing key's public part (read once per process).
func (s *Service) publicKey(ctx context.Context) ([]byte, error) {
	s.tips.mu.Lock()
	pub := s.tips.pub
	s.tips.mu.Unlock()
	if pub != nil {
		return pub, nil
	}
	pub, err := s.Signer.PublicKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	s.tips.mu.Lock()
	s.tips.pub = pub
	s.tips.mu.Unlock()
	return pub, nil
}
