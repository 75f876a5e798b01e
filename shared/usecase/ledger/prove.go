package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// MetricHeadsUnproven counts the shard heads of the table that the ledger
// could not prove against the bucket (issue 25, part A): the digest run
// publishes it every run (0 when every head was proven), the stream
// handler when it rebuilt a head from the bucket.
const MetricHeadsUnproven = "LedgerHeadsUnproven"

// proveReserve is the part of a digest run's time kept for signing,
// writing and recording the digest after the heads' walks;
// defaultProveBudget bounds the walks of a run whose context has no
// deadline.
const (
	proveReserve       = 20 * time.Second
	defaultProveBudget = time.Minute
)

// errNotReached: a walk that did not finish within the run's time.
var errNotReached = errors.New(dl.ReasonNotReached)

// chainNode is a segment with its key and the SHA-256 of its bytes.
type chainNode struct {
	key, sha string
	seg      dl.Segment
}

func (n chainNode) ref() dl.Ref { return dl.Ref{Key: n.key, SHA256: n.sha} }

// walkChain checks that h (a head item as the table holds it) is a tip of
// its shard's chain in the bucket that extends anchor (the previous signed
// digest's head of the shard, or one the ledger proved; an empty anchor is
// the shard's root): h's segment is there and hashes to h's
// segment_sha256, each segment read is a well-formed segment of the shard
// under its own key, the chain reaches anchor (following prev, each hash
// checked) in exactly h.Segments − anchor.Segments steps, neither the
// count nor last_seq went backwards, each segment follows the chain before
// it (late entries below its end, the others after it), and h's last_seq
// is the highest seq of the chain (a late segment ends below it, as
// Verify computes it). It reads one segment per step (the cache first)
// and stops when ctx is done (errNotReached).
// It returns the segments walked (h's first, the one after anchor last).
func (s *Service) walkChain(ctx context.Context, h Head, anchor dl.Head) ([]chainNode, error) {
	if h.SegmentKey == "" {
		if anchor.SegmentKey != "" {
			return nil, fmt.Errorf("the head is empty, the anchored head is %s (%d segments): it went backwards", anchor.SegmentKey, anchor.Segments)
		}
		if h.Segments != 0 || h.LastSeq != "" || h.SegmentSHA256 != "" {
			return nil, fmt.Errorf("a head without a segment counts %d segments up to %q", h.Segments, h.LastSeq)
		}
		return nil, nil
	}
	if !dl.ValidSeq(h.LastSeq) {
		return nil, fmt.Errorf("the head's last_seq %q is not a sequence number", h.LastSeq)
	}
	if h.Segments < anchor.Segments {
		return nil, fmt.Errorf("the head counts %d segments, the anchored head %d: it went backwards", h.Segments, anchor.Segments)
	}
	if anchor.LastSeq != "" && dl.SeqLess(h.LastSeq, anchor.LastSeq) {
		return nil, fmt.Errorf("the head ends at %s, the anchored head at %s: it went backwards", h.LastSeq, anchor.LastSeq)
	}
	steps := h.Segments - anchor.Segments
	if steps == 0 {
		if h.SegmentKey != anchor.SegmentKey || h.SegmentSHA256 != anchor.SegmentSHA256 || dl.SeqCompare(h.LastSeq, anchor.LastSeq) != 0 {
			return nil, fmt.Errorf("the head counts as many segments as the anchored head (%d) but is not it (%s)", h.Segments, anchor.SegmentKey)
		}
		return nil, nil
	}
	var want *dl.Ref
	if anchor.SegmentKey != "" {
		want = &dl.Ref{Key: anchor.SegmentKey, SHA256: anchor.SegmentSHA256}
	}
	var segs []dl.Segment // newest first
	var path []chainNode
	key, sha := h.SegmentKey, h.SegmentSHA256
	for i := int64(0); i < steps; i++ {
		if ctx.Err() != nil {
			return nil, errNotReached
		}
		seg, err := s.segment(ctx, key, sha)
		if err != nil {
			if ctx.Err() != nil {
				return nil, errNotReached
			}
			return nil, err
		}
		if seg.Shard != h.Shard || key != dl.SegmentKey(seg.Shard, seg.FirstSeq) {
			return nil, fmt.Errorf("%s is not a segment of shard %s under its own key", key, h.Shard)
		}
		segs = append(segs, seg)
		path = append(path, chainNode{key: key, sha: sha, seg: seg})
		atAnchor := (want == nil && seg.Prev == nil) || (want != nil && seg.Prev != nil && *seg.Prev == *want)
		switch {
		case i == steps-1 && !atAnchor:
			return nil, fmt.Errorf("the chain does not reach the anchored head %q in the %d segments the head counts beyond it", anchor.SegmentKey, steps)
		case i < steps-1 && atAnchor:
			return nil, fmt.Errorf("the chain reaches the anchored head %q after %d segments, the head counts %d", anchor.SegmentKey, i+1, steps)
		case i < steps-1 && seg.Prev == nil:
			return nil, fmt.Errorf("the chain reaches the shard's first segment after %d segments, the head counts %d beyond the anchored head", i+1, steps)
		}
		if seg.Prev != nil {
			key, sha = seg.Prev.Key, seg.Prev.SHA256
		}
	}
	last := anchor.LastSeq
	for i := len(segs) - 1; i >= 0; i-- {
		if !follows(last, segs[i]) {
			return nil, fmt.Errorf("segment %s does not follow its chain's end %s", dl.SegmentKey(segs[i].Shard, segs[i].FirstSeq), last)
		}
		if last == "" || dl.SeqLess(last, segs[i].LastSeq) {
			last = segs[i].LastSeq
		}
	}
	if dl.SeqCompare(last, h.LastSeq) != 0 {
		return nil, fmt.Errorf("the head ends at %s, its chain at %s", h.LastSeq, last)
	}
	return path, nil
}

