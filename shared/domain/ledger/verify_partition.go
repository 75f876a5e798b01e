package ledger

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// The key stage: every check of one key's versions against each other and
// against the table (records, the version and writer checks, the cross-
// item check's reduction) needs that key's changes, its item and its
// baseline entry, and nothing of other keys. With the input in memory
// (Input.ReadSegment unset) it runs once over everything. Read from
// Input.ReadSegment, each segment is read once: its changes go to the
// file of their key's partition as they are read, and what the chain
// stage needs of them (entryMeta) to a metas file it reads back in chain
// order; the table's items go to the partitions' files alike, and the
// stage then runs once per partition, over the changes the chain stage
// kept, in chain order. What it holds decoded at once is one partition's
// changes and items, about 1/Partitions of them, plus what the whole
// ledger needs (every segment's header, the baseline's items, and each
// key's reduction for the cross-item check).

// keyStage collects the key stage's input and runs it.
type keyStage struct {
	v       *verifier
	signed  []*parsedDigest
	entries []ledgered // in memory
	// Read from Input.ReadSegment: the partitions' files, the metas file
	// (each segment's entryMetas, one JSON array after the other, where
	// its segNode says) and the segments by their number in the read.
	parts  []*spill
	seed   maphash.Seed
	dir    string
	meta   *os.File
	metaW  *bufio.Writer
	offset int64
	nodes  []*segNode // by idx
}

// spill is one partition's file: its changes, then its table items, a
// record each (spillcodec.go).
type spill struct {
	f   *os.File
	out *bufio.Writer
	buf []byte
}

// write appends sp's record to the partition's file.
func (s *spill) write(sp spilled) error {
	b, err := appendSpilled(s.buf[:0], sp)
	if err != nil {
		return err
	}
	s.buf = b
	_, err = s.out.Write(b)
	return err
}

// spilled is a change or an item as a partition's file holds it: a
// change with the segment (its number in the read) and place it came
// from.
type spilled struct {
	Seg    int
	Index  int
	OldSHA string
	Entry  *Entry
	Item   Item
}

func (v *verifier) newKeyStage(signed []*parsedDigest) (*keyStage, error) {
	v.cross = v.in.acrossCheck()
	k := &keyStage{v: v, signed: signed, seed: maphash.MakeSeed()}
	if v.in.ReadSegment == nil {
		return k, nil
	}
	dir, err := os.MkdirTemp(v.in.SpillDir, "dlqq-verify-")
	if err != nil {
		return nil, fmt.Errorf("verify's spill directory: %w", err)
	}
	k.dir = dir
	if k.meta, err = os.Create(filepath.Join(dir, "metas")); err != nil {
		k.close()
		return nil, fmt.Errorf("verify's spill file: %w", err)
	}
	k.metaW = bufio.NewWriterSize(k.meta, 1<<16)
	for i := range max(1, min(v.in.Partitions, MaxPartitions)) {
		s := &spill{}
		k.parts = append(k.parts, s)
		if s.f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%04d.jsonl", i))); err != nil {
			k.close()
			return nil, fmt.Errorf("verify's spill file: %w", err)
		}
		s.out = bufio.NewWriterSize(s.f, 1<<16)
	}
	return k, nil
}

// close removes the spill files.
func (k *keyStage) close() {
	for _, s := range k.parts {
		if s.f != nil {
			_ = s.f.Close()
		}
	}
	if k.meta != nil {
		_ = k.meta.Close()
	}
	if k.dir != "" {
		_ = os.RemoveAll(k.dir)
	}
}

// partition is the partition of key.
func (k *keyStage) partition(key string) *spill { return k.parts[k.index(key)] }

