package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The baseline (review F3): a one-off scan of the table, written when the
// ledger starts on a table that already holds records. Each item's entry
// says what it was when the scan read it; nothing before that is proven.
const (
	BaselineFormat = "dlqq-ledger-baseline/1"
	BaselinePrefix = "ledger/baseline/"
	EventBaseline  = "BASELINE"
)

// BaselineKey is the object key of baseline object n (1, 2, ...).
func BaselineKey(n int64) string { return fmt.Sprintf("%s%06d.json", BaselinePrefix, n) }

// BaselineEntry is one item as the baseline scan read it.
type BaselineEntry struct {
	Event string `json:"event"`
	Key   string `json:"key"`
	Item  Item   `json:"item"`
}

// Baseline is one object of the baseline chain: its entries sorted by key,
// chained to the previous object (absent on the first) as segments are.
type Baseline struct {
	Format    string `json:"format"`
	N         int64  `json:"n"`
	At        string `json:"at"`
	StreamARN string `json:"stream_arn"`
	Prev      *Ref   `json:"prev,omitempty"`
	// Items counts the entries of this object and those before it.
	Items int64 `json:"items"`
	// Resume is the table key the scan goes on after (absent on the last
	// object); Complete marks the last object.
	Resume   string          `json:"resume,omitempty"`
	Complete bool            `json:"complete,omitempty"`
	Entries  []BaselineEntry `json:"entries"`
}

// BaselineRef is the newest baseline object as a digest names it, with the
// number of items in the whole baseline.
type BaselineRef struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Items  int64  `json:"items"`
}

// NewBaseline builds baseline object n over items (sorted here by key),
// chained to prev (nil for n = 1), which with the objects before it held
// prevItems entries. The caller sets Resume or Complete.
func NewBaseline(n int64, at time.Time, streamARN string, prev *Ref, prevItems int64, items []Item) (Baseline, error) {
	if n < 1 || (n == 1) != (prev == nil) {
		return Baseline{}, fmt.Errorf("baseline %d with prev %v", n, prev != nil)
	}
	es := make([]BaselineEntry, 0, len(items))
	for _, it := range items {
		key := it.S(KeyAttr)
		if key == "" {
			return Baseline{}, errors.New("baseline: an item without a key")
		}
		es = append(es, BaselineEntry{Event: EventBaseline, Key: key, Item: it})
	}
	slices.SortFunc(es, func(a, b BaselineEntry) int { return strings.Compare(a.Key, b.Key) })
	return Baseline{Format: BaselineFormat, N: n, At: at.UTC().Format(time.RFC3339Nano), StreamARN: streamARN, Prev: prev,
		Items: prevItems + int64(len(es)), Entries: es}, nil
}

// Encode returns the object's canonical bytes.
func (b Baseline) Encode() ([]byte, error) { return canonical(b) }

// ParseBaseline decodes and checks a baseline object's form.
func ParseBaseline(raw []byte) (Baseline, error) {
	var b Baseline
	if err := decodeStrict(raw, &b); err != nil {
		return Baseline{}, fmt.Errorf("parse baseline: %w", err)
	}
	if b.Format != BaselineFormat || b.N < 1 || (b.N == 1) != (b.Prev == nil) {
		return Baseline{}, fmt.Errorf("parse baseline: format %q, n %d with prev %v", b.Format, b.N, b.Prev != nil)
	}
	if _, err := time.Parse(time.RFC3339Nano, b.At); err != nil {
		return Baseline{}, fmt.Errorf("parse baseline: at %q", b.At)
	}
	if b.Complete == (b.Resume != "") || b.Items < int64(len(b.Entries)) {
		return Baseline{}, fmt.Errorf("parse baseline: complete %v with resume %q, %d items", b.Complete, b.Resume, b.Items)
	}
	for i, e := range b.Entries {
		if e.Event != EventBaseline || e.Key == "" || e.Item == nil || e.Item.S(KeyAttr) != e.Key {
			return Baseline{}, fmt.Errorf("parse baseline: entry %d is not a baseline entry of its key", i)
		}
		if i > 0 && b.Entries[i-1].Key >= e.Key {
			return Baseline{}, fmt.Errorf("parse baseline: entry %d (%s) not after %s", i, e.Key, b.Entries[i-1].Key)
		}
	}
	return b, nil
}

type baselined struct {
	item    Item
	canon   []byte
	version int64
	seal    string
}

