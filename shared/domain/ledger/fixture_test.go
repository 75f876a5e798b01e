package ledger_test

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/testkeys"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const arn = "arn:aws:dynamodb:us-east-1:000000000000:table/q/stream/2026-12-01T00:00:00.000"

// fixture builds a ledger as the ledger function would, with a table that
// matches it, for tests to tamper with.
type fixture struct {
	t       testing.TB
	key     *ecdsa.PrivateKey
	der     []byte
	seq     int64
	now     time.Time
	pending map[string][]ledger.Entry
	heads   map[string]*ledger.Head
	segs    map[string][]byte
	digests map[string][]byte
	last    *ledger.Digest
	lastRaw []byte
	table   map[string]ledger.Item
	// baselines and baseRef: the baseline objects, and the newest one as
	// the next digest names it.
	baselines map[string][]byte
	baseRef   *ledger.BaselineRef
	// oldItems: each MODIFY carries its full old image (old_item), as the
	// ledger writes it.
	oldItems bool
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	k, der := testkeys.ECDSA(t)
	return &fixture{t: t, key: k, der: der, seq: 1000000000000000000, now: t0, pending: map[string][]ledger.Entry{},
		heads: map[string]*ledger.Head{}, segs: map[string][]byte{}, digests: map[string][]byte{}, table: map[string]ledger.Item{},
		baselines: map[string][]byte{}}
}

func seal(id string, v int64) string { return fmt.Sprintf("seal-%s-%d", id, v) }

func record(id string, v int64, status string) ledger.Item {
	it := ledger.Item{"dlq_id": ledger.Str(id), "version": ledger.Num(strconv.FormatInt(v, 10)), "seal": ledger.Str(seal(id, v)),
		"status": ledger.Str(status), "tags": ledger.StrSet("b", "a")}
	if v > 1 {
		it["prev_seal"] = ledger.Str(seal(id, v-1))
	}
	return it
}

func (f *fixture) nextSeq() string {
	f.seq += 7
	f.now = f.now.Add(time.Second)
	return strconv.FormatInt(f.seq, 10) + "000"
}

// write ledgers (and stores) version v of id on shard: an INSERT for
// version 1, else a MODIFY of the table's current version.
func (f *fixture) write(shard, id string, v int64) {
	it := record(id, v, "OPEN")
	e := ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventInsert, At: f.now.Format(time.RFC3339Nano), Key: id, Item: it}
	if old, ok := f.table[id]; ok {
		ov, _ := old.Int("version")
		e.Event, e.Old = ledger.EventModify, &ledger.Old{Version: ov, Seal: old.S("seal")}
		if f.oldItems {
			e.OldItem = old
		}
	}
	f.pending[shard] = append(f.pending[shard], e)
	f.table[id] = it
}

func (f *fixture) remove(shard, id string) {
	old := f.table[id]
	ov, _ := old.Int("version")
	f.pending[shard] = append(f.pending[shard], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventRemove, At: f.now.Format(time.RFC3339Nano),
		Key: id, Removed: old, Old: &ledger.Old{Version: ov, Seal: old.S("seal")}})
	delete(f.table, id)
}

// flush writes shard's pending entries as its next segment.
func (f *fixture) flush(shard string) string {
	var prev *ledger.Ref
	h := f.heads[shard]
	if h != nil {
		prev = &ledger.Ref{Key: h.SegmentKey, SHA256: h.SegmentSHA256}
	}
	s, err := ledger.NewSegment(arn, shard, prev, f.pending[shard])
	if err != nil {
		f.t.Fatal(err)
	}
	f.putSegment(s)
	delete(f.pending, shard)
	return ledger.SegmentKey(shard, s.FirstSeq)
}

// putSegment stores s as its shard's new head, whatever it holds.
func (f *fixture) putSegment(s ledger.Segment) {
	raw, err := s.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	key := ledger.SegmentKey(s.Shard, s.FirstSeq)
	f.segs[key] = raw
	h := f.heads[s.Shard]
	if h == nil {
		h = &ledger.Head{Shard: s.Shard}
		f.heads[s.Shard] = h
	}
	h.LastSeq, h.SegmentKey, h.SegmentSHA256 = s.LastSeq, key, ledger.SHA256Hex(raw)
	h.Segments++
}

func (f *fixture) sign(d ledger.Digest, k *ecdsa.PrivateKey) ledger.Digest {
	f.t.Helper()
	return testkeys.SignDigest(f.t, k, d)
}

