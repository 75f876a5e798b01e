package ledger

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind names a verification problem.
type Kind string

// The problems Verify names (design §6).
const (
	KindRewritten       Kind = "rewritten"       // a current item is not the ledgered version
	KindUnledgered      Kind = "unledgered"      // an item the ledger never saw
	KindDeleted         Kind = "deleted"         // a ledgered key gone from the table
	KindVersionMissing  Kind = "version-missing" // consecutive ledgered versions do not chain
	KindOldMismatch     Kind = "old-mismatch"    // an entry's old image is not the previous ledgered version
	KindDuplicate       Kind = "duplicate-entry" // a change ledgered twice
	KindSegmentInvalid  Kind = "segment-invalid" // an object that is not a well-formed segment
	KindSegmentChain    Kind = "segment-chain"   // a shard's segments do not chain
	KindSegmentHash     Kind = "segment-hash"    // bytes that do not hash to what the chain says
	KindSegmentMissing  Kind = "segment-missing" // a segment the chain or a digest names is absent
	KindSegmentOffChain Kind = "segment-off-chain"
	KindDigestInvalid   Kind = "digest-invalid"
	KindDigestSignature Kind = "digest-signature"
	KindDigestChain     Kind = "digest-chain"
	KindDigestGap       Kind = "digest-gap"
	// KindForged: a ledgered version that no transition makes from the one
	// before it (Input.CheckVersion).
	KindForged Kind = "forged"
	// KindDigestStale: the newest signed digest is older than
	// Input.MaxDigestAge (digests are written at least hourly).
	KindDigestStale Kind = "digest-stale"
	// KindBaseline: a baseline object that does not chain, is not the
	// one a signed digest names, or was taken after the ledger started.
	KindBaseline Kind = "baseline"
	// KindIndexKey: a version whose index key (IndexKeyAttr) is not the
	// one its own fields derive (Input.IndexKey): the listings would not
	// find it where they look.
	KindIndexKey Kind = "index-key"
)

// Problem is one failure, naming what failed: a record id, a shard or an
// object key.
type Problem struct {
	Kind    Kind   `json:"kind"`
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Kind, p.Subject, p.Detail) }

