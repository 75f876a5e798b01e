package writerproof

import (
	"context"
	"errors"
	"fmt"
)

// The ways a version's proof fails (Check wraps them).
var (
	// ErrMissing: the version carries no proof.
	ErrMissing = errors.New("no writer proof")
	// ErrInvalid: a proof that does not parse, names a key that is not
	// one of the configured writer keys (or names another role than the
	// key's), does not lead to a root, or whose MAC does not verify.
	ErrInvalid = errors.New("writer proof invalid")
	// ErrUnverified: a well-formed proof under a configured key whose MAC
	// could not be checked (no MAC verifier: verify --offline).
	ErrUnverified = errors.New("writer proof not verified")
)

// Keys maps each configured writer key's ARN to its role.
type Keys map[string]Role

// VerifyMAC reports whether mac is msg's MAC under keyARN (KMS VerifyMac:
// shared/adapter/kmsmac.Verifier.Verify).
type VerifyMAC func(ctx context.Context, keyARN string, msg, mac []byte) (bool, error)

// Check checks the stored proof enc of leaf and returns the role it proves.
// verify nil checks everything but the MAC (ErrUnverified when the rest
// holds). A failed MAC call is returned as it is (neither missing nor
// invalid).
func Check(ctx context.Context, keys Keys, verify VerifyMAC, leaf Leaf, enc string) (Role, error) {
	if enc == "" {
		return "", ErrMissing
	}
	p, err := Parse(enc)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	role, ok := keys[p.Key]
	switch {
	case !ok:
		return "", fmt.Errorf("%w: key %s is not a configured writer key", ErrInvalid, p.Key)
	case role != p.Role:
		return "", fmt.Errorf("%w: the proof says role %s, key %s is the %s key", ErrInvalid, p.Role, p.Key, role)
	}
	root, err := p.Root(leaf)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	mac, err := p.MACBytes()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if verify == nil {
		return role, ErrUnverified
	}
	good, err := verify(ctx, p.Key, Descriptor(role, root, p.N), mac)
	if err != nil {
		return "", fmt.Errorf("verify writer mac: %w", err)
	}
	if !good {
		return "", fmt.Errorf("%w: the MAC does not verify under the %s key", ErrInvalid, role)
	}
	return role, nil
}
