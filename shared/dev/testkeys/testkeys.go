// Package testkeys gives tests the signing keys the ledger's digests are
// checked with: a P-256 key in place of the stack's KMS signing key, and
// its public key as KMS GetPublicKey returns it.
package testkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// ECDSA is a new P-256 key and its public key's DER (X.509
// SubjectPublicKeyInfo, what KMS GetPublicKey returns).
func ECDSA(tb testing.TB) (*ecdsa.PrivateKey, []byte) {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return k, der
}

// SignDigest returns d signed with k as the digest function signs it
// (ECDSA over SHA-256 of its signing bytes, ASN.1, base64).
func SignDigest(tb testing.TB, k *ecdsa.PrivateKey, d ledger.Digest) ledger.Digest {
	tb.Helper()
	h, err := d.SigningHash()
	if err != nil {
		tb.Fatal(err)
	}
	sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
	if err != nil {
		tb.Fatal(err)
	}
	d.Signature = base64.StdEncoding.EncodeToString(sig)
	return d
}