// Input is what Verify checks.
type Input struct {
	// Items are the table's items; those not ledgered (Ledgered) are
	// ignored.
	Items []Item
	// Segments and Digests map object keys to their bytes.
	Segments map[string][]byte
	Digests  map[string][]byte
	// PublicKeyDER is the signing key's public part (GetPublicKey).
	PublicKeyDER []byte
	Now          time.Time
	// ReadStart is when the ledger read began (zero: Now). The grace runs
	// back from it, so a change made during a long ledger read and table
	// scan is pending, not a problem.
	ReadStart time.Time
	// Grace: an item that differs from its newest ledgered version (or
	// that the ledger has not seen) and whose last change (status_since,
	// last_seen) is within Grace of Now is counted as not yet ledgered
	// instead of named as a problem.
	Grace time.Duration
	// CheckVersion, when set, is called for each consecutive pair of a
	// record key's ledgered versions (prev nil for a key's first version):
	// an error names the newer version KindForged. The caller decodes the
	// items (dynamostore.LedgerVersionCheck). It is called from several
	// goroutines at once.
	CheckVersion func(prev, next Item) error
	// MaxDigestAge, when set, is how old the newest signed digest may be at
	// Now (DIGEST_MAX_AGE + the schedule + a margin): older is
	// KindDigestStale. Zero means DefaultMaxDigestAge; negative turns the
	// check off.
	MaxDigestAge time.Duration
	// Baselines maps baseline object keys (ledger/baseline/...) to bytes.
	Baselines map[string][]byte
	// CheckWriter, when set, checks each ledgered version's writer proof
	// (prev the key's version before it, nil for its first): a
	// *WriterError names it, ErrWriterUnverified counts it as not checked
	// (verify_writers.go; dynamostore.LedgerWriterCheck). It is called from
	// several goroutines at once.
	CheckWriter func(prev, next Item) error
	// Versions, when listed, are every version and delete marker under
	// ledger/ (ListObjectVersions): each delete marker and each key with
	// more than one version is named (verify_versions.go). Segments,
	// Digests and Baselines then hold each key's first version
	// (FirstVersions), read by its version id.
	Versions []ObjectVersion
	// CheckAll, when set, is called once, after every per-version check,
	// with every ledgered key's versions, sorted by key (verify_across.go):
	// what one version's check cannot see, because it rests on another
	// item (an approval a record's history names:
	// dynamostore.LedgerApprovalCheck). It returns the problems it finds
	// and notes (information). It must not keep its argument.
	CheckAll func(keys []KeyHistory) ([]Problem, []Note)
	// IndexKey, when set, is the index key (IndexKeyAttr) an item's own
	// fields derive ("" when they derive none): each ledgered version that
	// carries another is KindIndexKey, and a change that keeps a version
	// and only adds the key it derives (the index backfill) is accepted,
	// as an integrity hold is.
	IndexKey func(Item) string
	// IndexKeyFrom, when set (with IndexKey), is when the listings began
	// to read the index (the index backfill's completion; the zero time
	// on a table that never had another index): a version written from
	// then on without an index key, after a version that had one, is
	// KindIndexKey (the listings would not find it). Before it, such a
	// version is an older writer's during the move, and not named.
	IndexKeyFrom *time.Time
	// Across, when set, is the cross-item check in two steps, which a
	// partitioned run can make (verify_across.go); it stands for CheckAll,
	// which must then be nil.
	Across *Across
	// Proofs, when set, are the version checks (CheckVersion) an earlier
	// run passed (proofs.go): those are not made again, and the checks
	// this run passes are added. They must come from where no writer of the
	// table or the ledger can write (dlqctl's signed checkpoint).
	Proofs *Proofs

	// Headers, when set, are given each segment's header as parsed, for
	// RecountCounters (CounterInput.Headers).
	Headers *SegmentHeaders

	// What follows bounds Verify's memory (verify_partition.go).

	// SegmentKeys and ReadSegment, when ReadSegment is set, stand for
	// Segments: each segment is read once and its changes wait in spill
	// files under SpillDir (verify_partition.go), so that a few segments
	// at a time are held (parseAhead: at most 2 × maxParsers read or being
	// read, and the one being spilled). It is called from several
	// goroutines at once.
	SegmentKeys []string
	ReadSegment func(key string) ([]byte, error)
	// ScanItems, when set, stands for Items: it calls yield with each of
	// the table's items, and stops with yield's error.
	ScanItems func(yield func(Item) error) error
	// Partitions, when above 1, checks the keys in that many passes, each
	// over the keys whose hash falls in it: the changes and items of the
	// other passes wait in files under SpillDir (the system's temporary
	// directory when empty), so that about 1/Partitions of them is held
	// decoded at once. Segments in memory are then read as streams.
	Partitions int
	SpillDir   string
}

// PendingItem is an item counted as not yet ledgered, with the age of its
// own newest time.
type PendingItem struct {
	ID  string        `json:"id"`
	Age time.Duration `json:"age"`
}

// Note is information about a subject: not a failure.
type Note struct {
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
}

