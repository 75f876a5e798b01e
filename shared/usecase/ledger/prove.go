package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
// count and last are its place in the chain and the chain's last seq up
// to it, where a walk computed them.
type chainNode struct {
	key, sha string
	seg      dl.Segment
	count    int64
	last     string
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
// and stops when ctx is done (errNotReached), or earlier at a segment this
// process proved before (proven.go) at the place the head's count puts
// it: the walk costs the segments since this process last proved the
// shard (a cold process: since the signed head). A bucket read that fails
// is a readError (nothing proven either way).
// It returns the segments walked (h's first, the one after the base
// last) and the base it stopped at (anchor's ref or the proven node's;
// the zero Ref: the shard's root). The caller marks the path proven
// (provePath) once its fork check passed.
func (s *Service) walkChain(ctx context.Context, h Head, anchor dl.Head) ([]chainNode, dl.Ref, error) {
	var base dl.Ref
	if anchor.SegmentKey != "" {
		base = dl.Ref{Key: anchor.SegmentKey, SHA256: anchor.SegmentSHA256}
	}
	path, stop, err := s.walk(ctx, h, anchor)
	if stop != nil {
		base = *stop
	}
	return path, base, err
}

func (s *Service) walk(ctx context.Context, h Head, anchor dl.Head) ([]chainNode, *dl.Ref, error) {
	if h.SegmentKey == "" {
		if anchor.SegmentKey != "" {
			return nil, nil, fmt.Errorf("the head is empty, the anchored head is %s (%d segments): it went backwards", anchor.SegmentKey, anchor.Segments)
		}
		if h.Segments != 0 || h.LastSeq != "" || h.SegmentSHA256 != "" {
			return nil, nil, fmt.Errorf("a head without a segment counts %d segments up to %q", h.Segments, h.LastSeq)
		}
		return nil, nil, nil
	}
	if !dl.ValidSeq(h.LastSeq) {
		return nil, nil, fmt.Errorf("the head's last_seq %q is not a sequence number", capped(h.LastSeq))
	}
	if h.Segments < anchor.Segments {
		return nil, nil, fmt.Errorf("the head counts %d segments, the anchored head %d: it went backwards", h.Segments, anchor.Segments)
	}
	if anchor.LastSeq != "" && dl.SeqLess(h.LastSeq, anchor.LastSeq) {
		return nil, nil, fmt.Errorf("the head ends at %s, the anchored head at %s: it went backwards", h.LastSeq, anchor.LastSeq)
	}
	steps := h.Segments - anchor.Segments
	if steps == 0 {
		if h.SegmentKey != anchor.SegmentKey || h.SegmentSHA256 != anchor.SegmentSHA256 || dl.SeqCompare(h.LastSeq, anchor.LastSeq) != 0 {
			return nil, nil, fmt.Errorf("the head counts as many segments as the anchored head (%d) but is not it (%s)", h.Segments, anchor.SegmentKey)
		}
		return nil, nil, nil
	}
	var want *dl.Ref
	if anchor.SegmentKey != "" {
		want = &dl.Ref{Key: anchor.SegmentKey, SHA256: anchor.SegmentSHA256}
	}
	var segs []dl.Segment // newest first
	var path []chainNode
	var stop *dl.Ref
	last := anchor.LastSeq
	key, sha := h.SegmentKey, h.SegmentSHA256
	for i := int64(0); i < steps; i++ {
		if pn, ok := s.provenAt(key, sha); ok {
			if pn.count != h.Segments-i {
				return nil, nil, fmt.Errorf("the head counts %d segments, its chain %d (%s is segment %d)", h.Segments, pn.count+i, key, pn.count)
			}
			stop, last = &dl.Ref{Key: key, SHA256: sha}, pn.lastSeq
			break
		}
		if ctx.Err() != nil {
			return nil, nil, errNotReached
		}
		seg, err := s.segment(ctx, key, sha)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, errNotReached
			}
			return nil, nil, err
		}
		if seg.Shard != h.Shard || key != dl.SegmentKey(seg.Shard, seg.FirstSeq) {
			return nil, nil, fmt.Errorf("%s is not a segment of shard %s under its own key", key, h.Shard)
		}
		segs = append(segs, seg)
		path = append(path, chainNode{key: key, sha: sha, seg: seg})
		atAnchor := (want == nil && seg.Prev == nil) || (want != nil && seg.Prev != nil && *seg.Prev == *want)
		switch {
		case i == steps-1 && !atAnchor:
			return nil, nil, fmt.Errorf("the chain does not reach the anchored head %q in the %d segments the head counts beyond it", anchor.SegmentKey, steps)
		case i < steps-1 && atAnchor:
			return nil, nil, fmt.Errorf("the chain reaches the anchored head %q after %d segments, the head counts %d", anchor.SegmentKey, i+1, steps)
		case i < steps-1 && seg.Prev == nil:
			return nil, nil, fmt.Errorf("the chain reaches the shard's first segment after %d segments, the head counts %d beyond the anchored head", i+1, steps)
		}
		if seg.Prev != nil {
			key, sha = seg.Prev.Key, seg.Prev.SHA256
		}
	}
	for i := len(segs) - 1; i >= 0; i-- {
		if !follows(last, segs[i]) {
			return nil, nil, fmt.Errorf("segment %s does not follow its chain's end %s", dl.SegmentKey(segs[i].Shard, segs[i].FirstSeq), last)
		}
		if last == "" || dl.SeqLess(last, segs[i].LastSeq) {
			last = segs[i].LastSeq
		}
		path[i].count, path[i].last = h.Segments-int64(i), last
	}
	if dl.SeqCompare(last, h.LastSeq) != 0 {
		return nil, nil, fmt.Errorf("the head ends at %s, its chain at %s", h.LastSeq, last)
	}
	return path, stop, nil
}

