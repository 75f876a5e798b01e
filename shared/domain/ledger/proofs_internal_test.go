package ledger

import "testing"

// A proof binds the scope, the check and both versions' bytes, and there
// is none for a version whose canonical bytes are unknown (an item that
// is not canonical): two such versions would share one.
func TestProofKeyBindsEverything(t *testing.T) {
	p, q := NewProofs("a", nil), NewProofs("b", nil)
	prev, next := Item{"k": Str("1")}, Item{"k": Str("2")}
	pc, err := prev.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := next.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	base, ok := p.key(proofVersion, prev, pc, next, nc)
	if !ok {
		t.Fatal("no proof of a canonical pair")
	}
	for name, k := range map[string]func() (ProofKey, bool){
		"another scope":    func() (ProofKey, bool) { return q.key(proofVersion, prev, pc, next, nc) },
		"another check":    func() (ProofKey, bool) { return p.key(proofOther, prev, pc, next, nc) },
		"another previous": func() (ProofKey, bool) { return p.key(proofVersion, next, nc, next, nc) },
		"no previous":      func() (ProofKey, bool) { return p.key(proofVersion, nil, nil, next, nc) },
		"another next":     func() (ProofKey, bool) { return p.key(proofVersion, prev, pc, prev, pc) },
		"the parts run together": func() (ProofKey, bool) {
			return p.key(proofVersion, prev, append(append([]byte{}, pc...), nc...), next, nil)
		},
	} {
		if got, ok := k(); ok && got == base {
			t.Errorf("%s: the same proof", name)
		}
	}
	if _, ok := p.key(proofVersion, prev, pc, next, nil); ok {
		t.Error("a proof of a next version whose bytes are unknown")
	}
	if _, ok := p.key(proofVersion, prev, nil, next, nc); ok {
		t.Error("a proof after a previous version whose bytes are unknown")
	}
	if p.Key("x", []byte("ab"), []byte("c")) == p.Key("x", []byte("a"), []byte("bc")) {
		t.Error("Key: the parts run together")
	}
}
