package ledger

import (
	"bytes"
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type version struct {
	item  Item // nil after a REMOVE
	canon []byte
	e     Entry
	// baseline is set on a version known only from the baseline.
	baseline bool
}

// clockSkew is how far in the future an item's own time may lie and still
// count as recent (the clocks of the writers and of the verifier differ).
const clockSkew = time.Minute

// records checks each key's ledgered versions and the table against them:
// entries, items and base are those of one pass's keys (a key's all).
func (v *verifier) records(entries []ledgered, items []Item, base map[string]baselined) {
	byKey := map[string][]ledgered{}
	for _, l := range entries {
		if Ledgered(l.e.Key) {
			byKey[l.e.Key] = append(byKey[l.e.Key], l)
		}
	}
	newest := make(map[string]version, len(byKey)+len(base))
	for key, ls := range byKey {
		orderVersions(ls)
		var prev *version
		if b, ok := base[key]; ok && ls[0].e.Event != EventInsert {
			prev, ls = v.startAfterBaseline(key, b, ls)
		}
		v.across(key, prev, ls)
		for _, l := range ls {
			cur := v.step(key, prev, l.e)
			prev = &cur
		}
		newest[key] = *prev
	}
	for key, b := range base {
		if _, ok := newest[key]; !ok {
			newest[key] = version{item: b.item, canon: b.canon, baseline: true, e: Entry{Key: key, Event: EventBaseline}}
			v.across(key, &version{item: b.item}, nil)
		}
	}
	table := map[string]Item{}
	for _, it := range items {
		key := it.S(KeyAttr)
		if Ledgered(key) {
			table[key] = it
		}
	}
	v.res.Items += len(table)
	for _, key := range slices.Sorted(mapKeys(newest)) {
		nv := newest[key]
		it, ok := table[key]
		switch {
		case !ok && nv.item == nil:
			v.fail(KindDeleted, key, "deleted (its newest ledgered change %s is a REMOVE)", nv.e.Seq)
		case !ok && nv.baseline:
			v.fail(KindDeleted, key, "absent from the table; in the baseline")
		case !ok:
			v.fail(KindDeleted, key, "absent from the table; ledgered at %s", nv.e.Seq)
		default:
			c, err := it.Canonical()
			if err == nil && nv.canon != nil && bytes.Equal(c, nv.canon) {
				if nv.baseline {
					v.preLedger(key)
				}
				continue
			}
			if v.pending(key, it, nv.item) {
				continue
			}
			switch {
			case nv.item == nil:
				v.fail(KindUnledgered, key, "in the table after its ledgered REMOVE %s", nv.e.Seq)
			case nv.baseline:
				v.fail(KindRewritten, key, "not its baseline version, and no ledgered change")
			default:
				v.fail(KindRewritten, key, "not the ledgered version (change %s)", nv.e.Seq)
			}
		}
	}
	for _, key := range slices.Sorted(mapKeys(table)) {
		if _, ok := newest[key]; ok {
			continue
		}
		if v.pending(key, table[key], nil) {
			continue
		}
		v.fail(KindUnledgered, key, "never ledgered")
	}
}

// orderVersions orders one key's entries by the version they carry (a
// hold after the change that made the version, a REMOVE after both), then
// by sequence number: sequence
// numbers are ordered within a shard only, and a key's later changes may
// be in a child shard. A key with an entry without a version is ordered
// by sequence number alone.
func orderVersions(ls []ledgered) {
	versions := make([]int64, len(ls))
	for i, l := range ls {
		n, ok := entryVersion(l.e)
		if !ok {
			slices.SortFunc(ls, func(a, b ledgered) int { return SeqCompare(a.e.Seq, b.e.Seq) })
			return
		}
		versions[i] = n
	}
	idx := make([]int, len(ls))
	for i := range idx {
		idx[i] = i
	}
	// Within a version: the change that made it, then changes that keep
	// it (an integrity hold), then its REMOVE.
	rank := func(e Entry, v int64) int {
		switch {
		case e.Event == EventRemove:
			return 2
		case e.Old != nil && e.Old.Version == v:
			return 1
		}
		return 0
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(versions[a], versions[b]), cmp.Compare(rank(ls[a].e, versions[a]), rank(ls[b].e, versions[b])), SeqCompare(ls[a].e.Seq, ls[b].e.Seq))
	})
	sorted := make([]ledgered, len(ls))
	for i, j := range idx {
		sorted[i] = ls[j]
	}
	copy(ls, sorted)
}