// proveAnchor checks that an anchored head (a signed digest's) is in the
// bucket as signed: its segment is there, hashes to it, and is a segment
// of its shard under its own key. A failure that is not the context's is
// a broken chain: nothing after it can be proven; a read that fails is a
// readError.
func (s *Service) proveAnchor(ctx context.Context, anchor dl.Head) error {
	if anchor.SegmentKey == "" {
		return nil
	}
	if pn, ok := s.provenAt(anchor.SegmentKey, anchor.SegmentSHA256); ok && pn.count == anchor.Segments {
		return nil // read and proven by this process already
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
	order := slices.Sorted(maps.Keys(shards))
	results := make([]proveResult, len(order))
	var wg sync.WaitGroup
	sem := make(chan struct{}, proveConcurrency)
	for i, shard := range order {
		h, hasHead := heads[shard]
		anchor, hasAnchor := anchors[shard]
		if !hasHead && !hasAnchor {
			continue // no chain yet
		}
		// A listed shard whose head item is gone but that the previous
		// digest anchors is proven too (as an empty head: it went back).
		h.Shard, anchor.Shard = shard, shard
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = s.proveHead(ctx, h, anchor)
		}()
	}
	wg.Wait()
	sign = map[string]Head{}
	var broken []error
	for _, r := range results {
		if r.broken != nil {
			broken = append(broken, r.broken)
		}
		if r.unproven != nil {
			unproven = append(unproven, *r.unproven)
		}
		if r.sign != nil {
			sign[r.sign.Shard] = *r.sign
		}
	}
	if len(broken) > 0 {
		return nil, unproven, errors.Join(broken...)
	}
	return sign, unproven, nil
}

// proveConcurrency bounds the shards a digest run proves at once.
const proveConcurrency = 8

// proveResult is one shard's outcome: the head to sign (nil: none), the
// head unproven (nil: proven), and a failure of the run.
type proveResult struct {
	sign     *Head
	unproven *dl.UnprovenHead
	broken   error
}

// proveHead proves one shard's head h against anchor for proveHeads.
func (s *Service) proveHead(ctx context.Context, h Head, anchor dl.Head) (r proveResult) {
	shard := h.Shard
	record := func(reason string) *dl.UnprovenHead {
		u := dl.UnprovenHead{Shard: shard, SegmentKey: capped(h.SegmentKey), SegmentSHA256: capped(h.SegmentSHA256),
			Segments: h.Segments, Reason: capped(reason)}
		if dl.ValidSeq(h.LastSeq) {
			u.LastSeq = h.LastSeq
		}
		return &u
	}
	perr := s.proveAnchor(ctx, anchor)
	if isRead(perr) {
		r.broken = fmt.Errorf("shard %s: %w", shard, perr) // retried: nothing proven either way
		return r
	}
	if perr != nil && !errors.Is(perr, errNotReached) {
		r.broken, r.unproven = perr, record(perr.Error())
		s.log().Error("ledger shard's signed head is not in the bucket as signed: no digest is signed", "shard", shard,
			"signed", anchor.SegmentKey, "error", perr.Error())
		return r
	}
	if perr == nil {
		var path []chainNode
		var base dl.Ref
		if path, base, perr = s.walkChain(ctx, h, anchor); perr == nil {
			if perr = s.forkFree(ctx, h, base, path); perr == nil {
				s.provePath(path)
			}
		}
	}
	if isRead(perr) {
		r.broken = fmt.Errorf("shard %s: %w", shard, perr)
		return r
	}
	if perr == nil {
		r.sign = &h
		return r
	}
	r.unproven = record(perr.Error())
	s.log().Error("ledger shard head unproven: the digest keeps the previous digest's head", "shard", shard,
		"segment_key", capped(h.SegmentKey), "segments", h.Segments, "kept", anchor.SegmentKey, "reason", capped(perr.Error()))
	if anchor.SegmentKey != "" {
		// AnchoredSeq = LastSeq: the kept head is no head item to mark.
		r.sign = &Head{Shard: shard, LastSeq: anchor.LastSeq, SegmentKey: anchor.SegmentKey, SegmentSHA256: anchor.SegmentSHA256,
			Segments: anchor.Segments, AnchoredSeq: anchor.LastSeq}
	}
	return r
}

