package ledger

import (
	"slices"
	"strings"
)

// A shard's chain is rebuilt from its roots, independently of what any
// digest's head says (a head is table state the ledger signed, and a
// function role may have rewritten it before the digest run read it):
//
//   - it starts at the shard's first segment (prev nil); of two or more,
//     at the one a signed digest's head reaches through prev links (the
//     earliest such digest's), else at the first written (the lowest
//     first seq); every first segment is named segment-chain;
//   - it follows every segment whose prev is its tip; where two or more
//     name the same prev (a fork, segment-chain on the prev), it follows
//     the one a signed digest's head reaches (the earliest such digest's),
//     else the first written (lowest first seq); the other branches are
//     off-chain;
//   - where no segment follows the tip and a segment a signed digest's
//     head reaches names a prev that is absent (segment-missing), the
//     chain goes on from there (lowest first seq first): the digest's
//     signature covers it through the hashes after the gap.
//
// Heads are then checked against the rebuilt chain (verify_heads.go).

// chain is a shard's rebuilt chain, oldest first.
type chain struct {
	nodes []*segNode
	// pos is each chained segment's index in nodes.
	pos map[string]int
	// counted[i] says nodes[0..i] run from the shard's first segment with
	// no gap, so a head at nodes[i] counts i+1 segments.
	counted []bool
	// top[i] is the highest last seq of nodes[0..i] (a late segment ends
	// below the chain's highest seq).
	top []string
}

// backing maps each segment key of a shard to the earliest signed digest
// whose head of the shard names it or a segment after it (through prev
// links): the digests that vouch for it. A segment no head reaches is
// absent.
func (v *verifier) backing(shard string, nodes map[string]*segNode, heads []digestHead) map[string]int64 {
	by := map[string]int64{}
	for _, dh := range heads {
		h := dh.h
		if !dh.signed || h.SegmentKey == "" {
			continue
		}
		n := nodes[h.SegmentKey]
		if n == nil || n.sha != h.SegmentSHA256 {
			continue
		}
		walked := map[string]bool{}
		for cur := n; cur != nil && by[cur.key] == 0; {
			by[cur.key], walked[cur.key] = dh.n, true
			if cur.seg.Prev == nil {
				break
			}
			prev := nodes[cur.seg.Prev.Key]
			if prev != nil && walked[prev.key] {
				v.fail(KindSegmentChain, prev.key, "the chain of shard %s loops", shard)
				break
			}
			cur = prev
		}
	}
	return by
}

// pick returns the candidate the earliest digest backs, else the first
// written (lowest key: a segment's key sorts by its padded first seq).
func pick(cands []*segNode, back map[string]int64) *segNode {
	return slices.MinFunc(cands, func(a, b *segNode) int {
		ba, bb := back[a.key], back[b.key]
		switch {
		case ba != 0 && (bb == 0 || ba < bb):
			return -1
		case bb != 0 && (ba == 0 || bb < ba):
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
}

// rebuild builds shard's chain from its roots, naming two first segments,
// forks, gaps it bridges and hashes that do not chain, and returns it with
// the keys it reached.
func (v *verifier) rebuild(shard string, nodes map[string]*segNode, back map[string]int64) chain {
	children := map[string][]*segNode{}
	var roots, orphans []*segNode // orphans: their prev is absent
	for _, n := range nodes {
		switch {
		case n.seg.Prev == nil:
			roots = append(roots, n)
		case nodes[n.seg.Prev.Key] == nil:
			orphans = append(orphans, n)
		default:
			children[n.seg.Prev.Key] = append(children[n.seg.Prev.Key], n)
		}
	}
	c := chain{pos: map[string]int{}}
	if len(roots) > 1 {
		for _, r := range roots {
			v.fail(KindSegmentChain, r.key, "shard %s has %d first segments", shard, len(roots))
		}
	}
	// bridge returns the backed orphan to go on from, naming its absent
	// prev.
	bridge := func() *segNode {
		var cands []*segNode
		for _, o := range orphans {
			if _, on := c.pos[o.key]; !on && back[o.key] != 0 {
				cands = append(cands, o)
			}
		}
		if len(cands) == 0 {
			return nil
		}
		o := slices.MinFunc(cands, func(a, b *segNode) int { return strings.Compare(a.key, b.key) })
		v.fail(KindSegmentMissing, o.seg.Prev.Key, "named by %s as its prev", o.key)
		return o
	}
	var cur *segNode
	counted := true
	if len(roots) > 0 {
		cur = pick(roots, back)
	} else if cur = bridge(); cur != nil {
		counted = false
	}
	top := ""
	for cur != nil {
		if _, seen := c.pos[cur.key]; seen { // cannot happen: each segment has one prev
			break
		}
		c.pos[cur.key] = len(c.nodes)
		c.nodes = append(c.nodes, cur)
		if top == "" || SeqLess(top, cur.seg.LastSeq) {
			top = cur.seg.LastSeq
		}
		c.counted, c.top = append(c.counted, counted), append(c.top, top)
		next := children[cur.key]
		switch len(next) {
		case 0:
			if cur = bridge(); cur != nil {
				counted = false
			}
			continue
		case 1:
		default:
			n := pick(next, back)
			v.fail(KindSegmentChain, cur.key, "%d segments name it as their prev (a fork): the chain follows %s", len(next), n.key)
			next = []*segNode{n}
		}
		if next[0].seg.Prev.SHA256 != cur.sha {
			v.fail(KindSegmentHash, cur.key, "does not hash to what %s says", next[0].key)
		}
		cur = next[0]
	}
	for key := range nodes {
		if _, on := c.pos[key]; !on {
			v.fail(KindSegmentOffChain, key, "not on shard %s's chain", shard)
		}
	}
	return c
}

// shard checks one shard's chain, rebuilt from its roots, and the heads
// the digests give it, and passes the chain's entries to keys: those at or
// before the furthest head a signed digest supports are anchored.
func (v *verifier) shard(shard string, nodes map[string]*segNode, heads []digestHead, keys *keyStage) error {
	c := v.rebuild(shard, nodes, v.backing(shard, nodes, heads))
	return v.entries(shard, c.nodes, v.heads(shard, nodes, c, heads), keys)
}

// digestHead is a digest's head of a shard.
type digestHead struct {
	h      Head
	n      int64
	key    string
	signed bool
}

// shardHeads returns each shard's heads in the digests, by digest number.
func shardHeads(digests map[int64]*parsedDigest, signed []*parsedDigest) map[string][]digestHead {
	ok := map[int64]bool{}
	for _, p := range signed {
		ok[p.d.N] = true
	}
	out := map[string][]digestHead{}
	for _, n := range slices.Sorted(mapKeys(digests)) {
		p := digests[n]
		for _, h := range p.d.Shards {
			out[h.Shard] = append(out[h.Shard], digestHead{h: h, n: n, key: p.key, signed: ok[n]})
		}
	}
	return out
}