// proveAnchor checks that an anchored head (a signed digest's) is in the
// bucket as signed: its segment is there, hashes to it, and is a segment
// of its shard under its own key. A failure that is not the context's is
// a broken chain: nothing after it can be proven.
func (s *Service) proveAnchor(ctx context.Context, anchor dl.Head) error {
	if anchor.SegmentKey == "" {
		return nil
	}
	seg, err := s.segment(ctx, anchor.SegmentKey, anchor.SegmentSHA256)
	switch {
	case err != nil && ctx.Err() != nil:
		return errNotReached
	case errors.Is(err, dl.ErrNotFound):
		return fmt.Errorf("%w: shard %s's signed head %s is not in the bucket", dl.ErrChainBroken, anchor.Shard, anchor.SegmentKey)
	case err != nil:
		return err
	case seg.Shard != anchor.Shard || anchor.SegmentKey != dl.SegmentKey(seg.Shard, seg.FirstSeq):
		return fmt.Errorf("%w: shard %s's signed head %s is not a segment of the shard under its own key", dl.ErrChainBroken, anchor.Shard, anchor.SegmentKey)
	}
	return nil
}

// proveHeads proves each shard head read from the table (heads) of the
// shards the stream lists (shards) against the previous digest (prev;
// nil: none) before a digest signs it. A head that
// is proven is signed as it is; one that is not keeps the previous
// digest's head of its shard (the last proven one; none when the previous
// digest has none) and is returned in unproven, with its reason, sorted by
// shard. sign holds the heads to sign (the table's proven heads and the
// kept ones). A previous digest's head that is not in the bucket as
// signed fails the run (dl.ErrChainBroken; it is in unproven too): it is
// never signed again.
// The walks share the run's time (ctx's deadline less proveReserve): a
// shard not proven by then is unproven as dl.ReasonNotReached, and the
// next run continues.
func (s *Service) proveHeads(ctx context.Context, prev *dl.Digest, shards map[string]string, heads map[string]Head) (sign map[string]Head, unproven []dl.UnprovenHead, err error) {
	var cancel context.CancelFunc
	if deadline, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-proveReserve))
	} else {
		ctx, cancel = context.WithTimeout(ctx, defaultProveBudget)
	}
	defer cancel()
	anchors := map[string]dl.Head{}
	if prev != nil {
		for _, h := range prev.Shards {
			if h.SegmentKey != "" {
				anchors[h.Shard] = h
			}
		}
	}
	sign = map[string]Head{}
	var broken []error
	for _, shard := range slices.Sorted(maps.Keys(shards)) {
		h, hasHead := heads[shard]
		anchor, hasAnchor := anchors[shard]
		if !hasHead && !hasAnchor {
			continue // no chain yet
		}
		// A listed shard whose head item is gone but that the previous
		// digest anchors is proven too (as an empty head: it went back).
		h.Shard, anchor.Shard = shard, shard
		perr := s.proveAnchor(ctx, anchor)
		if perr != nil && !errors.Is(perr, errNotReached) {
			broken = append(broken, perr)
			unproven = append(unproven, dl.UnprovenHead{Shard: shard, SegmentKey: h.SegmentKey, SegmentSHA256: h.SegmentSHA256,
				Segments: h.Segments, LastSeq: h.LastSeq, Reason: perr.Error()})
			s.log().Error("ledger shard's signed head is not in the bucket as signed: no digest is signed", "shard", shard,
				"signed", anchor.SegmentKey, "error", perr.Error())
			continue
		}
		if perr == nil {
			var path []chainNode
			if path, perr = s.walkChain(ctx, h, anchor); perr == nil {
				perr = s.forkFree(ctx, h, anchor, path)
			}
		}
		if perr == nil {
			sign[shard] = h
			continue
		}
		unproven = append(unproven, dl.UnprovenHead{Shard: shard, SegmentKey: h.SegmentKey, SegmentSHA256: h.SegmentSHA256,
			Segments: h.Segments, LastSeq: h.LastSeq, Reason: perr.Error()})
		s.log().Error("ledger shard head unproven: the digest keeps the previous digest's head", "shard", shard,
			"segment_key", h.SegmentKey, "segments", h.Segments, "kept", anchor.SegmentKey, "reason", perr.Error())
		if anchor.SegmentKey != "" {
			// AnchoredSeq = LastSeq: the kept head is no head item to mark.
			sign[shard] = Head{Shard: shard, LastSeq: anchor.LastSeq, SegmentKey: anchor.SegmentKey, SegmentSHA256: anchor.SegmentSHA256,
				Segments: anchor.Segments, AnchoredSeq: anchor.LastSeq}
		}
	}
	if len(broken) > 0 {
		return nil, unproven, errors.Join(broken...)
	}
	return sign, unproven, nil
}

