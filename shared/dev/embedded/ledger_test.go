package embedded_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// The template's signing key is created as it declares it (ECC_NIST_P256,
// SIGN_VERIFY), and kumo signs a digest with it that Go verifies offline
// with the public key, as dlqctl verify --offline does; the encryption key
// stays a symmetric one. The ledger's two functions and its stream mapping see
// the table's real stream ARN.
func TestTheLedgersKeysAndStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startNoS3(ctx, t)
	client := kms.NewFromConfig(st.AWS)
	// The keys answer under the aliases the template declares
	// (AWS::KMS::Alias), which dlqctl's default --signing-key names.
	signer := "alias/" + st.Env.StackName + "-ledger-signing"
	aliases := map[string]string{"LedgerSigningKey": signer, "QuarantineKey": "alias/" + st.Env.StackName + "-quarantine"}
	for id, want := range map[string][2]string{"LedgerSigningKey": {"ECC_NIST_P256", "SIGN_VERIFY"}, "QuarantineKey": {"SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT"}} {
		if st.Names[id] != aliases[id] {
			t.Errorf("%s named %q, the template's alias is %q", id, st.Names[id], aliases[id])
		}
		got, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(aliases[id])})
		if err != nil {
			t.Fatalf("%s under %s: %v", id, aliases[id], err)
		}
		if string(got.KeyMetadata.KeySpec) != want[0] || string(got.KeyMetadata.KeyUsage) != want[1] {
			t.Errorf("%s is %s/%s, want %s/%s", id, got.KeyMetadata.KeySpec, got.KeyMetadata.KeyUsage, want[0], want[1])
		}
	}
	digest := sha256.Sum256([]byte(`{"format":"dlqq-ledger-digest/1","n":1}`))
	sig, err := client.Sign(ctx, &kms.SignInput{KeyId: aws.String(signer), Message: digest[:], MessageType: kmstypes.MessageTypeDigest, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(signer)})
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKIXPublicKey(pub.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve.Params().Name != "P-256" {
		t.Fatalf("public key %T", key)
	}
	if !ecdsa.VerifyASN1(ec, digest[:], sig.Signature) {
		t.Fatal("the signature does not verify with the public key")
	}
	other := sha256.Sum256([]byte("another digest"))
	if ecdsa.VerifyASN1(ec, other[:], sig.Signature) {
		t.Fatal("the signature verifies another digest")
	}

	stream := st.StreamARNs["QuarantineTable"]
	m, err := st.Template.GetLambdaEventSourceMappingWithName("LedgerStreamMapping")
	if err != nil {
		t.Fatal(err)
	}
	if stream == "" || aws.ToString(m.EventSourceArn) != stream {
		t.Fatalf("stream %q; the mapping reads %q", stream, aws.ToString(m.EventSourceArn))
	}
	// Both of the ledger's functions, the stream function and the digest
	// function (which names the stream function by its stack name).
	for id, streamFn := range map[string]string{"LedgerFunction": "", "DigestFunction": st.Env.StackName + "-ledger"} {
		fn, err := st.Template.GetServerlessFunctionWithName(id)
		if err != nil {
			t.Fatal(err)
		}
		if v := fn.Environment.Variables; v["STREAM_ARN"] != stream || v["STREAM_FUNCTION_NAME"] != streamFn {
			t.Fatalf("%s sees stream %q and stream function %q; want %q and %q", id, v["STREAM_ARN"], v["STREAM_FUNCTION_NAME"], stream, streamFn)
		}
	}
}

// A stack started before keys were named by the template's aliases has its
// signing key under alias/STACK-ledgersigningkey: a later start keeps that
// key (old digests must still verify) and gives it the template's alias.
func TestAKeyUnderTheOldAliasIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := startNoS3(ctx, t)
	client := kms.NewFromConfig(first.AWS)
	name := embedded.RandomName("dlqq")
	old, err := client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String("alias/" + name + "-ledgersigningkey"), TargetKeyId: old.KeyMetadata.KeyId}); err != nil {
		t.Fatal(err)
	}
	st, err := embedded.Start(ctx, embedded.Options{StackName: name, Dir: t.TempDir(), NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String("alias/" + name + "-ledger-signing")})
	if err != nil {
		t.Fatal(err)
	}
	if k := aws.ToString(got.KeyMetadata.KeyId); k != aws.ToString(old.KeyMetadata.KeyId) || st.KeyARNs["LedgerSigningKey"] != aws.ToString(old.KeyMetadata.Arn) {
		t.Fatalf("the signing key is %s (%s), want the one under the old alias, %s", k, st.KeyARNs["LedgerSigningKey"], aws.ToString(old.KeyMetadata.KeyId))
	}
}

// startNoS3 starts a stack without S3 for the test, closed at its end (a
// test may close it sooner).
func startNoS3(ctx context.Context, t *testing.T) *embedded.Stack {
	t.Helper()
	st, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir(), NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