// entryVersion is the version an entry's item has (a REMOVE: the removed
// one's).
func entryVersion(e Entry) (int64, bool) {
	switch {
	case e.Item != nil:
		return e.Item.Int(VersionAttr)
	case e.Old != nil:
		return e.Old.Version, true
	case e.Removed != nil:
		return e.Removed.Int(VersionAttr)
	}
	return 0, false
}

// step checks change e of key against the previous ledgered version.
func (v *verifier) step(key string, prev *version, e Entry) version {
	cur := version{e: e, item: e.Item}
	if e.Item != nil {
		cur.canon, _ = e.Item.Canonical()
		v.checkIndexKey(key, prev, e)
	}
	if prev == nil || prev.item == nil {
		switch {
		case prev == nil && e.Event != EventInsert:
			v.fail(KindVersionMissing, key, "its first ledgered change %s is a %s: earlier versions missing", e.Seq, e.Event)
		case prev != nil && e.Event != EventInsert:
			v.fail(KindOldMismatch, key, "change %s is a %s after the REMOVE %s", e.Seq, e.Event, prev.e.Seq)
		default:
			v.check(key, nil, nil, e, cur.canon)
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
		if prev.baseline {
			v.fail(KindOldMismatch, key, "change %s replaced version %d, the baseline holds version %d", e.Seq, e.Old.Version, pv)
		} else {
			v.fail(KindOldMismatch, key, "change %s replaced version %d, the ledger holds version %d", e.Seq, e.Old.Version, pv)
		}
	} else if prev.baseline {
		v.preLedger(key)
	}
	if e.Event == EventRemove {
		if c, err := e.Removed.Canonical(); err != nil || !bytes.Equal(c, prev.canon) {
			v.fail(KindOldMismatch, key, "REMOVE %s removed an item that is not the ledgered version", e.Seq)
		}
		return cur
	}
	// The full old image a MODIFY carries (the counters are recounted from
	// it) must be the version before it, as a REMOVE's removed item must.
	if e.oldSHA != "" && !prev.baseline && prev.canon != nil && e.oldSHA != SHA256Hex(prev.canon) {
		v.fail(KindOldMismatch, key, "change %s's old image is not the ledgered version of %s", e.Seq, prev.e.Seq)
	}
	if bytes.Equal(cur.canon, prev.canon) {
		v.fail(KindDuplicate, key, "change %s repeats the version of %s", e.Seq, prev.e.Seq)
		return cur
	}
	nv, nvOK := e.Item.Int(VersionAttr)
	switch {
	case !nvOK:
		// Every writer numbers its versions: an item without a whole
		// version number is no version any of them made, and the one
		// after it would otherwise be compared with nothing.
		v.fail(KindForged, key, "forged: change %s's item has no version number", e.Seq)
		return cur
	case !pvOK:
		v.check(key, prev.item, prev.canon, e, cur.canon) // the version before it was named so
		return cur
	}
	_, held := prev.item[HoldAttr]
	if nv == pv {
		// The one change that keeps a version adds an integrity hold.
		switch {
		case held && e.Item[HoldAttr].S == nil:
			v.fail(KindRewritten, key, "change %s lifted the integrity hold of version %d in place", e.Seq, nv)
		case v.addsIndexKey(prev.item, e.Item):
			// The index backfill: the version as it was, plus its index key.
		case held || !addsHold(prev.item, e.Item):
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
	case held:
		v.fail(KindRewritten, key, "change %s replaced version %d while it was held (a held record takes no new version)", e.Seq, pv)
	default:
		v.check(key, prev.item, prev.canon, e, cur.canon)
	}
	return cur
}

// check queues Input.CheckVersion of a version and the one before it (nil
// for a key's first version), with their canonical bytes, unless an
// earlier run passed it (Input.Proofs); runChecks runs the queue.
func (v *verifier) check(key string, prev Item, prevCanon []byte, e Entry, canon []byte) {
	if v.in.CheckVersion == nil {
		return
	}
	proof, ok := v.in.Proofs.key(proofVersion, prev, prevCanon, e.Item, canon)
	if v.in.Proofs.has(proof, ok) {
		return
	}
	v.checks = append(v.checks, checkJob{key: key, prev: prev, e: e, proof: proof, proofOK: ok})
}

type checkJob struct {
	key     string
	prev    Item
	e       Entry
	proof   ProofKey
	proofOK bool
}

// runChecks runs the queued version checks on every CPU (decoding and
// re-sealing each version is most of Verify's time) and names each
// version that fails as forged.
func (v *verifier) runChecks() {
	jobs := v.checks
	v.checks = nil
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				errs[i] = callCheck(v.in.CheckVersion, jobs[i].prev, jobs[i].e.Item)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		j := jobs[i]
		if err == nil {
			v.in.Proofs.pass(j.proof, j.proofOK)
			continue
		}
		nv, _ := j.e.Item.Int(VersionAttr)
		if j.prev == nil {
			v.fail(KindForged, j.key, "forged: version %d (change %s) is not a first version: %v", nv, j.e.Seq, err)
			continue
		}
		v.fail(KindForged, j.key, "forged: version %d is not a transition of version %d (change %s): %v", nv, nv-1, j.e.Seq, err)
	}
}

// callCheck calls check, turning a panic into an error.
func callCheck(check func(prev, next Item) error, prev, next Item) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the version check failed: %v", r)
		}
	}()
	return check(prev, next)
}