// emitUnproven publishes MetricHeadsUnproven (a failure is logged).
func (s *Service) emitUnproven(at time.Time, n int) {
	if s.Metrics == nil {
		return
	}
	if err := writeEMF(s.Metrics, s.Config, at, MetricHeadsUnproven, float64(n), "Count"); err != nil {
		s.log().Warn("ledger metric not written", "error", err.Error())
	}
}

// forkFree checks, after walkChain proved path (h's segment back to the
// one after base), that no other segment of the shard follows base, a
// segment of path before h's, or a segment this process proved before h
// (proven.go; a walk that stopped at one checks the chain behind it this
// way): a head on one branch of a fork is not proven. It lists the
// shard's keys once; only when the bucket holds more than the head's
// count (a chain of h.Segments keys is then not all there is) does it
// read the segments off the path and the proven nodes.
func (s *Service) forkFree(ctx context.Context, h Head, base dl.Ref, path []chainNode) error {
	if h.SegmentKey == "" {
		return nil
	}
	keys, err := s.Objects.List(ctx, dl.SegmentPrefix+h.Shard+"/", "")
	if err != nil {
		if ctx.Err() != nil {
			return errNotReached
		}
		return fmt.Errorf("list segments: %w", asRead(err))
	}
	if int64(len(keys)) <= h.Segments {
		return nil
	}
	// succ: each chain node's successor as this process knows it (the
	// path, the proven nodes); two that follow one node are a fork too.
	succ := map[dl.Ref]string{}
	var conflict error
	link := func(prev dl.Ref, key string) {
		if k, ok := succ[prev]; ok && k != key && conflict == nil {
			conflict = fmt.Errorf("a fork: %s follows %s too", max(k, key), prev.Key)
		}
		succ[prev] = key
	}
	skip := map[string]bool{}
	for _, n := range path {
		skip[n.key] = true
		var p dl.Ref
		if n.seg.Prev != nil {
			p = *n.seg.Prev
		}
		link(p, n.key)
	}
	interior := map[dl.Ref]bool{}
	if base.Key != h.SegmentKey {
		interior[base] = true // where the walk began; the zero Ref: the shard's root
	}
	for _, n := range path[min(1, len(path)):] {
		interior[n.ref()] = true
	}
	for key, pn := range s.provenOf(h.Shard) {
		skip[key] = true
		if pn.count <= h.Segments {
			link(pn.prev, key)
		}
		if pn.count < h.Segments {
			interior[dl.Ref{Key: key, SHA256: pn.sha}] = true
		}
	}
	if conflict != nil {
		return conflict
	}
	kids, err := s.segmentsOf(ctx, h.Shard, keys, skip)
	if err != nil {
		if ctx.Err() != nil {
			return errNotReached
		}
		return err
	}
	refs := slices.SortedFunc(maps.Keys(interior), func(a, b dl.Ref) int { return strings.Compare(a.Key, b.Key) })
	for _, r := range refs {
		for _, k := range kids[r] {
			if known, ok := succ[r]; ok && known == k.key {
				continue
			} else if !ok && len(kids[r]) == 1 {
				succ[r] = k.key // a chain node this process has not proven (behind its walks)
				continue
			}
			if r.Key == "" {
				return fmt.Errorf("a fork: %s is a first segment of the shard too", k.key)
			}
			return fmt.Errorf("a fork: %s follows %s too", k.key, r.Key)
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
				return nil, fmt.Errorf("read segment %s: %w", key, asRead(err))
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

// provePath marks the nodes of a path walkChain and forkFree proved.
func (s *Service) provePath(path []chainNode) {
	for _, n := range slices.Backward(path) { // oldest first: evicted first
		pn := provenNode{sha: n.sha, count: n.count, lastSeq: n.last}
		if n.seg.Prev != nil {
			pn.prev = *n.seg.Prev
		}
		s.markProven(n.key, pn)
	}
}