// baseline checks the baseline chain (each object chained to the one
// before; the newest the one the newest signed digest names) and returns
// its items by key.
func (v *verifier) baseline(signed []*parsedDigest) map[string]baselined {
	var ref *BaselineRef
	for _, p := range signed {
		if p.d.Baseline != nil {
			ref = p.d.Baseline
		}
	}
	if len(v.in.Baselines) == 0 {
		if ref != nil {
			v.fail(KindBaseline, ref.Key, "named by a signed digest but missing")
		}
		return nil
	}
	var chain []Baseline
	var prev *Ref
	var total int64
	for n := int64(1); ; n++ {
		key := BaselineKey(n)
		raw, ok := v.in.Baselines[key]
		if !ok {
			break
		}
		b, err := ParseBaseline(raw)
		switch {
		case err != nil:
			v.fail(KindBaseline, key, "%v", err)
			return nil
		case b.N != n:
			v.fail(KindBaseline, key, "holds baseline %d", b.N)
			return nil
		case n > 1 && (b.Prev.Key != prev.Key || b.Prev.SHA256 != prev.SHA256):
			v.fail(KindBaseline, key, "prev does not match %s", prev.Key)
			return nil
		case b.Items != int64(len(b.Entries))+total:
			v.fail(KindBaseline, key, "counts %d items, the chain holds %d", b.Items, int64(len(b.Entries))+total)
			return nil
		}
		total = b.Items
		chain = append(chain, b)
		prev = &Ref{Key: key, SHA256: SHA256Hex(raw)}
	}
	if len(chain) != len(v.in.Baselines) {
		v.fail(KindBaseline, BaselinePrefix, "%d objects, %d of them on the chain from %s", len(v.in.Baselines), len(chain), BaselineKey(1))
		return nil
	}
	out := map[string]baselined{}
	for _, b := range chain {
		for _, e := range b.Entries {
			c, err := e.Item.Canonical()
			if err != nil {
				v.fail(KindBaseline, e.Key, "baseline item: %v", err)
				continue
			}
			if _, dup := out[e.Key]; dup {
				v.fail(KindBaseline, e.Key, "twice in the baseline")
			}
			ver, _ := e.Item.Int(VersionAttr)
			out[e.Key] = baselined{item: e.Item, canon: c, version: ver, seal: e.Item.S(SealAttr)}
		}
	}
	if ref != nil && (prev == nil || ref.Key != prev.Key || ref.SHA256 != prev.SHA256) {
		v.fail(KindBaseline, ref.Key, "named by a signed digest, not the end of the baseline chain")
		return nil
	}
	if len(chain) == 0 || !chain[len(chain)-1].Complete {
		v.fail(KindBaseline, BaselinePrefix, "incomplete (a baseline run is under way or stopped: run it again to finish it)")
		return nil
	}
	v.baselineAt = chain[len(chain)-1].At
	v.baselineStart, _ = time.Parse(time.RFC3339Nano, chain[0].At)
	switch {
	case ref == nil:
		v.res.BaselineUnanchored = true
	case ref.Key != prev.Key || ref.SHA256 != prev.SHA256 || ref.Items != int64(len(out)):
		v.fail(KindBaseline, ref.Key, "the digest's baseline (%s, %d items) is not the chain's (%s, %d items)", ref.Key, ref.Items, prev.Key, len(out))
		return nil
	}
	return out
}

// startAfterBaseline decides where a key's ledgered history starts when the
// key is in the baseline and its first ledgered change is not an INSERT:
// after the baseline version (the change's old image is it), or at a
// change made before the scan (a later change is the baseline version),
// whose own predecessor is unproven.
func (v *verifier) startAfterBaseline(key string, b baselined, ls []ledgered) (*version, []ledgered) {
	bv := &version{item: b.item, canon: b.canon, baseline: true, e: Entry{Key: key, Event: EventBaseline}}
	if o := ls[0].e.Old; o != nil && o.Version == b.version && o.Seal == b.seal {
		return bv, ls
	}
	for _, l := range ls {
		if l.e.Item == nil {
			continue
		}
		if c, err := l.e.Item.Canonical(); err == nil && bytes.Equal(c, b.canon) {
			first := version{item: ls[0].e.Item, e: ls[0].e}
			if first.item != nil {
				first.canon, _ = first.item.Canonical()
			}
			v.preLedger(key)
			return &first, ls[1:]
		}
	}
	return bv, ls
}

// baselineInTime keeps a baseline only when its scan began before (or at)
// the ledger's first segment entry and its first signed digest (review 2
// R2-4): a later baseline would pass off items written behind the ledger
// as pre-ledger. A later one is named, and its items are judged as if
// there were no baseline.
func (v *verifier) baselineInTime(base map[string]baselined, signed []*parsedDigest) map[string]baselined {
	if base == nil {
		return nil
	}
	first := v.firstAt // the ledger's first change (seeEntry)
	if len(signed) > 0 {
		if t, err := time.Parse(time.RFC3339Nano, signed[0].d.At); err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() || !v.baselineStart.After(first) {
		return base
	}
	v.fail(KindBaseline, BaselinePrefix, "taken after the ledger started (its items are not pre-ledger): begun %s, the ledger's first change or digest %s",
		v.baselineStart.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
	v.baselineAt = ""
	return nil
}