// pending reports whether an item that is not its ledgered version counts
// as not yet ledgered, and records it with its age. Its own newest time
// (status_since, last_seen, and the newest attempt, payload read,
// correction or hold: a payload read changes none of the first two) must
// lie after Input.ReadStart less Grace and not after Now plus clockSkew. When the
// key has a ledgered version (prev), the item must also be the very next
// version of it (version + 1, prev_seal its seal) and, with a version
// check, a transition of it: every table write streams, so anything else
// is not a change on its way.
func (v *verifier) pending(key string, it, prev Item) bool {
	if v.in.Grace <= 0 {
		return false
	}
	if prev != nil {
		pv, ok1 := prev.Int("version")
		nv, ok2 := it.Int("version")
		if !ok1 || !ok2 || nv != pv+1 || it.S("prev_seal") != prev.S("seal") || it.S("prev_seal") == "" {
			return false
		}
		if v.in.CheckVersion != nil && callCheck(v.in.CheckVersion, prev, it) != nil {
			return false
		}
	}
	newest := newestTime(it)
	if newest.IsZero() {
		return false
	}
	// The grace runs back from when the ledger read began (ReadStart): a
	// change after it may be missing from the ledger read however long
	// the reads took; the skew bound runs from Now (after the scan).
	start := v.in.ReadStart
	if start.IsZero() || start.After(v.in.Now) {
		start = v.in.Now
	}
	if !newest.After(start.Add(-v.in.Grace)) || newest.After(v.in.Now.Add(clockSkew)) {
		return false
	}
	age := v.in.Now.Sub(newest)
	v.res.NotYetLedgered++
	v.res.Pending = append(v.res.Pending, PendingItem{ID: key, Age: age})
	return true
}

