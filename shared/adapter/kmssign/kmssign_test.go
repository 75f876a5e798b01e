package kmssign_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/kmssign"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func kmsClient(t *testing.T) *kms.Client {
	t.Helper()
	st, err := embedded.Start(context.Background(), embedded.Options{NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return kms.NewFromConfig(st.AWS)
}

func createKey(t *testing.T, c *kms.Client, spec types.KeySpec) string {
	t.Helper()
	out, err := c.CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: spec, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatalf("CreateKey %s SIGN_VERIFY: %v", spec, err)
	}
	return aws.ToString(out.KeyMetadata.Arn)
}

// Measured on kumo: an ECC_NIST_P256 SIGN_VERIFY key signs a digest
// (ECDSA_SHA_256, MessageType DIGEST) with a signature that Go's
// ecdsa.VerifyASN1 accepts under the DER key GetPublicKey returns.
func TestKumoSignsP256DigestsThatVerifyOffline(t *testing.T) {
	c := kmsClient(t)
	arn := createKey(t, c, types.KeySpecEccNistP256)
	hash := sha256.Sum256([]byte("digest"))
	sig, err := c.Sign(context.Background(), &kms.SignInput{KeyId: aws.String(arn), Message: hash[:],
		MessageType: types.MessageTypeDigest, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256})
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	pub, err := c.GetPublicKey(context.Background(), &kms.GetPublicKeyInput{KeyId: aws.String(arn)})
	if err != nil {
		t.Fatalf("GetPublicKey: %v", err)
	}
	k, err := x509.ParsePKIXPublicKey(pub.PublicKey)
	if err != nil {
		t.Fatalf("ParsePKIXPublicKey: %v", err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok {
		t.Fatalf("public key is %T", k)
	}
	if !ecdsa.VerifyASN1(ek, hash[:], sig.Signature) {
		t.Fatal("kumo's signature does not verify with ecdsa.VerifyASN1")
	}
	hash[0] ^= 1
	if ecdsa.VerifyASN1(ek, hash[:], sig.Signature) {
		t.Fatal("the signature verifies another hash")
	}
}

func TestSignerSignsWhatLedgerVerifies(t *testing.T) {
	c := kmsClient(t)
	arn := createKey(t, c, types.KeySpecEccNistP256)
	s, err := kmssign.New(context.Background(), c, arn)
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID() != arn || s.Algorithm() != ledger.AlgECDSA {
		t.Fatalf("key %s, algorithm %s", s.KeyID(), s.Algorithm())
	}
	hash := sha256.Sum256([]byte("d"))
	sig, err := s.Sign(context.Background(), hash)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := s.PublicKey(context.Background())
	if err := ledger.VerifySignature(s.Algorithm(), der, hash, sig); err != nil {
		t.Fatal(err)
	}
	enc, err := c.CreateKey(context.Background(), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kmssign.New(context.Background(), c, aws.ToString(enc.KeyMetadata.Arn)); err == nil {
		t.Fatal("an ENCRYPT_DECRYPT key was taken for signing")
	}
}