// emitUnproven publishes MetricHeadsUnproven (a failure is logged).
func (s *Service) emitUnproven(at time.Time, n int) {
	if s.Metrics == nil {
		return
	}
	if err := writeEMF(s.Metrics, s.Config.Namespace, at, MetricHeadsUnproven, float64(n), "Count"); err != nil {
		s.log().Warn("ledger metric not written", "error", err.Error())
	}
}

// forkFree checks, after walkChain proved path (h's segment back to the
// one after anchor), that no other segment of the shard follows anchor or
// a segment of path before h's: a head on one branch of a fork is not
// proven. It lists the shard's keys once; only when the bucket holds more
// than the head's count does it read the segments off the path.
func (s *Service) forkFree(ctx context.Context, h Head, anchor dl.Head, path []chainNode) error {
	if len(path) == 0 {
		return nil
	}
	keys, err := s.Objects.List(ctx, dl.SegmentPrefix+h.Shard+"/", "")
	if err != nil {
		if ctx.Err() != nil {
			return errNotReached
		}
		return fmt.Errorf("list segments: %w", err)
	}
	if int64(len(keys)) <= h.Segments {
		return nil
	}
	skip := map[string]bool{}
	for _, n := range path {
		skip[n.key] = true
	}
	kids, err := s.segmentsOf(ctx, h.Shard, keys, skip)
	if err != nil {
		if ctx.Err() != nil {
			return errNotReached
		}
		return err
	}
	interior := []dl.Ref{{}} // the anchor; the zero Ref: the shard's root
	if anchor.SegmentKey != "" {
		interior[0] = dl.Ref{Key: anchor.SegmentKey, SHA256: anchor.SegmentSHA256}
	}
	for _, n := range path[1:] {
		interior = append(interior, n.ref())
	}
	for _, r := range interior {
		if ks := kids[r]; len(ks) > 0 {
			if r.Key == "" {
				return fmt.Errorf("a fork: %s is a first segment of the shard too", ks[0].key)
			}
			return fmt.Errorf("a fork: %s follows %s too", ks[0].key, r.Key)
		}
	}
	return nil
}

// segmentsOf reads the segments of shard under keys, except those in
// skip (the cache first), indexed by their prev (a first segment under
// the zero Ref). An object that is not a well-formed segment of the shard
// under its own key is left out (Verify names it).
func (s *Service) segmentsOf(ctx context.Context, shard string, keys []string, skip map[string]bool) (map[dl.Ref][]chainNode, error) {
	kids := map[dl.Ref][]chainNode{}
	for _, key := range keys {
		if skip[key] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.cache.mu.Lock()
		c, ok := s.cache.segs[key]
		s.cache.mu.Unlock()
		n := chainNode{key: key, sha: c.sha, seg: c.seg}
		if !ok {
			raw, err := s.Objects.Get(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("read segment %s: %w", key, err)
			}
			seg, err := dl.ParseSegment(raw)
			if err != nil {
				s.log().Warn("ledger found an object under the segments that is not one", "key", key, "error", err.Error())
				continue
			}
			n = chainNode{key: key, sha: dl.SHA256Hex(raw), seg: seg}
			s.remember(key, n.sha, seg)
		}
		if n.seg.Shard != shard || key != dl.SegmentKey(n.seg.Shard, n.seg.FirstSeq) {
			continue
		}
		var p dl.Ref
		if n.seg.Prev != nil {
			p = *n.seg.Prev
		}
		kids[p] = append(kids[p], n)
	}
	return kids, nil
}
