package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// ComputeSeal returns the SHA-256, in hex, of the RFC 8785 canonical JSON of
// r with its Seal field left out. Every other field is covered, PrevSeal
// included, so each version chains to the one it replaced.
func ComputeSeal(r *Record) (string, error) {
	canon, err := CanonicalJSON(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON returns the RFC 8785 canonical JSON of r without its seal:
// the exact bytes the seal is computed over.
func CanonicalJSON(r *Record) ([]byte, error) {
	body := *r
	body.Seal = ""
	raw, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("marshal record: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize record: %w", err)
	}
	return canon, nil
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

// Verify recomputes r's seal and reports a *SealError when it differs from
// the stored one.
func Verify(r *Record) error {
	got, err := ComputeSeal(r)
	if err != nil {
		return err
	}
	if r.Seal == "" || got != r.Seal {
		return &SealError{ID: r.DLQID, Stored: r.Seal, Computed: got}
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