// spillSegment writes a segment's changes to their partitions and their
// metas to the metas file, as the segment is read.
func (k *keyStage) spillSegment(n *segNode) error {
	metas := make([]entryMeta, len(n.seg.Entries))
	for j, e := range n.seg.Entries {
		metas[j] = metaOf(e)
		if !Ledgered(e.Key) {
			continue
		}
		if err := k.partition(e.Key).write(spilled{Seg: n.idx, Index: j, OldSHA: e.oldSHA, Entry: &n.seg.Entries[j]}); err != nil {
			return fmt.Errorf("verify's spill file: %w", err)
		}
	}
	raw, err := json.Marshal(metas)
	if err != nil {
		return err
	}
	if _, err := k.metaW.Write(raw); err != nil {
		return fmt.Errorf("verify's spill file: %w", err)
	}
	n.metaOff, n.metaLen = k.offset, int64(len(raw))
	k.offset += int64(len(raw))
	for len(k.nodes) <= n.idx {
		k.nodes = append(k.nodes, nil)
	}
	k.nodes[n.idx] = n
	return nil
}

// metas returns what the chain stage reads of a chained segment's
// entries.
func (k *keyStage) metas(n *segNode) ([]entryMeta, error) {
	if k.meta == nil {
		metas := make([]entryMeta, len(n.seg.Entries))
		for j, e := range n.seg.Entries {
			metas[j] = metaOf(e)
		}
		return metas, nil
	}
	if err := k.metaW.Flush(); err != nil {
		return nil, fmt.Errorf("verify's spill file: %w", err)
	}
	raw := make([]byte, n.metaLen)
	if _, err := k.meta.ReadAt(raw, n.metaOff); err != nil {
		return nil, fmt.Errorf("verify's spill file: %w", err)
	}
	var metas []entryMeta
	if err := json.Unmarshal(raw, &metas); err != nil {
		return nil, fmt.Errorf("verify's spill file: %w", err)
	}
	n.kept = make([]bool, len(metas))
	return metas, nil
}

// keep takes the chain stage's verdict: entry j of n is on the chain, no
// duplicate and no canary.
func (k *keyStage) keep(n *segNode, j int, shard string) error {
	if k.meta == nil {
		if e := n.seg.Entries[j]; Ledgered(e.Key) {
			k.entries = append(k.entries, ledgered{e: e, shard: shard, anchored: n.anchored})
		}
		return nil
	}
	n.kept[j] = true
	return nil
}

// scanItems calls yield with each of the table's items.
func (v *verifier) scanItems(yield func(Item) error) error {
	if v.in.ScanItems != nil {
		return v.in.ScanItems(yield)
	}
	for _, it := range v.in.Items {
		if err := yield(it); err != nil {
			return err
		}
	}
	return nil
}

// run runs the key stage once in memory, or once per partition.
func (k *keyStage) run(base map[string]baselined) error {
	v := k.v
	if k.meta == nil {
		var items []Item
		if v.in.ScanItems == nil {
			items = v.in.Items
		} else if err := v.scanItems(func(it Item) error { items = append(items, it); return nil }); err != nil {
			return fmt.Errorf("the table's items: %w", err)
		}
		entries := k.entries
		k.entries = nil
		k.pass(entries, items, base)
		return nil
	}
	if err := v.scanItems(func(it Item) error {
		key := it.S(KeyAttr)
		if !Ledgered(key) {
			return nil
		}
		return k.partition(key).write(spilled{Item: it})
	}); err != nil {
		return fmt.Errorf("the table's items: %w", err)
	}
	bases := make([]map[string]baselined, len(k.parts))
	for key, b := range base {
		i := k.index(key)
		if bases[i] == nil {
			bases[i] = map[string]baselined{}
		}
		bases[i][key] = b
	}
	for i, s := range k.parts {
		entries, items, err := k.load(s)
		if err != nil {
			return err
		}
		k.pass(entries, items, bases[i])
		bases[i] = nil
	}
	return nil
}

// index is the number of key's partition: a hash seeded anew each run,
// so that no one who chooses keys (a sender's idempotency key) can pile
// them into one partition.
func (k *keyStage) index(key string) int {
	return int(maphash.String(k.seed, key) % uint64(len(k.parts)))
}

// pass runs the key stage on the changes, items and baseline entries of
// one partition's keys.
func (k *keyStage) pass(entries []ledgered, items []Item, base map[string]baselined) {
	v := k.v
	v.records(entries, items, base)
	v.runChecks()
	v.writers(entries, k.signed)
	v.reduceAcross() // verify_across.go
}

