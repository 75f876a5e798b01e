// Package kmsmac generates and verifies HMACs with KMS HMAC keys
// (KeySpec HMAC_256, KeyUsage GENERATE_VERIFY_MAC): the key material never
// leaves KMS, so only a principal the key's policy lets call
// kms:GenerateMac can make a MAC that verifies.
package kmsmac

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// API is what MAC and Verifier need of the KMS client.
type API interface {
	GenerateMac(ctx context.Context, in *kms.GenerateMacInput, opts ...func(*kms.Options)) (*kms.GenerateMacOutput, error)
	VerifyMac(ctx context.Context, in *kms.VerifyMacInput, opts ...func(*kms.Options)) (*kms.VerifyMacOutput, error)
}

// Algorithm is the MAC algorithm of every call: an HMAC_256 key's.
const Algorithm = types.MacAlgorithmSpecHmacSha256

// MACSize is the length of an HMAC_SHA_256 MAC.
const MACSize = 32

// MaxMessage is KMS's limit on a message's length (GenerateMac's Message).
const MaxMessage = 4096

// MAC generates with one key (KeyID: an ARN or alias/...), HMAC_SHA_256.
type MAC struct {
	API   API
	KeyID string
}

// Generate returns the MAC of msg and the key's ARN (GenerateMacOutput.KeyId).
func (m MAC) Generate(ctx context.Context, msg []byte) (mac []byte, keyARN string, err error) {
	switch {
	case m.API == nil:
		return nil, "", errors.New("kms generate mac: no KMS client")
	case m.KeyID == "":
		return nil, "", errors.New("kms generate mac: no key id")
	}
	if err := checkMessage(msg); err != nil {
		return nil, "", fmt.Errorf("kms generate mac with %s: %w", m.KeyID, err)
	}
	out, err := m.API.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: aws.String(m.KeyID), Message: msg, MacAlgorithm: Algorithm})
	if err != nil {
		return nil, "", fmt.Errorf("kms generate mac with %s: %w", m.KeyID, err)
	}
	switch {
	case len(out.Mac) == 0:
		return nil, "", fmt.Errorf("kms generate mac with %s: no MAC in the answer", m.KeyID)
	case aws.ToString(out.KeyId) == "":
		return nil, "", fmt.Errorf("kms generate mac with %s: no key id in the answer", m.KeyID)
	case out.MacAlgorithm != "" && out.MacAlgorithm != Algorithm:
		return nil, "", fmt.Errorf("kms generate mac with %s: the answer's algorithm is %s, not %s", m.KeyID, out.MacAlgorithm, Algorithm)
	}
	return out.Mac, aws.ToString(out.KeyId), nil
}

// Verifier verifies MACs of any key it is given. The key id must come
// from the verifier's own configuration, never from what it verifies: a
// MAC under a key the forger holds proves nothing.
type Verifier struct {
	API API
}

// Verify reports whether mac is msg's MAC under keyID (KMSInvalidMacException → false, nil; other errors → err).
func (v Verifier) Verify(ctx context.Context, keyID string, msg, mac []byte) (bool, error) {
	switch {
	case v.API == nil:
		return false, errors.New("kms verify mac: no KMS client")
	case keyID == "":
		return false, errors.New("kms verify mac: no key id")
	}
	if err := checkMessage(msg); err != nil {
		return false, fmt.Errorf("kms verify mac with %s: %w", keyID, err)
	}
	if len(mac) != MACSize {
		// No HMAC_SHA_256 MAC has another length (KMS would refuse an
		// empty or over-long one with a ValidationException): a wrong
		// MAC, not a failure of verify.
		return false, nil
	}
	out, err := v.API.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: aws.String(keyID), Message: msg, Mac: mac, MacAlgorithm: Algorithm})
	var invalid *types.KMSInvalidMacException
	switch {
	case errors.As(err, &invalid):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("kms verify mac with %s: %w", keyID, err)
	case !out.MacValid:
		// KMS answers a wrong MAC with KMSInvalidMacException, never
		// MacValid false; an answer that says false is not a proof either.
		return false, nil
	}
	return true, nil
}

func checkMessage(msg []byte) error {
	if len(msg) == 0 || len(msg) > MaxMessage {
		return fmt.Errorf("message is %d bytes: KMS takes 1 to %d", len(msg), MaxMessage)
	}
	return nil
}