// Result is what Verify found.
type Result struct {
	Problems []Problem `json:"problems"`
	Items    int       `json:"items"`
	Entries  int       `json:"entries"`
	Segments int       `json:"segments"`
	Digests  int       `json:"digests"`
	// LastDigest is the newest digest whose signature verifies (0: none).
	LastDigest int64 `json:"last_digest"`
	// Unanchored counts entries after the furthest head of their shard a
	// signed digest supports ("not yet anchored": information, not a
	// failure); OldestUnanchored is the age of the oldest of them.
	Unanchored       int           `json:"unanchored"`
	OldestUnanchored time.Duration `json:"oldest_unanchored"`
	// NotYetLedgered counts items within Input.Grace (information).
	NotYetLedgered int `json:"not_yet_ledgered"`
	// Pending lists those items, by id.
	Pending []PendingItem `json:"pending,omitempty"`
	// PreLedger lists the keys whose history before the baseline is
	// unproven ("pre-ledger: unproven before <baseline time>"): an
	// untouched item equal to its baseline entry, or a key whose first
	// ledgered change follows its baseline entry.
	PreLedger []Note `json:"pre_ledger,omitempty"`
	// BaselineUnanchored says a baseline exists that no signed digest
	// names yet (information: the next digest does).
	BaselineUnanchored bool `json:"baseline_unanchored,omitempty"`
	// Writers is what the writer-proof check found (Input.CheckWriter).
	Writers WriterStats `json:"writers,omitzero"`
	// HeadsNotReached lists the newest signed digest's unproven heads its
	// run did not reach in time (information: verify_unproven.go).
	HeadsNotReached []Note `json:"heads_not_reached,omitempty"`
	// Notes are Input.CheckAll's notes (a high-risk action its source's
	// four_eyes let one person run).
	Notes []Note `json:"notes,omitempty"`
}

// OK reports whether nothing failed.
func (r Result) OK() bool { return len(r.Problems) == 0 }

// Has reports whether a problem of kind names subject.
func (r Result) Has(kind Kind, subject string) bool {
	return slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Kind == kind && p.Subject == subject })
}

type verifier struct {
	in         Input
	res        Result
	preNoted   map[string]bool
	baselineAt string
	// baselineStart is when the baseline scan began (its first object's
	// time).
	baselineStart time.Time
	checks        []checkJob
	// cross is the cross-item check (nil: none); keys are the versions of
	// the pass's keys for it, reductions every key's (Across.Key).
	cross      *Across // Input.acrossCheck
	keys       []KeyHistory
	reductions []reduced
	// arrived are the canaries on anchored segments; firstAt is the time
	// of the ledger's first change (seeEntry).
	arrived map[int64]bool
	firstAt time.Time
}

func (v *verifier) fail(kind Kind, subject, format string, args ...any) {
	v.res.Problems = append(v.res.Problems, Problem{Kind: kind, Subject: subject, Detail: fmt.Sprintf(format, args...)})
}

// Verify checks the ledger against the table (design §6). It reads only
// its input; it costs about linear time in the number of entries. A read
// of its input (Input.ReadSegment, ScanItems) or of its spill files that
// fails is a problem of kind KindUnchecked (VerifyErr returns it instead).
func Verify(in Input) Result {
	res, err := VerifyErr(in)
	if err != nil {
		res.Problems = append(res.Problems, Problem{Kind: KindUnchecked, Subject: "(verify)", Detail: err.Error()})
	}
	return res
}

// KindUnchecked: verification could not read what it checks (Verify);
// nothing it found is complete.
const KindUnchecked Kind = "unchecked"

// VerifyErr is Verify, returning a failed read of its input or of its
// spill files as an error, with what it found until then.
func VerifyErr(in Input) (Result, error) {
	switch {
	case splitForTests > 1 && in.Partitions == 0:
		in = in.split(splitForTests)
	case in.Partitions > 1 && in.ReadSegment == nil:
		in.SegmentKeys, in.ReadSegment = segmentReader(in.Segments) // partitions spill what they read
		in.Segments = nil
	}
	if proofsForTests && in.Proofs == nil {
		return in.againWithProofs()
	}
	v := &verifier{in: in}
	res, err := v.run()
	slices.SortStableFunc(res.Problems, func(a, b Problem) int {
		return strings.Compare(string(a.Kind)+"\x00"+a.Subject, string(b.Kind)+"\x00"+b.Subject)
	})
	return res, err
}

