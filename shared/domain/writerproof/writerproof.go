// Package writerproof proves which function wrote a record or policy
// version. The versions one function writes in one batch are the leaves of
// a Merkle tree; the tree's root, the writing role and the leaf count form
// a short descriptor that the role's KMS HMAC key MACs once (GenerateMac,
// HMAC_SHA_256); each item written stores its own proof (the key's ARN, its
// leaf's place, the path to the root and the MAC) in an attribute outside
// its seal. A verifier recomputes the leaf from the item's key, version and
// seal, the root from the path, and checks the MAC with KMS VerifyMac under
// a key it was configured with, never one the item names.
//
// The package is pure: the MAC comes through the Generator interface
// (shared/adapter/kmsmac.MAC in the functions, an HMAC fake in tests).
package writerproof

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Attr is the item attribute that holds a version's proof. The seal does
// not cover it (it is not a field of the record or the policy).
const Attr = "wp"

// Role names a writing function; each has its own HMAC key.
type Role string

// The writing roles.
const (
	RoleIngest  Role = "ingest"
	RoleRedrive Role = "redrive"
	RoleSweeper Role = "sweeper"
)

// Roles are the writing roles in the order dlqctl's --writer-keys lists
// their keys.
var Roles = []Role{RoleIngest, RoleRedrive, RoleSweeper}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r == RoleIngest || r == RoleRedrive || r == RoleSweeper }

// MaxMessage is KMS GenerateMac's limit on the message (bytes).
const MaxMessage = 4096

// MaxLeaves bounds a tree (and so a proof's path: at most 20 hashes).
const MaxLeaves = 1 << 20

// Leaf is one version a writer writes: the item's key (dlq_id), its
// version and its seal.
type Leaf struct {
	Key     string
	Version int64
	Seal    string
}

// Hash is the leaf's hash: SHA-256 over 0x00 and the canonical triple
// "dlqq-writer-leaf/1\n<key>\n<version>\n<seal>" (a key holds no newline:
// it is a table key the functions make; a seal is hex).
func (l Leaf) Hash() [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write([]byte("dlqq-writer-leaf/1\n" + l.Key + "\n" + strconv.FormatInt(l.Version, 10) + "\n" + l.Seal))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func node(a, b [32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(a[:])
	h.Write(b[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// tree returns every level of the tree over leaves, the leaves first and
// the root last. A level's last node without a sibling moves up as it is.
func tree(leaves [][32]byte) [][][32]byte {
	levels := [][][32]byte{leaves}
	for cur := leaves; len(cur) > 1; {
		next := make([][32]byte, 0, (len(cur)+1)/2)
		for i := 0; i < len(cur); i += 2 {
			if i+1 < len(cur) {
				next = append(next, node(cur[i], cur[i+1]))
			} else {
				next = append(next, cur[i])
			}
		}
		levels = append(levels, next)
		cur = next
	}
	return levels
}

// path is leaf i's siblings, bottom up, in the tree's levels.
func path(levels [][][32]byte, i int) [][32]byte {
	var out [][32]byte
	for _, level := range levels[:len(levels)-1] {
		if s := i ^ 1; s < len(level) {
			out = append(out, level[s])
		}
		i /= 2
	}
	return out
}

// RootFromPath recomputes the root of an n-leaf tree from leaf i's hash and
// its path; a path of the wrong length for (i, n) is an error.
func RootFromPath(leaf [32]byte, i, n int, p [][32]byte) ([32]byte, error) {
	if n < 1 || n > MaxLeaves || i < 0 || i >= n {
		return [32]byte{}, fmt.Errorf("leaf %d of %d is not a place in a tree", i, n)
	}
	cur, k := leaf, 0
	for w := n; w > 1; w = (w + 1) / 2 {
		switch {
		case i%2 == 1:
			if k >= len(p) {
				return [32]byte{}, errors.New("the path is too short")
			}
			cur, k = node(p[k], cur), k+1
		case i+1 < w:
			if k >= len(p) {
				return [32]byte{}, errors.New("the path is too short")
			}
			cur, k = node(cur, p[k]), k+1
		}
		i /= 2
	}
	if k != len(p) {
		return [32]byte{}, errors.New("the path is too long")
	}
	return cur, nil
}

// Descriptor is the message a role's key MACs for one tree:
// "dlqq-writer-proof/1 role=<role> leaves=<n> root=<hex>" (at most 120
// bytes, far below GenerateMac's 4,096).
func Descriptor(role Role, root [32]byte, n int) []byte {
	return []byte(fmt.Sprintf("dlqq-writer-proof/1 role=%s leaves=%d root=%s", role, n, hex.EncodeToString(root[:])))
}

// Proof is one version's writer proof, as stored (Encode) in Attr.
// Fields are declared in their JSON names' order, so that Encode is
// canonical.
type Proof struct {
	I    int    `json:"i"` // the leaf's place
	Key  string `json:"k"` // the MAC key's ARN (GenerateMacOutput.KeyId)
	MAC  string `json:"m"` // base64 of the MAC over Descriptor(Role, root, N)
	N    int    `json:"n"` // the tree's leaf count
	Path string `json:"p"` // the siblings' hashes, bottom up, concatenated, base64
	Role Role   `json:"r"` // the writing role
	V    int    `json:"v"` // the format: 1
}

// Encode is p as stored in Attr.
func (p Proof) Encode() string {
	raw, _ := json.Marshal(p) // a struct of strings and ints always marshals
	return string(raw)
}

// Parse decodes a stored proof, checking its shape.
func Parse(s string) (Proof, error) {
	var p Proof
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Proof{}, fmt.Errorf("not a writer proof: %w", err)
	}
	switch {
	case p.V != 1:
		return Proof{}, fmt.Errorf("writer proof format %d, want 1", p.V)
	case !p.Role.Valid():
		return Proof{}, fmt.Errorf("writer proof of role %q", p.Role)
	case p.Key == "":
		return Proof{}, errors.New("writer proof without a key")
	case len(p.Path) > 4*32*64/3+4:
		return Proof{}, errors.New("writer proof path too long")
	}
	return p, nil
}

// Root recomputes the proof's root for leaf.
func (p Proof) Root(leaf Leaf) ([32]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(p.Path)
	if err != nil || len(raw)%32 != 0 {
		return [32]byte{}, errors.New("the path is not base64 of 32-byte hashes")
	}
	sibs := make([][32]byte, len(raw)/32)
	for i := range sibs {
		copy(sibs[i][:], raw[32*i:])
	}
	return RootFromPath(leaf.Hash(), p.I, p.N, sibs)
}

// MACBytes decodes the proof's MAC.
func (p Proof) MACBytes() ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(p.MAC)
	if err != nil || len(b) == 0 {
		return nil, errors.New("the proof's MAC is not base64")
	}
	return b, nil
}
