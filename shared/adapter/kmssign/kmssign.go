// Package kmssign signs the ledger's digests with an asymmetric KMS key
// (KeyUsage SIGN_VERIFY): its private part never leaves KMS.
package kmssign

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// API is what the signer needs of the KMS client.
type API interface {
	Sign(ctx context.Context, in *kms.SignInput, opts ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, opts ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// Signer signs SHA-256 hashes with one key (the ledger's Signer port).
type Signer struct {
	api       API
	keyARN    string
	algorithm types.SigningAlgorithmSpec
	der       []byte
}

// New resolves keyID (an ARN, a key id or an alias) with GetPublicKey: the
// key's ARN (what digests record), its public key, and the algorithm its
// spec signs with (ECDSA_SHA_256 for ECC_NIST_P256, RSASSA_PSS_SHA_256 for
// an RSA key). A key that cannot sign is refused.
func New(ctx context.Context, api API, keyID string) (*Signer, error) {
	out, err := api.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		return nil, fmt.Errorf("get public key of %s: %w", keyID, err)
	}
	if out.KeyUsage != types.KeyUsageTypeSignVerify {
		return nil, fmt.Errorf("key %s has usage %s, not SIGN_VERIFY", keyID, out.KeyUsage)
	}
	s := &Signer{api: api, keyARN: aws.ToString(out.KeyId), der: out.PublicKey}
	switch out.KeySpec {
	case types.KeySpecEccNistP256:
		s.algorithm = types.SigningAlgorithmSpecEcdsaSha256
	case types.KeySpecRsa2048, types.KeySpecRsa3072, types.KeySpecRsa4096:
		s.algorithm = types.SigningAlgorithmSpecRsassaPssSha256
	default:
		return nil, fmt.Errorf("key %s has spec %s: the ledger signs with ECC_NIST_P256 (or RSA)", keyID, out.KeySpec)
	}
	if s.keyARN == "" || len(s.der) == 0 {
		return nil, errors.New("get public key: no key id or public key in the answer")
	}
	return s, nil
}

// Sign signs a SHA-256 hash (MessageType DIGEST: KMS does not hash again).
func (s *Signer) Sign(ctx context.Context, hash [32]byte) ([]byte, error) {
	out, err := s.api.Sign(ctx, &kms.SignInput{KeyId: aws.String(s.keyARN), Message: hash[:],
		MessageType: types.MessageTypeDigest, SigningAlgorithm: s.algorithm})
	if err != nil {
		return nil, fmt.Errorf("kms sign: %w", err)
	}
	if len(out.Signature) == 0 {
		return nil, errors.New("kms sign: empty signature")
	}
	return out.Signature, nil
}

// KeyID is the key's ARN.
func (s *Signer) KeyID() string { return s.keyARN }

// Algorithm is the signing algorithm as digests record it.
func (s *Signer) Algorithm() string {
	if s.algorithm == types.SigningAlgorithmSpecRsassaPssSha256 {
		return ledger.AlgRSAPSS
	}
	return ledger.AlgECDSA
}

// PublicKey is the key's public part, DER (SubjectPublicKeyInfo).
func (s *Signer) PublicKey(context.Context) ([]byte, error) { return s.der, nil }
