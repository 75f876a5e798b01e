// Package macfake is an in-memory stand-in for KMS HMAC keys
// (GenerateMac/VerifyMac with HMAC_SHA_256) for unit tests: each key has
// an ARN and a random secret; a message over 4,096 bytes or empty is
// refused as KMS refuses it, a MAC under an unknown key is an error, a
// MAC that does not verify is (false, nil) as kmsmac.Verifier reports
// KMSInvalidMacException.
package macfake

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Keys holds the fake's keys by ARN.
type Keys struct {
	mu       sync.Mutex
	secrets  map[string][]byte
	Generate atomic.Int64 // GenerateMac calls
	Verifies atomic.Int64 // VerifyMac calls
}

// New returns a fake with one key per ARN.
func New(arns ...string) *Keys {
	k := &Keys{secrets: map[string][]byte{}}
	for _, a := range arns {
		s := make([]byte, 32)
		_, _ = rand.Read(s)
		k.secrets[a] = s
	}
	return k
}

// ErrMessage is the fake's refusal of a message KMS refuses (empty or
// over 4,096 bytes: ValidationException).
var ErrMessage = errors.New("macfake: message must be 1 to 4096 bytes")

func (k *Keys) secret(arn string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.secrets[arn]
	if !ok {
		return nil, fmt.Errorf("macfake: NotFoundException: key %s", arn)
	}
	return s, nil
}

// MAC is one key's generator (writerproof.Generator).
type MAC struct {
	Keys *Keys
	ARN  string
}

// Generate MACs msg with the key and returns the key's ARN.
func (m MAC) Generate(_ context.Context, msg []byte) ([]byte, string, error) {
	m.Keys.Generate.Add(1)
	if len(msg) == 0 || len(msg) > 4096 {
		return nil, "", ErrMessage
	}
	s, err := m.Keys.secret(m.ARN)
	if err != nil {
		return nil, "", err
	}
	h := hmac.New(sha256.New, s)
	h.Write(msg)
	return h.Sum(nil), m.ARN, nil
}

// Verify reports whether mac is msg's MAC under keyARN.
func (k *Keys) Verify(_ context.Context, keyARN string, msg, mac []byte) (bool, error) {
	k.Verifies.Add(1)
	if len(msg) == 0 || len(msg) > 4096 {
		return false, ErrMessage
	}
	s, err := k.secret(keyARN)
	if err != nil {
		return false, err
	}
	h := hmac.New(sha256.New, s)
	h.Write(msg)
	return hmac.Equal(h.Sum(nil), mac), nil
}
