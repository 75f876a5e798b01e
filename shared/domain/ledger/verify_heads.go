package ledger

import (
	"fmt"
	"slices"
)

// The problems a digest's head of a shard can have against the shard's
// chain rebuilt from its roots (verify_roots.go). A head is table state
// (#led#head#<shard>) the digest run signed; its signature proves the
// ledger signed it, not that the chain holds it.
const (
	// KindHeadUnsupported: a signed digest's head that the chain does not
	// support: its segment is absent, hashes otherwise, is not on the
	// chain, or its segment count or last seq is not that of its place in
	// the chain. The subject is the digest's key.
	KindHeadUnsupported Kind = "head-unsupported"
	// KindHeadBackwards: a signed digest's head behind the furthest head
	// an earlier signed digest supports: fewer segments, a lower last seq,
	// an earlier segment of the chain, or the shard listed with no chain.
	// The subject is the digest's key.
	KindHeadBackwards Kind = "head-backwards"
)

// heads checks every digest's head of shard (heads, by digest number)
// against its chain c and returns how many of the chain's segments are
// anchored: those up to the furthest head a signed digest supports (a head
// that went back later does not unanchor what an earlier digest signed).
func (v *verifier) heads(shard string, nodes map[string]*segNode, c chain, heads []digestHead) int {
	// A segment whose hash the chain or a signed digest confirms is
	// intact: a head naming another hash for it is the head's problem.
	confirmed := func(n *segNode) bool {
		if i, on := c.pos[n.key]; on && i+1 < len(c.nodes) && c.nodes[i+1].seg.Prev.SHA256 == n.sha {
			return true
		}
		return slices.ContainsFunc(heads, func(dh digestHead) bool {
			return dh.signed && dh.h.SegmentKey == n.key && dh.h.SegmentSHA256 == n.sha
		})
	}
	// Every digest's head (signed or not) names a segment of the chain.
	named := map[[2]string]bool{}
	for _, dh := range heads {
		h := dh.h
		if h.SegmentKey == "" || named[[2]string{h.SegmentKey, h.SegmentSHA256}] {
			continue
		}
		named[[2]string{h.SegmentKey, h.SegmentSHA256}] = true
		node := nodes[h.SegmentKey]
		_, on := c.pos[h.SegmentKey]
		switch {
		case node == nil:
			v.fail(KindSegmentMissing, h.SegmentKey, "named by digest %d", dh.n)
		case node.sha != h.SegmentSHA256:
			if !confirmed(node) {
				v.fail(KindSegmentHash, h.SegmentKey, "does not hash to digest %d's %s", dh.n, h.SegmentSHA256)
			}
		case !on:
			v.fail(KindSegmentOffChain, h.SegmentKey, "named by digest %d but not on shard %s's chain", dh.n, shard)
		}
	}
	// The signed digests' heads, oldest first, against the chain and the
	// furthest supported head before them.
	refPos := -1
	var ref Head
	var refN int64
	for _, dh := range heads {
		h := dh.h
		if !dh.signed {
			continue
		}
		if h.SegmentKey == "" {
			if refPos >= 0 {
				v.fail(KindHeadBackwards, dh.key, "lists shard %s with no chain; digest %d's head is %s (%d segments, last seq %s)",
					shard, refN, ref.SegmentKey, ref.Segments, ref.LastSeq)
			}
			continue
		}
		node := nodes[h.SegmentKey]
		i, on := c.pos[h.SegmentKey]
		why := ""
		switch {
		case node == nil:
			why = "its segment is absent"
		case node.sha != h.SegmentSHA256:
			why = fmt.Sprintf("its segment hashes to %s, not %s", node.sha, h.SegmentSHA256)
		case !on:
			why = "its segment is not on the chain rebuilt from the shard's first segment"
		case c.counted[i] && h.Segments != int64(i+1):
			why = fmt.Sprintf("it counts %d segments, the chain holds %d up to it", h.Segments, i+1)
		case SeqCompare(h.LastSeq, c.top[i]) != 0:
			why = fmt.Sprintf("it ends at %s, the chain at %s up to it", h.LastSeq, c.top[i])
		}
		if why != "" {
			v.fail(KindHeadUnsupported, dh.key, "shard %s's head %s: %s", shard, h.SegmentKey, why)
		}
		if refPos >= 0 && (h.Segments < ref.Segments || SeqLess(h.LastSeq, ref.LastSeq) || on && i < refPos) {
			v.fail(KindHeadBackwards, dh.key, "shard %s's head %s (%d segments, last seq %s) is behind digest %d's %s (%d segments, last seq %s)",
				shard, h.SegmentKey, h.Segments, h.LastSeq, refN, ref.SegmentKey, ref.Segments, ref.LastSeq)
		}
		if why == "" && i > refPos {
			refPos, ref, refN = i, h, dh.n
		}
	}
	return refPos + 1
}