// load reads a partition's changes back, those the chain stage kept, in
// chain order (shard, place on the chain, place in the segment), and its
// items, and removes its file.
func (k *keyStage) load(s *spill) ([]ledgered, []Item, error) {
	type placed struct {
		l        ledgered
		pos, idx int
	}
	var kept []placed
	var items []Item
	err := s.out.Flush()
	if err == nil {
		err = readSpill(s.f, func(sp spilled) error {
			switch {
			case sp.Entry != nil:
				if sp.Seg < 0 || sp.Seg >= len(k.nodes) || k.nodes[sp.Seg] == nil {
					return fmt.Errorf("a change of segment %d, which was not read", sp.Seg)
				}
				n := k.nodes[sp.Seg]
				if sp.Index < 0 || sp.Index >= len(n.kept) || !n.kept[sp.Index] {
					return nil // off the chain, a duplicate, or never reached
				}
				sp.Entry.oldSHA = sp.OldSHA
				kept = append(kept, placed{ledgered{e: *sp.Entry, shard: n.seg.Shard, anchored: n.anchored}, n.pos, sp.Index})
			case sp.Item != nil:
				items = append(items, sp.Item)
			default:
				return errors.New("a line that is neither a change nor an item")
			}
			return nil
		})
	}
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
	s.f = nil
	if err != nil {
		return nil, nil, fmt.Errorf("verify's spill file: %w", err)
	}
	slices.SortFunc(kept, func(a, b placed) int {
		return cmp.Or(strings.Compare(a.l.shard, b.l.shard), cmp.Compare(a.pos, b.pos), cmp.Compare(a.idx, b.idx))
	})
	entries := make([]ledgered, len(kept))
	for i, p := range kept {
		entries[i] = p.l
	}
	return entries, items, nil
}

// readSpill reads f's records from its start, one at a time, until its
// end.
func readSpill(f *os.File, each func(spilled) error) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := spillReader{bufio.NewReaderSize(f, 1<<16)}
	for {
		sp, err := r.next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if err := each(sp); err != nil {
			return err
		}
	}
}

// splitForTests, set by this package's tests alone (export_test.go), makes
// every Verify read its input as streams and check its keys in that many
// partitions, so that each test of Verify also checks a partitioned run.
var splitForTests int

// segmentReader reads segments, one by one, from a map.
func segmentReader(segments map[string][]byte) ([]string, func(string) ([]byte, error)) {
	return slices.Sorted(mapKeys(segments)), func(key string) ([]byte, error) {
		raw, ok := segments[key]
		if !ok {
			return nil, fmt.Errorf("no object %s", key)
		}
		return raw, nil
	}
}

// split is in read as streams (Input.ReadSegment, ScanItems) and checked
// in n partitions.
func (in Input) split(n int) Input {
	splitRuns.Add(1)
	in.Partitions = n
	if in.ReadSegment != nil || in.ScanItems != nil {
		return in // streams already
	}
	items := in.Items
	in.SegmentKeys, in.ReadSegment = segmentReader(in.Segments)
	in.ScanItems = func(yield func(Item) error) error {
		for _, it := range items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	}
	in.Segments, in.Items = nil, nil
	return in
}

// splitRuns counts the runs split (splitForTests).
var splitRuns atomic.Int64

// PartitionBytes is the bytes of segments and table items one partition
// of the key stage is sized for: decoded, a ledgered change takes about
// six times its bytes, and the garbage at the default GOGC as much again
// (BenchmarkVerifyVersions), so a partition takes a few hundred MiB of
// heap.
const PartitionBytes = 32 << 20

// MaxPartitions bounds Input.Partitions (an open file each): past
// MaxPartitions × PartitionBytes (8 GiB) of segments and items, a
// partition holds more than PartitionBytes.
const MaxPartitions = 256

// PartitionsFor is Input.Partitions for segments and items of that many
// bytes in all, each partition sized for per bytes (0: PartitionBytes).
func PartitionsFor(bytes, per int64) int {
	if per <= 0 {
		per = PartitionBytes
	}
	return int(min(MaxPartitions, max(1, (bytes+per-1)/per)))
}