func (v *verifier) run() (Result, error) {
	digests, signed := v.digests()
	keys, err := v.newKeyStage(signed) // verify_partition.go
	if err != nil {
		return v.res, err
	}
	defer keys.close()
	if err := v.segments(digests, signed, keys); err != nil {
		return v.res, err
	}
	v.pipeline(signed) // verify_mapping.go
	v.unproven(signed) // verify_unproven.go
	if err := keys.run(v.baselineInTime(v.baseline(signed), signed)); err != nil {
		return v.res, err
	}
	v.runAcross() // verify_across.go
	v.fresh(signed)
	v.versions()
	slices.SortFunc(v.res.Pending, func(a, b PendingItem) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(v.res.PreLedger, func(a, b Note) int { return strings.Compare(a.Subject, b.Subject) })
	return v.res, nil
}

// maxGapsNamed is the longest run of missing digest numbers named one by
// one; a longer run is one digest-gap problem.
const maxGapsNamed = 100

type parsedDigest struct {
	d   Digest
	raw []byte
	key string
}

// digests checks every digest and returns them by n, and those whose
// signature verifies, oldest first.
func (v *verifier) digests() (map[int64]*parsedDigest, []*parsedDigest) {
	byN := map[int64]*parsedDigest{}
	for key, raw := range v.in.Digests {
		d, err := ParseDigest(raw)
		if err != nil {
			v.fail(KindDigestInvalid, key, "%v", err)
			continue
		}
		if key != DigestKey(d.N) {
			v.fail(KindDigestInvalid, key, "holds digest %d (its key is %s)", d.N, DigestKey(d.N))
			continue
		}
		byN[d.N] = &parsedDigest{d: d, raw: raw, key: key}
	}
	v.res.Digests = len(byN)
	var signed []*parsedDigest
	ns := slices.Sorted(mapKeys(byN))
	for i, n := range ns {
		// The numbers missing before n: each named when few, one problem
		// for a long run (a digest numbered far beyond the others, in a
		// tampered copy, must not make verify count to it).
		from := int64(1)
		if i > 0 {
			from = ns[i-1] + 1
		}
		switch gap := n - from; {
		case gap > maxGapsNamed:
			v.fail(KindDigestGap, DigestKey(from), "digests %d to %d missing (%d)", from, n-1, gap)
		default:
			for m := from; m < n; m++ {
				v.fail(KindDigestGap, DigestKey(m), "digest %d missing", m)
			}
		}
		p := byN[n]
		if err := VerifyDigest(p.d, v.in.PublicKeyDER); err != nil {
			v.fail(KindDigestSignature, p.key, "%v", err)
			continue
		}
		signed = append(signed, p)
		if n == 1 {
			continue
		}
		prev, ok := byN[n-1]
		switch {
		case !ok:
		case p.d.Prev.Key != prev.key || p.d.Prev.SHA256 != SHA256Hex(prev.raw) || p.d.Prev.Signature != prev.d.Signature:
			v.fail(KindDigestChain, p.key, "prev does not match digest %d", n-1)
		}
	}
	if len(signed) > 0 {
		v.res.LastDigest = signed[len(signed)-1].d.N
	}
	return byN, signed
}

type segNode struct {
	key string
	seg Segment // its entries dropped when read from Input.ReadSegment
	sha string
	// Read from Input.ReadSegment: idx is the segment's number in the
	// read, metas where its entries' metas are (keyStage.metas), and the
	// chain stage's verdict on each entry: kept (on the chain, no
	// duplicate, no canary), and anchored; pos is its place in its
	// shard's chain.
	idx              int
	metaOff, metaLen int64
	kept             []bool
	anchored         bool
	pos              int
}

// entryMeta is what the chain stage reads of an entry: its place and
// time, and a canary's number.
type entryMeta struct {
	Seq    string `json:"s"`
	Key    string `json:"k"`
	Late   bool   `json:"l,omitempty"`
	At     string `json:"a"`
	Canary int64  `json:"c,omitempty"`
	IsN    bool   `json:"n,omitempty"` // Canary is a number CanaryOf read
}

func metaOf(e Entry) entryMeta {
	m := entryMeta{Seq: e.Seq, Key: e.Key, Late: e.Late, At: e.At}
	m.Canary, m.IsN = CanaryOf(e)
	return m
}

type ledgered struct {
	e        Entry
	shard    string
	anchored bool
}

// segmentKeys are the keys of the segments Verify reads.
func (v *verifier) segmentKeys() []string {
	if v.in.ReadSegment != nil {
		return v.in.SegmentKeys
	}
	return slices.Collect(mapKeys(v.in.Segments))
}

// readSegment returns a segment's bytes.
func (v *verifier) readSegment(key string) ([]byte, error) {
	if v.in.ReadSegment != nil {
		return v.in.ReadSegment(key)
	}
	return v.in.Segments[key], nil
}

// dropOldItems keeps, of each entry's full old image (old_item), its hash
// only. The image is there for the counters' recount, which reads the
// segments itself (RecountCounters), so the decoded item is not kept (a
// MODIFY would hold two decoded items instead of one): step compares its
// hash with the version before it.
func dropOldItems(entries []Entry) {
	for i := range entries {
		e := &entries[i]
		if e.OldItem != nil {
			if c, err := e.OldItem.Canonical(); err == nil {
				e.oldSHA = SHA256Hex(c)
			} else {
				e.oldSHA = "(old_item not canonical: " + err.Error() + ")"
			}
		}
		e.OldItem = nil
	}
}

// parsedSegment is a segment read and parsed (parseAhead): its
// SHA-256, ParseSegment's answer, old items dropped (dropOldItems), and
// what Input.Headers keeps of it.
type parsedSegment struct {
	sha     string
	seg     Segment
	err     error
	head    segmentHeader
	readErr error
}

// maxParsers bounds parseAhead's goroutines: twice as many decoded
// segments (about 1 MiB each for 100 changes) are read, being read or
// waiting at most.
const maxParsers = 8

// parseAhead reads and parses the segments of keys a few at a time, on
// as many goroutines as the process has CPUs (at most maxParsers):
// next(i) waits for the i-th (next must be called for 0, 1, 2… in turn);
// stop ends the reads. At most twice as many segments as goroutines are
// held read and not yet taken, each in a slot of a ring of that many: the
// i-th is taken only once a token is free, that is once the one a ring
// before it was taken.
func (v *verifier) parseAhead(keys []string) (next func(int) parsedSegment, stop func()) {
	workers := max(1, min(runtime.GOMAXPROCS(0), maxParsers, len(keys)))
	ring := 2 * workers
	out := make([]chan parsedSegment, ring)
	for i := range out {
		out[i] = make(chan parsedSegment, 1)
	}
	tokens := make(chan struct{}, ring)
	done := make(chan struct{})
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case tokens <- struct{}{}:
				case <-done:
					return
				}
				select {
				case <-done: // stopped while a token was free
					return
				default:
				}
				i := int(taken.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				var p parsedSegment
				raw, err := v.readSegment(keys[i])
				if err != nil {
					p.readErr = err
				} else {
					p.sha = SHA256Hex(raw)
					p.seg, p.err = ParseSegment(raw)
					p.head = v.in.Headers.read(p.seg, p.err) // before the old items go: the counters count them
					if p.err == nil {
						dropOldItems(p.seg.Entries)
					}
				}
				out[i%ring] <- p
			}
		})
	}
	next = func(i int) parsedSegment {
		p := <-out[i%ring]
		<-tokens
		return p
	}
	stop = func() {
		close(done)
		wg.Wait()
	}
	return next, stop
}

