package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
)

// Proofs are the checks of single versions an earlier run passed
// (Input.Proofs): Input.CheckVersion of a version and the one before it.
// It is a pure function of the two versions' bytes and of the checker's
// code (the scope), and a ledgered version never changes, so a check
// that passed once passes again: a run given the proofs of an earlier one
// skips those checks (the decode and re-seal of every record version)
// and finds the same. A proof is the SHA-256 of the scope, the check's
// kind and both versions' canonical bytes; a check that failed is never
// one, so it is made again on every run. Input.CheckWriter is always
// made: its KMS call is the caller's to spare (dlqctl keeps proofs of
// the MACs KMS verified, and asks KMS all the same for each key's first
// of a run, whose answer changes when a key is disabled or its grant
// withdrawn).
//
// Whoever keeps the proofs between runs must keep them where no one who
// can write the table or the ledger can write them: a proof that was
// never earned lets a forged version pass. dlqctl keeps them in its
// checkpoint, under an HMAC whose key only the auditor holds.
type Proofs struct {
	scope string
	known map[ProofKey]struct{}
	mu    sync.Mutex
	// passed are the proofs this run met: known ones found again and
	// checks that passed.
	passed map[ProofKey]struct{}
	reused atomic.Int64
}

// ProofKey is one proof: a SHA-256.
type ProofKey [sha256.Size]byte

// NewProofs returns the proofs known for checks of scope (an earlier
// run's Proven; nil: none).
func NewProofs(scope string, known []ProofKey) *Proofs {
	p := &Proofs{scope: scope, known: make(map[ProofKey]struct{}, len(known)), passed: map[ProofKey]struct{}{}}
	for _, k := range known {
		p.known[k] = struct{}{}
	}
	return p
}

// Proven returns the proofs of the checks this run passed or found
// passed before, sorted: what the next run starts from. A proof of a
// version no longer on the ledger is dropped.
func (p *Proofs) Proven() []ProofKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProofKey, 0, len(p.passed))
	for k := range p.passed {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b ProofKey) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// Reused counts the checks this run skipped because an earlier run
// passed them.
func (p *Proofs) Reused() int64 { return p.reused.Load() }

// The kinds of check a proof is of.
const (
	proofVersion byte = 'v' // Input.CheckVersion
	proofOther   byte = 'x' // Proofs.Key
)

// key is the proof of a check of kind of next after prev (nil: next is a
// first version); ok is false when either's canonical bytes are unknown.
func (p *Proofs) key(kind byte, prev Item, prevCanon []byte, next Item, nextCanon []byte) (ProofKey, bool) {
	if p == nil || next == nil || nextCanon == nil || (prev != nil && prevCanon == nil) {
		return ProofKey{}, false
	}
	if prev == nil {
		return proofSum(kind, []byte(p.scope), []byte{0}, nextCanon), true
	}
	return proofSum(kind, []byte(p.scope), []byte{1}, prevCanon, nextCanon), true
}

// proofSum is the SHA-256 of a proof's kind and fields, each preceded by
// its length.
func proofSum(kind byte, fields ...[]byte) ProofKey {
	h := sha256.New()
	h.Write([]byte("dlqq-proof-1"))
	h.Write([]byte{kind})
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	var k ProofKey
	h.Sum(k[:0])
	return k
}

// has reports whether an earlier run passed the check k (and keeps it
// for the next).
func (p *Proofs) has(k ProofKey, ok bool) bool {
	if p == nil || !ok {
		return false
	}
	if _, known := p.known[k]; !known {
		return false
	}
	p.reused.Add(1)
	p.pass(k, true)
	return true
}

// pass records a check that passed.
func (p *Proofs) pass(k ProofKey, ok bool) {
	if p == nil || !ok {
		return
	}
	p.mu.Lock()
	p.passed[k] = struct{}{}
	p.mu.Unlock()
}

// Key is the proof of another check than Verify's own (kind names it, as
// "archive-stub"), a pure function of parts under the proofs' scope;
// Known and Passed use it as Verify uses its own.
func (p *Proofs) Key(kind string, parts ...[]byte) ProofKey {
	return proofSum(proofOther, append([][]byte{[]byte(kind), []byte(p.scope)}, parts...)...)
}

// Known reports whether an earlier run passed the check k (which this
// run then keeps, and counts as skipped).
func (p *Proofs) Known(k ProofKey) bool { return p.has(k, true) }

// Holds reports whether an earlier run passed the check k, without
// keeping it: a check made again all the same keeps it only if it passes
// again (Passed).
func (p *Proofs) Holds(k ProofKey) bool {
	if p == nil {
		return false
	}
	_, known := p.known[k]
	return known
}

// Passed records that this run passed the check k.
func (p *Proofs) Passed(k ProofKey) { p.pass(k, true) }
