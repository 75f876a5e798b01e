package writerproof

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
)

// Generator MACs a message with one key and returns the key's ARN
// (shared/adapter/kmsmac.MAC: KMS GenerateMac, HMAC_SHA_256).
type Generator interface {
	Generate(ctx context.Context, msg []byte) (mac []byte, keyARN string, err error)
}

// ErrGenerate wraps a failed or empty MAC answer (a throttle, KMS
// unavailable): nothing was proved, and a caller that must write (what it
// records already happened) may try again; GenerateMac has no effect to
// undo.
var ErrGenerate = errors.New("writer proof: generate mac")

// maxCached bounds the proofs announced and not yet used; past it the
// cache starts over (a proof dropped costs one more MAC, nothing else).
const maxCached = 4096

// Prover makes the proofs of one role's writes. Announce MACs the versions
// a batch is about to write in one call; Prove returns a version's proof:
// the announced one, or else one made with whatever other unannounced
// versions are waiting at the same moment (one MAC call in flight at a
// time; the writes that arrive meanwhile share the next one). So a batch
// costs a few MAC calls, and correctness never depends on batching: a
// version nobody announced (a retry after a conflict) gets its own tree.
// It is safe for concurrent use.
type Prover struct {
	gen  Generator
	role Role
	sem  chan struct{}

	mu     sync.Mutex
	cached map[Leaf]Proof
	open   *group
	calls  int64
}

type group struct {
	leaves []Leaf
	done   chan struct{}
	proofs map[Leaf]Proof
	err    error
}

// NewProver returns a Prover MACing with gen as role.
func NewProver(gen Generator, role Role) *Prover {
	return &Prover{gen: gen, role: role, sem: make(chan struct{}, 1), cached: map[Leaf]Proof{}}
}

// Role is the role the prover proves.
func (p *Prover) Role() Role { return p.role }

// Calls is how many MAC calls the prover made (for the benchmark).
func (p *Prover) Calls() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Announce MACs the versions about to be written (one call) and keeps
// their proofs for Prove. Versions never written cost nothing more.
func (p *Prover) Announce(ctx context.Context, leaves []Leaf) error {
	if len(leaves) == 0 {
		return nil
	}
	proofs, err := p.prove(ctx, leaves)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cached)+len(proofs) > maxCached {
		p.cached = map[Leaf]Proof{}
	}
	for l, pr := range proofs {
		p.cached[l] = pr
	}
	return nil
}

// Prove returns leaf's proof: announced, or made now.
func (p *Prover) Prove(ctx context.Context, leaf Leaf) (Proof, error) {
	p.mu.Lock()
	if pr, ok := p.cached[leaf]; ok {
		delete(p.cached, leaf)
		p.mu.Unlock()
		return pr, nil
	}
	g := p.open
	leader := g == nil
	if leader {
		g = &group{done: make(chan struct{})}
		p.open = g
	}
	g.leaves = append(g.leaves, leaf)
	p.mu.Unlock()
	if leader {
		// Wait for the call in flight; whoever comes meanwhile joins g.
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			p.mu.Lock()
			if p.open == g {
				p.open = nil
			}
			p.mu.Unlock()
			g.err = ctx.Err()
			close(g.done)
			return Proof{}, g.err
		}
		p.mu.Lock()
		if p.open == g {
			p.open = nil
		}
		leaves := g.leaves
		p.mu.Unlock()
		g.proofs, g.err = p.mac(ctx, leaves)
		<-p.sem
		close(g.done)
	} else {
		select {
		case <-g.done:
		case <-ctx.Done():
			return Proof{}, ctx.Err()
		}
	}
	if g.err != nil {
		return Proof{}, g.err
	}
	return g.proofs[leaf], nil
}

// prove makes the proofs of leaves with one MAC call, one at a time with
// Prove's.
func (p *Prover) prove(ctx context.Context, leaves []Leaf) (map[Leaf]Proof, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	return p.mac(ctx, leaves)
}

// mac builds the tree over leaves (duplicates once), MACs its descriptor
// and returns each leaf's proof.
func (p *Prover) mac(ctx context.Context, leaves []Leaf) (map[Leaf]Proof, error) {
	var uniq []Leaf
	seen := map[Leaf]bool{}
	for _, l := range leaves {
		if !seen[l] {
			seen[l] = true
			uniq = append(uniq, l)
		}
	}
	if len(uniq) > MaxLeaves {
		return nil, fmt.Errorf("writer proof: %d versions in one tree (at most %d)", len(uniq), MaxLeaves)
	}
	hashes := make([][32]byte, len(uniq))
	for i, l := range uniq {
		hashes[i] = l.Hash()
	}
	levels := tree(hashes)
	root := levels[len(levels)-1][0]
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	mac, key, err := p.gen.Generate(ctx, Descriptor(p.role, root, len(uniq)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGenerate, err)
	}
	if key == "" || len(mac) == 0 {
		return nil, fmt.Errorf("%w: the MAC answer has no key or no MAC", ErrGenerate)
	}
	enc := base64.StdEncoding.EncodeToString(mac)
	out := make(map[Leaf]Proof, len(uniq))
	for i, l := range uniq {
		var raw []byte
		for _, s := range path(levels, i) {
			raw = append(raw, s[:]...)
		}
		out[l] = Proof{V: 1, Role: p.role, Key: key, N: len(uniq), I: i, Path: base64.StdEncoding.EncodeToString(raw), MAC: enc}
	}
	return out, nil
}
