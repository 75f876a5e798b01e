package ledger

import (
	"bytes"
	"slices"
	"time"
)

type version struct {
	item  Item // nil after a REMOVE
	canon []byte
	e     Entry
}

// records checks each key's ledgered versions and the table against them.
func (v *verifier) records(entries []ledgered) {
	byKey := map[string][]ledgered{}
	for _, l := range entries {
		if Ledgered(l.e.Key) {
			byKey[l.e.Key] = append(byKey[l.e.Key], l)
		}
	}
	newest := make(map[string]version, len(byKey))
	for key, ls := range byKey {
		slices.SortFunc(ls, func(a, b ledgered) int { return SeqCompare(a.e.Seq, b.e.Seq) })
		var prev *version
		for _, l := range ls {
			cur := v.step(key, prev, l.e)
			prev = &cur
		}
		newest[key] = *prev
	}
	table := map[string]Item{}
	for _, it := range v.in.Items {
		key := it.S(KeyAttr)
		if Ledgered(key) {
			table[key] = it
		}
	}
	v.res.Items = len(table)
	for key, nv := range newest {
		it, ok := table[key]
		switch {
		case !ok && nv.item == nil:
			v.fail(KindDeleted, key, "deleted (its newest ledgered change %s is a REMOVE)", nv.e.Seq)
		case !ok:
			v.fail(KindDeleted, key, "absent from the table; ledgered at %s", nv.e.Seq)
		default:
			c, err := it.Canonical()
			if err == nil && nv.canon != nil && bytes.Equal(c, nv.canon) {
				continue
			}
			if v.recent(it) {
				v.res.NotYetLedgered++
				continue
			}
			if nv.item == nil {
				v.fail(KindUnledgered, key, "in the table after its ledgered REMOVE %s", nv.e.Seq)
			} else {
				v.fail(KindRewritten, key, "not the ledgered version (change %s)", nv.e.Seq)
			}
		}
	}
	for key, it := range table {
		if _, ok := newest[key]; ok {
			continue
		}
		if v.recent(it) {
			v.res.NotYetLedgered++
			continue
		}
		v.fail(KindUnledgered, key, "never ledgered")
	}
}

// step checks change e of key against the previous ledgered version.
func (v *verifier) step(key string, prev *version, e Entry) version {
	cur := version{e: e, item: e.Item}
	if e.Item != nil {
		cur.canon, _ = e.Item.Canonical()
	}
	if prev == nil {
		if e.Event != EventInsert {
			v.fail(KindVersionMissing, key, "its first ledgered change %s is a %s: earlier versions missing", e.Seq, e.Event)
		}
		return cur
	}
	if prev.item == nil {
		if e.Event != EventInsert {
			v.fail(KindOldMismatch, key, "change %s is a %s after the REMOVE %s", e.Seq, e.Event, prev.e.Seq)
		}
		return cur
	}
	pv, pvOK := prev.item.Int(VersionAttr)
	pseal := prev.item.S(SealAttr)
	if e.Event == EventInsert {
		v.fail(KindOldMismatch, key, "change %s is an INSERT over the ledgered version of %s", e.Seq, prev.e.Seq)
		return cur
	}
	if e.Old != nil && pvOK && (e.Old.Version != pv || e.Old.Seal != pseal) {
		v.fail(KindOldMismatch, key, "change %s replaced version %d, the ledger holds version %d", e.Seq, e.Old.Version, pv)
	}
	if e.Event == EventRemove {
		if c, err := e.Removed.Canonical(); err != nil || !bytes.Equal(c, prev.canon) {
			v.fail(KindOldMismatch, key, "REMOVE %s removed an item that is not the ledgered version", e.Seq)
		}
		return cur
	}
	if bytes.Equal(cur.canon, prev.canon) {
		v.fail(KindDuplicate, key, "change %s repeats the version of %s", e.Seq, prev.e.Seq)
		return cur
	}
	nv, nvOK := e.Item.Int(VersionAttr)
	if !pvOK || !nvOK {
		return cur
	}
	if nv == pv {
		// The one change that keeps a version is an integrity hold.
		if !sameButHold(prev.item, e.Item) {
			v.fail(KindRewritten, key, "change %s rewrote version %d in place", e.Seq, nv)
		}
		return cur
	}
	switch {
	case nv > pv+1:
		v.fail(KindVersionMissing, key, "version %d missing (change %s has version %d after %d)", pv+1, e.Seq, nv, pv)
	case nv < pv:
		v.fail(KindVersionMissing, key, "change %s goes back to version %d after %d", e.Seq, nv, pv)
	case e.Item.S(PrevSealAttr) != pseal:
		v.fail(KindVersionMissing, key, "version %d's prev_seal is not version %d's seal", nv, pv)
	}
	return cur
}

// recent reports whether an item's last change is within the grace.
func (v *verifier) recent(it Item) bool {
	if v.in.Grace <= 0 {
		return false
	}
	var newest time.Time
	for _, a := range []string{"status_since", "last_seen"} {
		if t, err := time.Parse(time.RFC3339Nano, it.S(a)); err == nil && t.After(newest) {
			newest = t
		}
	}
	return !newest.IsZero() && v.in.Now.Sub(newest) < v.in.Grace
}

// sameButHold reports whether two items differ at most in the integrity
// hold's attributes.
func sameButHold(a, b Item) bool {
	strip := func(it Item) []byte {
		c := make(Item, len(it))
		for k, v := range it {
			if k != HoldAttr && k != HoldAtAttr {
				c[k] = v
			}
		}
		out, _ := c.Canonical()
		return out
	}
	return bytes.Equal(strip(a), strip(b))
}