// digest signs the next digest over the current heads.
func (f *fixture) digest() string {
	f.t.Helper()
	return f.digestWith(func(d *ledger.Digest) { d.Baseline = f.baseRef })
}

// digestWith signs the next digest over the current heads, as set sets
// its other members, and returns its key.
func (f *fixture) digestWith(set func(*ledger.Digest)) string {
	f.t.Helper()
	var heads []ledger.Head
	for _, h := range f.heads {
		heads = append(heads, *h)
	}
	n := int64(1)
	var prev *ledger.DigestPrev
	if f.last != nil {
		n = f.last.N + 1
		prev = &ledger.DigestPrev{Key: ledger.DigestKey(f.last.N), SHA256: ledger.SHA256Hex(f.lastRaw), Signature: f.last.Signature}
	}
	d := ledger.NewDigest(n, f.now, arn, "key", ledger.AlgECDSA, prev, heads)
	set(&d)
	d = f.sign(d, f.key)
	raw, err := d.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	f.digests[ledger.DigestKey(n)] = raw
	f.last, f.lastRaw = &d, raw
	return ledger.DigestKey(n)
}

func (f *fixture) input() ledger.Input {
	in := ledger.Input{Segments: maps.Clone(f.segs), Digests: maps.Clone(f.digests), PublicKeyDER: f.der, Now: f.now,
		Baselines: maps.Clone(f.baselines), CheckVersion: fixtureCheck}
	for _, it := range f.table {
		in.Items = append(in.Items, it)
	}
	return in
}

// standard is a ledger over two shards: a, b and c written, b modified
// twice, two digests, everything anchored.
func standard(t testing.TB) *fixture {
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.write("shard-1", "src#b", 1)
	f.flush("shard-1")
	f.write("shard-2", "src#c", 1)
	f.write("shard-2", "#pol#src#p1", 1)
	f.flush("shard-2")
	f.digest()
	f.write("shard-1", "src#b", 2)
	f.flush("shard-1")
	f.write("shard-1", "src#b", 3)
	f.write("shard-1", "src#a", 2)
	f.flush("shard-1")
	f.digest()
	return f
}

// fixtureCheck is the fixture's Input.CheckVersion (the real one decodes
// records: dynamostore.LedgerVersionCheck): a version's seal is the
// fixture's seal of its id and version, and its payload is its
// predecessor's.
func fixtureCheck(prev, next ledger.Item) error {
	v, _ := next.Int("version")
	if next.S("seal") != seal(next.S("dlq_id"), v) {
		return errors.New("its seal does not verify")
	}
	if prev != nil && prev.S("payload") != next.S("payload") {
		return errors.New("the payload changed")
	}
	return nil
}

// baseline writes a complete baseline: one object per list of items, for
// the next digest to name.
func (f *fixture) baseline(objects ...[]ledger.Item) {
	var prev *ledger.Ref
	var total int64
	for i, items := range objects {
		n := int64(i + 1)
		b, err := ledger.NewBaseline(n, f.now, arn, prev, total, items)
		if err != nil {
			f.t.Fatal(err)
		}
		if b.Complete = i == len(objects)-1; !b.Complete {
			b.Resume = fmt.Sprintf("after-%d", n)
		}
		raw, err := b.Encode()
		if err != nil {
			f.t.Fatal(err)
		}
		key := ledger.BaselineKey(n)
		f.baselines[key] = raw
		prev, total = &ledger.Ref{Key: key, SHA256: ledger.SHA256Hex(raw)}, b.Items
		f.baseRef = &ledger.BaselineRef{Key: key, SHA256: prev.SHA256, Items: total}
	}
}

// named fails the test unless Verify over the fixture names a problem of
// kind at where; what says what the case is.
func (f *fixture) named(kind ledger.Kind, where, what string) {
	f.t.Helper()
	if res := ledger.Verify(f.input()); !res.Has(kind, where) {
		f.t.Fatalf("%s: %v", what, res.Problems)
	}
}

// named is a problem a test wants Verify to name: its kind and subject.
type named struct {
	kind    ledger.Kind
	subject string
}

// wantNamed fails t for each of want that res does not name.
func wantNamed(t *testing.T, res ledger.Result, want ...named) {
	t.Helper()
	for _, w := range want {
		if !res.Has(w.kind, w.subject) {
			t.Errorf("no %s naming %s in %v", w.kind, w.subject, res.Problems)
		}
	}
}