// segments checks every shard's chain against the digests and passes each
// entry of the chained segments to keys, shard by shard in chain order. A
// segment read from Input.ReadSegment is read once: its entries go to the
// key stage's spill files as they are read, and their metas to its metas
// file, which the chain stage reads back in chain order.
func (v *verifier) segments(digests map[int64]*parsedDigest, signed []*parsedDigest, keys *keyStage) error {
	byShard := map[string]map[string]*segNode{}
	segKeys := v.segmentKeys()
	next, stop := v.parseAhead(segKeys)
	defer stop()
	for idx, key := range segKeys {
		p := next(idx)
		if p.readErr != nil {
			return fmt.Errorf("segment %s: %w", key, p.readErr)
		}
		s, err := p.seg, p.err
		v.in.Headers.put(p.sha, p.head)
		if err != nil {
			v.fail(KindSegmentInvalid, key, "%v", err)
			continue
		}
		if key != SegmentKey(s.Shard, s.FirstSeq) {
			v.fail(KindSegmentInvalid, key, "holds the segment of %s from %s", s.Shard, s.FirstSeq)
			continue
		}
		if byShard[s.Shard] == nil {
			byShard[s.Shard] = map[string]*segNode{}
		}
		n := &segNode{key: key, seg: s, sha: p.sha, idx: idx}
		if v.in.ReadSegment != nil {
			if err := keys.spillSegment(n); err != nil {
				return err
			}
			n.seg.Entries = nil
		}
		byShard[s.Shard][key] = n
	}
	v.res.Segments = len(segKeys)
	shards := map[string]bool{}
	for s := range byShard {
		shards[s] = true
	}
	for _, p := range signed {
		for _, h := range p.d.Shards {
			if h.SegmentKey != "" { // an empty head: listed, no chain yet
				shards[h.Shard] = true
			}
		}
	}
	heads := shardHeads(digests, signed)
	for _, shard := range slices.Sorted(mapKeys(shards)) {
		if err := v.shard(shard, byShard[shard], heads[shard], keys); err != nil {
			return err
		}
		delete(byShard, shard)
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// entries passes the entries of a shard's chain to keys, naming
// duplicates and entries out of order.
func (v *verifier) entries(shard string, chain []*segNode, anchoredN int, keys *keyStage) error {
	seen := map[string]string{} // padded seq → segment key
	last := ""
	for i, n := range chain {
		entries, err := keys.metas(n)
		if err != nil {
			return err
		}
		n.anchored, n.pos = i < anchoredN, i
		for j, e := range entries {
			p := mustPadSeq(e.Seq)
			if where, dup := seen[p]; dup {
				v.fail(KindDuplicate, shard, "entry %s (key %s) in %s and %s", e.Seq, e.Key, where, n.key)
				continue
			}
			seen[p] = n.key
			// A late entry (seen nowhere else, checked above) may be below
			// the chain's last seq; within its segment it is in order too.
			switch {
			case j > 0 && !SeqLess(entries[j-1].Seq, e.Seq):
				v.fail(KindSegmentChain, n.key, "entry %s not after %s", e.Seq, entries[j-1].Seq)
			case e.Late && (last == "" || !SeqLess(e.Seq, last)):
				v.fail(KindSegmentChain, n.key, "entry %s marked late but not before %s", e.Seq, last)
			case !e.Late && last != "" && !SeqLess(last, e.Seq):
				v.fail(KindSegmentChain, n.key, "entry %s not after %s", e.Seq, last)
			}
			if !e.Late && (last == "" || SeqLess(last, e.Seq)) {
				last = e.Seq
			}
			v.seeEntry(e, n.anchored)
			if IsCanary(e.Key) { // the digest runs' canary: no record's change (verify_mapping.go)
				continue
			}
			v.res.Entries++
			if !n.anchored {
				v.res.Unanchored++
				if at, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
					v.res.OldestUnanchored = max(v.res.OldestUnanchored, v.in.Now.Sub(at))
				}
			}
			if err := keys.keep(n, j, shard); err != nil {
				return err
			}
		}
	}
	return nil
}

// seeEntry keeps what the checks of the whole ledger need of each entry:
// the canaries that arrived anchored (canaries) and the time of the
// ledger's first change (baselineInTime).
func (v *verifier) seeEntry(e entryMeta, anchored bool) {
	if e.IsN && anchored {
		if v.arrived == nil {
			v.arrived = map[int64]bool{}
		}
		v.arrived[e.Canary] = true
	}
	if t, err := time.Parse(time.RFC3339Nano, e.At); err == nil && (v.firstAt.IsZero() || t.Before(v.firstAt)) {
		v.firstAt = t
	}
}
