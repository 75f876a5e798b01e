package quarantine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/dlqquarantine/dlqq/shared/domain/canonical"
)

// ComputeSeal returns the SHA-256, in hex, of the RFC 8785 canonical JSON of
// r with its Seal field left out. Every other field is covered, PrevSeal
// included, so each version chains to the one it replaced. The body enters
// through body_sha256 (as it must for a body held in S3), and Verify checks
// the inline body against that hash; canonicalizing a large body byte by
// byte would add nothing but cost (docs/seal.md).
func ComputeSeal(r *Record) (string, error) {
	canon, err := CanonicalJSON(r)
	if err != nil {
		return "", err
	}
	return sha256Hex(canon), nil
}

// Canonical returns the RFC 8785 (JCS) canonical form of v's encoding/json
// encoding: the bytes every seal in the system is computed over (records
// here, policies in package policy). package canonical writes them
// directly; in a test binary every call is checked against the reference,
// gowebpki/jcs over json.Marshal, so that the whole test suite proves the
// two equal on every value it seals.
func Canonical(v any) ([]byte, error) {
	out, err := canonical.Marshal(v)
	if crossChecking() {
		crossCheck(v, out, err)
	}
	return out, err
}

// crossChecking reports whether this is a test binary (its testing flags
// are registered) running tests, not benchmarks (whose figures must not
// include the reference's cost). Read from the flags, so that the
// functions' binaries do not link package testing.
func crossChecking() bool {
	if flag.Lookup("test.v") == nil {
		return false
	}
	f := flag.Lookup("test.bench")
	return f == nil || f.Value.String() == ""
}

// reference is the canonical JSON the seals were first computed over:
// gowebpki/jcs over json.Marshal.
func reference(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// crossCheck panics when the reference encoding of v differs from out (or
// only one of them fails): a seal that no other implementation of RFC
// 8785 reproduces would be worthless.
func crossCheck(v any, out []byte, err error) {
	want, rerr := reference(v)
	if (err != nil) != (rerr != nil) || err == nil && !bytes.Equal(out, want) {
		panic(fmt.Sprintf("canonical JSON differs from gowebpki/jcs over json.Marshal for a %T: error %v, reference error %v\ncanonical %s\nreference %s", v, err, rerr, out, want))
	}
}

// CanonicalSHA256 returns the SHA-256, in hex, of Canonical(v): the one
// seal function that records and policies share.
func CanonicalSHA256(v any) (string, error) {
	canon, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return sha256Hex(canon), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CanonicalJSON returns the RFC 8785 canonical JSON of r without its seal:
// the exact bytes the seal is computed over.
func CanonicalJSON(r *Record) ([]byte, error) {
	canon, err := Canonical(sealed(r))
	if err != nil {
		return nil, fmt.Errorf("canonicalize record: %w", err)
	}
	return canon, nil
}

// sealed is what r's seal covers: r without its seal and its bodies
// (which enter through their hashes).
func sealed(r *Record) *Record {
	body := *r
	body.Seal = ""
	body.Body = ""
	if len(r.Corrections) > 0 {
		body.Corrections = append([]Correction(nil), r.Corrections...)
		for i := range body.Corrections {
			body.Corrections[i].Body = "" // through its body_sha256, as the original
		}
	}
	return &body
}

// referenceSeal is r's seal computed the reference way (ComputeSeal's
// bytes are proven equal to it; Verify asks it before it calls a record
// tampered, so that no difference yet unknown holds a record that is as
// it was sealed).
func referenceSeal(r *Record) (string, error) {
	canon, err := reference(sealed(r))
	if err != nil {
		return "", err
	}
	return sha256Hex(canon), nil
}

// SealRecord sets r.Seal to the seal of its current contents.
func SealRecord(r *Record) error {
	s, err := ComputeSeal(r)
	if err != nil {
		return err
	}
	r.Seal = s
	return nil
}

// Verify recomputes r's seal and checks its inline body against
// body_sha256 (an archived stub's body is in its archive object, checked by
// the archive's verification). It reports a *SealError when either differs.
func Verify(r *Record) error {
	if r.undecodable != "" {
		return &SealError{ID: r.DLQID, Stored: r.Seal, Computed: "item does not decode as a record"}
	}
	got, err := ComputeSeal(r)
	if err != nil {
		return err
	}
	if r.Seal == "" || got != r.Seal {
		if ref, rerr := referenceSeal(r); rerr != nil || r.Seal == "" || ref != r.Seal {
			return &SealError{ID: r.DLQID, Stored: r.Seal, Computed: got}
		}
	}
	if r.BodyRef != nil && r.Body != "" {
		return &SealError{ID: r.DLQID, Stored: r.BodySHA256, Computed: "body both inline and in the payload store", Body: true}
	}
	if r.BodyRef == nil && r.Archive == nil {
		raw, err := decodeBody(r)
		if err != nil {
			return &SealError{ID: r.DLQID, Stored: r.BodySHA256, Computed: "undecodable body", Body: true}
		}
		if sum := BodySHA256(raw); sum != r.BodySHA256 || int64(len(raw)) != r.BodySize {
			return &SealError{ID: r.DLQID, Stored: r.BodySHA256, Computed: sum, Body: true}
		}
	}
	for _, c := range r.Corrections {
		if c.BodyRef != nil && c.Body != "" {
			return &SealError{ID: r.DLQID, Stored: c.BodySHA256, Computed: fmt.Sprintf("correction %d both inline and in the payload store", c.N), Body: true}
		}
		if c.BodyRef == nil && r.Archive == nil {
			if sum := BodySHA256([]byte(c.Body)); sum != c.BodySHA256 || int64(len(c.Body)) != c.BodySize {
				return &SealError{ID: r.DLQID, Stored: c.BodySHA256, Computed: sum, Body: true}
			}
		}
	}
	return nil
}

// VerifyChain checks that next is a correctly sealed successor of prev.
func VerifyChain(prev, next *Record) error {
	if err := Verify(next); err != nil {
		return err
	}
	if next.PrevSeal != prev.Seal {
		return &SealError{ID: next.DLQID, Stored: next.PrevSeal, Computed: prev.Seal, Chain: true}
	}
	return nil
}
