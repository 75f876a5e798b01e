package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The counters' recount (issue 25, part F). The ledger function derives
// the counters from its own segments: each shard's chain, segment by
// segment in chain order, each segment's deltas applied in chunks, with the
// shard's checkpoint moved in the same transaction (dynamostore.Counts).
// So the counters the table holds are exactly the sum of the deltas of
// every chunk up to each shard's checkpoint (plus, on a table the ledger
// started on with a baseline, what the items counted before it), whatever
// lag the counting has. RecountCounters recomputes that sum and compares.
const (
	// KindCounterDrift: a counter item holds another count than the
	// ledgered changes make up to the counters' checkpoints (written
	// behind the ledger), or an item under the counters' prefix that the
	// ledger does not write.
	KindCounterDrift Kind = "counter-drift"
	// KindCounterCheckpoint: a shard's counters' checkpoint is ahead of
	// its chain (it says counted what the ledger does not hold), or names
	// a chunk its segment does not have.
	KindCounterCheckpoint Kind = "counter-checkpoint"
)

// CounterDelta is one change of one counter item: its table key and the
// amount.
type CounterDelta struct {
	Key string
	N   int64
}

// CounterPos is a shard's counters' checkpoint: the last counted chunk
// (Chunk, from 0) of segment Segment (1 for the shard's first), Done when
// it was the segment's last.
type CounterPos struct {
	Segment, Chunk int64
	Done           bool
}

// Counted is the number of fully counted segments.
func (p CounterPos) Counted() int64 {
	if p.Done {
		return p.Segment
	}
	return p.Segment - 1
}

// CounterInfo is what a counter item's key says about it.
type CounterInfo struct {
	// Bucket is the start of a time-bucket counter's minute or hour (zero
	// on the others); Expires when the table's TTL may delete it (zero:
	// never).
	Bucket, Expires time.Time
	// Events: it counts events (time buckets, a policy's replays), not
	// what the table holds, so a baseline gives no starting point for it.
	Events bool
}

// CounterInput is what RecountCounters checks.
type CounterInput struct {
	// Segments and Baselines map object keys to bytes, as Input.
	Segments, Baselines map[string][]byte
	// SegmentKeys and ReadSegment, when ReadSegment is set, stand for
	// Segments, as Input's: one segment's changes are held at a time.
	SegmentKeys []string
	ReadSegment func(key string) ([]byte, error)
	// Headers, with ReadSegment, are the segments' headers and counter
	// deltas a Verify over the same bytes kept (Input.Headers, made with
	// Chunks, a top-level function: SegmentHeaders.CountsWith): a segment
	// is then read again only when they lack it (or for the baseline's
	// first changes).
	Headers *SegmentHeaders
	// Now is when the table was read: a counter past its TTL then is not
	// checked.
	Now time.Time
	// Counters are the table's counter items: key to count.
	Counters map[string]int64
	// Checkpoints are the counters' checkpoints by stream shard.
	Checkpoints map[string]CounterPos
	// CheckpointKey is the table key of a shard's checkpoint (problems
	// name it).
	CheckpointKey func(shard string) string
	// Chunks splits a segment's counter deltas into the chunks the ledger
	// applies, in order (at least one).
	Chunks func(Segment) ([][]CounterDelta, error)
	// Start is what an item counted before the ledger started (a baseline
	// entry, or the old image of a key's first ledgered change): the
	// counters of what the table holds.
	Start func(Item) ([]CounterDelta, error)
	// Info says what a counter key is (false: not a key the ledger writes).
	Info func(key string) (CounterInfo, bool)
}

// CounterResult is what RecountCounters found.
type CounterResult struct {
	Problems []Problem `json:"problems"`
	// Checked counts the counter items compared (those the table holds
	// and those the recount gives).
	Checked int `json:"checked"`
	// Unchecked says which counters were not compared, and why.
	Unchecked []Note `json:"unchecked,omitempty"`
	// Behind counts the segments of the chains the checkpoints have not
	// counted yet (the counters' lag: not a problem).
	Behind int64 `json:"behind"`
	// NotChecked says why no counter was compared (empty: they were).
	NotChecked string `json:"not_checked,omitempty"`
}