// newestTime is the newest time an item records of its own changes.
func newestTime(it Item) time.Time {
	var newest time.Time
	see := func(s string) {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil && t.After(newest) {
			newest = t
		}
	}
	for _, a := range []string{"status_since", "last_seen", HoldAtAttr} {
		see(it.S(a))
	}
	for _, list := range []string{"attempts", "reads", "corrections"} {
		if l := it[list].L; len(l) > 0 {
			if at := l[len(l)-1].M["at"]; at.S != nil {
				see(*at.S)
			}
		}
	}
	return newest
}

// checkIndexKey names a version whose index key is not the one its own
// fields derive (Input.IndexKey), and one without an index key whose
// previous version had one, written once the listings read the index
// (Input.IndexKeyFrom): every writer of this release keeps the key, and a
// version without it drops out of the source index's listings. A version without one after a version without one
// (written before the index had it) is not named here (dlqctl verify's
// index check names it once the listings read the source index).
func (v *verifier) checkIndexKey(key string, prev *version, e Entry) {
	if v.in.IndexKey == nil {
		return
	}
	got := e.Item[IndexKeyAttr].S
	if got == nil {
		if prev != nil && prev.item != nil && prev.item[IndexKeyAttr].S != nil && v.in.IndexKey(e.Item) != "" && v.indexKeyRequired(e) {
			v.fail(KindIndexKey, key, "change %s has no index key, the version before it had one: the listings would not find it", e.Seq)
		}
		return
	}
	if want := v.in.IndexKey(e.Item); *got != want {
		v.fail(KindIndexKey, key, "change %s carries index key %q, its fields derive %q: the listings would not find it", e.Seq, *got, want)
	}
}

// indexKeyRequired reports whether e was written when the listings read
// the index (Input.IndexKeyFrom): a change whose time does not parse counts
// as written then.
func (v *verifier) indexKeyRequired(e Entry) bool {
	from := v.in.IndexKeyFrom
	if from == nil {
		return false
	}
	at, err := time.Parse(time.RFC3339Nano, e.At)
	return err != nil || !at.Before(*from)
}

// addsIndexKey reports whether b is a with exactly the index key its fields
// derive added (Input.IndexKey set).
func (v *verifier) addsIndexKey(a, b Item) bool {
	if v.in.IndexKey == nil || a[IndexKeyAttr].S != nil || b[IndexKeyAttr].S == nil || len(b) != len(a)+1 {
		return false
	}
	if want := v.in.IndexKey(b); want == "" || *b[IndexKeyAttr].S != want {
		return false
	}
	return sameWithout(a, b, IndexKeyAttr)
}

// addsHold reports whether b is a with exactly the integrity hold's
// attributes added (the hold's time parseable).
func addsHold(a, b Item) bool {
	if _, ok := a[HoldAttr]; ok || len(b) != len(a)+2 || b[HoldAttr].S == nil || b[HoldAtAttr].S == nil {
		return false
	}
	if _, err := time.Parse(time.RFC3339Nano, *b[HoldAtAttr].S); err != nil {
		return false
	}
	return sameWithout(a, b, HoldAttr, HoldAtAttr)
}

// sameWithout reports whether b without the attributes attrs is a.
func sameWithout(a, b Item, attrs ...string) bool {
	strip := make(Item, len(a))
	for k, val := range b {
		if !slices.Contains(attrs, k) {
			strip[k] = val
		}
	}
	x, err1 := strip.Canonical()
	y, err2 := a.Canonical()
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// preLedger notes a key whose history before the baseline is unproven.
func (v *verifier) preLedger(key string) {
	if v.preNoted[key] {
		return
	}
	if v.preNoted == nil {
		v.preNoted = map[string]bool{}
	}
	v.preNoted[key] = true
	v.res.PreLedger = append(v.res.PreLedger, Note{Subject: key, Detail: fmt.Sprintf("pre-ledger: unproven before %s", v.baselineAt)})
}
