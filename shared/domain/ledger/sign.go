package ledger

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
)

// ErrBadSignature is a signature that does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// VerifySignature checks sig over the SHA-256 hash with the DER
// (SubjectPublicKeyInfo, as KMS GetPublicKey returns it) public key, by
// algorithm: AlgECDSA (ASN.1 signature, P-256) or AlgRSAPSS (salt length
// = hash length, as KMS signs).
func VerifySignature(algorithm string, publicKeyDER []byte, hash [32]byte, sig []byte) error {
	pub, err := x509.ParsePKIXPublicKey(publicKeyDER)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	switch algorithm {
	case AlgECDSA:
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("public key is %T, not ECDSA", pub)
		}
		if !ecdsa.VerifyASN1(k, hash[:], sig) {
			return ErrBadSignature
		}
	case AlgRSAPSS:
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("public key is %T, not RSA", pub)
		}
		if rsa.VerifyPSS(k, crypto.SHA256, hash[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) != nil {
			return ErrBadSignature
		}
	default:
		return fmt.Errorf("unknown signing algorithm %q", algorithm)
	}
	return nil
}

// VerifyDigest checks d's signature with the public key.
func VerifyDigest(d Digest, publicKeyDER []byte) error {
	sig, err := base64.StdEncoding.DecodeString(d.Signature)
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("digest %d: signature is not base64", d.N)
	}
	h, err := d.SigningHash()
	if err != nil {
		return fmt.Errorf("digest %d: %w", d.N, err)
	}
	if err := VerifySignature(d.Algorithm, publicKeyDER, h, sig); err != nil {
		return fmt.Errorf("digest %d: %w", d.N, err)
	}
	return nil
}