// RecountCounters recounts the counters from the ledgered changes, up to
// each shard's checkpoint, and compares the count with the table's.
func RecountCounters(in CounterInput) CounterResult {
	if splitForTests > 1 && in.ReadSegment == nil {
		in.SegmentKeys, in.ReadSegment = segmentReader(in.Segments)
		in.Segments = nil
		if in.Headers == nil {
			return in.againWithHeaders() // headers_hook.go
		}
	}
	return in.recount()
}

func (in CounterInput) recount() CounterResult {
	var res CounterResult
	chains, why, err := in.counterChains()
	if err != nil {
		res.unreadable(err)
		return res
	}
	if why != "" {
		res.NotChecked = why
		return res
	}
	want := map[string]int64{}
	add := func(ds []CounterDelta) {
		for _, d := range ds {
			want[d.Key] += d.N
		}
	}
	shards := map[string]bool{}
	for s := range chains {
		shards[s] = true
	}
	for s := range in.Checkpoints {
		shards[s] = true
	}
	for _, shard := range slices.Sorted(mapKeys(shards)) {
		chain := chains[shard]
		pos, counting := in.Checkpoints[shard]
		if !counting {
			res.Behind += int64(len(chain))
			continue
		}
		ckey := shard
		if in.CheckpointKey != nil {
			ckey = in.CheckpointKey(shard)
		}
		if pos.Segment < 1 || pos.Chunk < 0 || pos.Segment > int64(len(chain)) {
			res.Problems = append(res.Problems, Problem{Kind: KindCounterCheckpoint, Subject: ckey,
				Detail: fmt.Sprintf("counted up to segment %d of shard %s, whose chain holds %d", pos.Segment, shard, len(chain))})
			res.NotChecked = fmt.Sprintf("the counters' checkpoint of shard %s is ahead of its chain", shard)
			continue
		}
		res.Behind += int64(len(chain)) - pos.Counted()
		for i := int64(0); i < pos.Segment; i++ {
			n := chain[i]
			chunks, ok, err := in.Headers.counted(n.sha, in.Chunks) // counted as Verify read the same bytes
			if !ok {
				seg, rerr := in.withEntries(n)
				if rerr != nil {
					res.unreadable(rerr)
					continue
				}
				chunks, err = in.Chunks(seg)
			}
			if err != nil {
				res.NotChecked = fmt.Sprintf("segment %s does not count: %v", n.key, err)
				continue
			}
			if i < pos.Segment-1 || pos.Done {
				if i == pos.Segment-1 && pos.Chunk != int64(len(chunks))-1 {
					res.Problems = append(res.Problems, Problem{Kind: KindCounterCheckpoint, Subject: ckey,
						Detail: fmt.Sprintf("says segment %d counted at chunk %d, but it has %d chunks", pos.Segment, pos.Chunk, len(chunks))})
					res.NotChecked = fmt.Sprintf("the counters' checkpoint of shard %s does not match its segment", shard)
				}
				for _, c := range chunks {
					add(c)
				}
				continue
			}
			if pos.Chunk >= int64(len(chunks))-1 {
				res.Problems = append(res.Problems, Problem{Kind: KindCounterCheckpoint, Subject: ckey,
					Detail: fmt.Sprintf("says segment %d counted to chunk %d but not done, and it has %d chunks", pos.Segment, pos.Chunk, len(chunks))})
				res.NotChecked = fmt.Sprintf("the counters' checkpoint of shard %s does not match its segment", shard)
				continue
			}
			for _, c := range chunks[:pos.Chunk+1] {
				add(c)
			}
		}
	}
	if res.NotChecked != "" {
		return res
	}
	if len(in.Baselines) > 0 && len(chains) == 0 && len(in.Checkpoints) == 0 {
		// On a table the ledger started on with a baseline, the counters
		// of what it holds start from what the old writer counted: the
		// baseline's items, once the ledger counts its first change.
		res.NotChecked = "the ledger holds a baseline and no change yet: nothing counted to recount"
		return res
	}
	baseStart, why, err := in.baselineStart(chains, add)
	if err != nil {
		res.unreadable(err)
		return res
	}
	if why != "" {
		res.NotChecked = why
		return res
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range in.Counters {
		keys[k] = true
	}
	var expired, preLedger int
	for _, key := range slices.Sorted(mapKeys(keys)) {
		info, ok := in.Info(key)
		have := in.Counters[key]
		if !ok {
			res.Checked++
			res.Problems = append(res.Problems, Problem{Kind: KindCounterDrift, Subject: key,
				Detail: fmt.Sprintf("not a counter the ledger writes (the table holds %d)", have)})
			continue
		}
		switch {
		case !info.Expires.IsZero() && !in.Now.Before(info.Expires):
			expired++
			continue
		case !baseStart.IsZero() && info.Events && (info.Bucket.IsZero() || info.Bucket.Before(baseStart)):
			preLedger++
			continue
		}
		res.Checked++
		if w := want[key]; w != have {
			res.Problems = append(res.Problems, Problem{Kind: KindCounterDrift, Subject: key,
				Detail: fmt.Sprintf("the ledgered changes count %d up to the checkpoints, the table holds %d", w, have)})
		}
	}
	if expired > 0 {
		res.Unchecked = append(res.Unchecked, Note{Subject: "expired", Detail: fmt.Sprintf("%d time-bucket counters past their TTL (the table may have deleted them)", expired)})
	}
	if preLedger > 0 {
		res.Unchecked = append(res.Unchecked, Note{Subject: "pre-ledger", Detail: fmt.Sprintf("%d counters of events before the baseline (policies' replays, time buckets before %s)", preLedger, baseStart.UTC().Format(time.RFC3339))})
	}
	return res
}

// unreadable records a segment the recount could not read again, or
// whose bytes changed: nothing is compared, and verify fails.
func (r *CounterResult) unreadable(err error) {
	r.Problems = append(r.Problems, Problem{Kind: KindUnchecked, Subject: "(counters)", Detail: err.Error()})
	r.NotChecked = err.Error()
}

type counterSeg struct {
	key string
	seg Segment // its entries dropped when read from ReadSegment
	sha string
}

// withEntries returns n's segment with its entries, read again when they
// were dropped: the bytes must be those chained.
func (in CounterInput) withEntries(n counterSeg) (Segment, error) {
	if in.ReadSegment == nil {
		return n.seg, nil
	}
	raw, err := in.ReadSegment(n.key)
	switch {
	case err != nil:
		return Segment{}, fmt.Errorf("segment %s could not be read: %v", n.key, err)
	case SHA256Hex(raw) != n.sha:
		return Segment{}, fmt.Errorf("segment %s changed between two reads", n.key)
	}
	s, err := ParseSegment(raw)
	if err != nil {
		return Segment{}, fmt.Errorf("segment %s does not parse: %v", n.key, err)
	}
	return s, nil
}

// counterChains walks each shard's chain from its first segment, as the
// ledger counts it. A shard without exactly one first segment, with a
// fork or a link that does not hash, is not counted exactly by anyone:
// why says so (Verify names the chain's problems).
func (in CounterInput) counterChains() (map[string][]counterSeg, string, error) {
	byShard := map[string]map[string]*counterSeg{}
	keys := slices.Collect(mapKeys(in.Segments))
	if in.ReadSegment != nil {
		keys = in.SegmentKeys
	}
	for _, key := range keys {
		raw := in.Segments[key]
		if in.ReadSegment != nil {
			var err error
			if raw, err = in.ReadSegment(key); err != nil {
				return nil, "", fmt.Errorf("segment %s could not be read: %w", key, err)
			}
		}
		sha := SHA256Hex(raw)
		var s Segment
		var err error
		if in.ReadSegment != nil {
			s, err = in.Headers.parse(raw, sha) // its entries read again when counted (withEntries)
		} else {
			s, err = ParseSegment(raw)
		}
		if err != nil || key != SegmentKey(s.Shard, s.FirstSeq) {
			continue // segment-invalid: on no chain
		}
		if byShard[s.Shard] == nil {
			byShard[s.Shard] = map[string]*counterSeg{}
		}
		byShard[s.Shard][key] = &counterSeg{key, s, sha}
	}
	out := map[string][]counterSeg{}
	for shard, nodes := range byShard {
		var roots []*counterSeg
		children := map[string][]*counterSeg{}
		for _, n := range nodes {
			if n.seg.Prev == nil {
				roots = append(roots, n)
			} else {
				children[n.seg.Prev.Key] = append(children[n.seg.Prev.Key], n)
			}
		}
		if len(roots) != 1 {
			return nil, fmt.Sprintf("shard %s has %d first segments", shard, len(roots)), nil
		}
		var chain []counterSeg
		seen := map[string]bool{}
		for cur := roots[0]; cur != nil && !seen[cur.key]; {
			seen[cur.key] = true
			chain = append(chain, *cur)
			next := children[cur.key]
			switch {
			case len(next) == 0:
				cur = nil
			case len(next) > 1:
				return nil, fmt.Sprintf("shard %s's chain forks after %s", shard, cur.key), nil
			case next[0].seg.Prev.SHA256 != cur.sha:
				return nil, fmt.Sprintf("shard %s's chain does not hash at %s", shard, cur.key), nil
			default:
				cur = next[0]
			}
		}
		out[shard] = chain
	}
	return out, "", nil
}

// baselineStart adds what the baseline's items counted before the ledger
// started, and returns the baseline's start (zero: none). A key the ledger
// changed counts as its first change's old image (what it was when the
// stream began); an untouched key as its baseline entry.
func (in CounterInput) baselineStart(chains map[string][]counterSeg, add func([]CounterDelta)) (time.Time, string, error) {
	if len(in.Baselines) == 0 {
		return time.Time{}, "", nil
	}
	var start time.Time
	base := map[string]Item{}
	for key, raw := range in.Baselines {
		b, err := ParseBaseline(raw)
		if err != nil {
			return time.Time{}, fmt.Sprintf("baseline %s does not parse: %v", key, err), nil
		}
		at, err := time.Parse(time.RFC3339Nano, b.At)
		if err != nil {
			return time.Time{}, fmt.Sprintf("baseline %s: at %q", key, b.At), nil
		}
		if start.IsZero() || at.Before(start) {
			start = at
		}
		for _, e := range b.Entries {
			base[e.Key] = e.Item
		}
	}
	first := map[string]Entry{}
	for _, chain := range chains {
		for _, n := range chain {
			seg, err := in.withEntries(n)
			if err != nil {
				return time.Time{}, "", err
			}
			for _, e := range seg.Entries {
				if _, ok := base[e.Key]; !ok {
					continue
				}
				if f, ok := first[e.Key]; !ok || SeqLess(e.Seq, f.Seq) {
					first[e.Key] = e
				}
			}
		}
	}
	for _, key := range slices.Sorted(mapKeys(base)) {
		it := base[key]
		if e, ok := first[key]; ok {
			switch {
			case e.Event == EventInsert:
				it = nil
			case e.Event == EventRemove && e.Removed != nil:
				it = e.Removed
			case e.OldItem != nil:
				it = e.OldItem
			}
		}
		if it == nil {
			continue
		}
		ds, err := in.Start(it)
		if err != nil {
			return time.Time{}, fmt.Sprintf("baseline item %s does not count: %v", strings.TrimSpace(key), err), nil
		}
		add(ds)
	}
	return start, "", nil
}
