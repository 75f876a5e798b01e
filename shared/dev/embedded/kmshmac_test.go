package embedded

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
)

// kmsClient is a KMS client of the process's kumo endpoint (with the dev
// kit's HMAC keys in front), or of url when given.
func kmsClient(t *testing.T, url ...string) *kms.Client {
	t.Helper()
	u := ""
	if len(url) > 0 {
		u = url[0]
	} else {
		var err error
		if u, err = kumoURL(); err != nil {
			t.Fatal(err)
		}
	}
	return kms.New(kms.Options{Region: Region, BaseEndpoint: aws.String(u),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

func newHMACKey(t *testing.T, c *kms.Client, spec types.KeySpec) *types.KeyMetadata {
	t.Helper()
	out, err := c.CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: spec, KeyUsage: types.KeyUsageTypeGenerateVerifyMac, Description: aws.String("test " + string(spec))})
	if err != nil {
		t.Fatalf("create %s key: %v", spec, err)
	}
	return out.KeyMetadata
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// GenerateMac and VerifyMac as the KMS API reference describes them: the
// key named by its id, ARN, alias name or alias ARN; KeyId in the answer
// is the key's ARN; the MAC has the algorithm's length; VerifyMac says
// MacValid or fails with KMSInvalidMacException.
func TestHMACGenerateAndVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := kmsClient(t)
	key := newHMACKey(t, c, types.KeySpecHmac256)
	if key.KeySpec != types.KeySpecHmac256 || key.KeyUsage != types.KeyUsageTypeGenerateVerifyMac || !slices.Equal(key.MacAlgorithms, []types.MacAlgorithmSpec{types.MacAlgorithmSpecHmacSha256}) {
		t.Fatalf("CreateKey metadata: spec %s, usage %s, MAC algorithms %v", key.KeySpec, key.KeyUsage, key.MacAlgorithms)
	}
	alias := "alias/" + RandomName("hmac")
	if _, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: key.KeyId}); err != nil {
		t.Fatal(err)
	}
	aliasARN := "arn:aws:kms:" + Region + ":" + Account + ":" + alias
	desc, err := c.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(aliasARN)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(desc.KeyMetadata.Arn) != aws.ToString(key.Arn) || !slices.Equal(desc.KeyMetadata.MacAlgorithms, key.MacAlgorithms) {
		t.Fatalf("DescribeKey(alias ARN) = %s %v, want %s %v", aws.ToString(desc.KeyMetadata.Arn), desc.KeyMetadata.MacAlgorithms, aws.ToString(key.Arn), key.MacAlgorithms)
	}
	msg := []byte("Hello World")
	var first []byte
	for _, id := range []string{aws.ToString(key.KeyId), aws.ToString(key.Arn), alias, aliasARN} {
		g, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: aws.String(id), Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
		if err != nil {
			t.Fatalf("GenerateMac(%s): %v", id, err)
		}
		if aws.ToString(g.KeyId) != aws.ToString(key.Arn) || g.MacAlgorithm != types.MacAlgorithmSpecHmacSha256 || len(g.Mac) != 32 {
			t.Fatalf("GenerateMac(%s) = key %s, %s, %d bytes", id, aws.ToString(g.KeyId), g.MacAlgorithm, len(g.Mac))
		}
		if first == nil {
			first = g.Mac
		} else if !bytes.Equal(first, g.Mac) {
			t.Fatalf("GenerateMac(%s) gives another MAC than by key id", id)
		}
		v, err := c.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: aws.String(id), Message: msg, Mac: g.Mac, MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
		if err != nil || !v.MacValid || aws.ToString(v.KeyId) != aws.ToString(key.Arn) || v.MacAlgorithm != types.MacAlgorithmSpecHmacSha256 {
			t.Fatalf("VerifyMac(%s) = %+v, %v", id, v, err)
		}
	}
	wrong := bytes.Clone(first)
	wrong[0] ^= 1
	for name, in := range map[string]*kms.VerifyMacInput{
		"wrong MAC":     {Message: msg, Mac: wrong},
		"short MAC":     {Message: msg, Mac: first[:31]},
		"other message": {Message: []byte("Hello World!"), Mac: first},
	} {
		in.KeyId, in.MacAlgorithm = key.KeyId, types.MacAlgorithmSpecHmacSha256
		_, err := c.VerifyMac(ctx, in)
		if bad := (*types.KMSInvalidMacException)(nil); !errors.As(err, &bad) {
			t.Errorf("%s: VerifyMac = %v, want KMSInvalidMacException", name, err)
		}
	}
	// Another key of the same spec has other material.
	other := newHMACKey(t, c, types.KeySpecHmac256)
	if _, err := c.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: other.KeyId, Message: msg, Mac: first, MacAlgorithm: types.MacAlgorithmSpecHmacSha256}); apiCode(err) != "KMSInvalidMacException" {
		t.Errorf("VerifyMac under another key = %v, want KMSInvalidMacException", err)
	}
	// DryRun checks and computes nothing.
	if _, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.KeyId, Message: msg, MacAlgorithm: types.MacAlgorithmSpecHmacSha256, DryRun: aws.Bool(true)}); apiCode(err) != "DryRunOperationException" {
		t.Errorf("GenerateMac DryRun = %v, want DryRunOperationException", err)
	}
}

// Each HMAC key spec takes its own algorithm only (InvalidKeyUsageException
// otherwise) and gives a MAC of its length.
func TestHMACSpecsAndAlgorithms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := kmsClient(t)
	specs := []struct {
		spec types.KeySpec
		alg  types.MacAlgorithmSpec
		size int
	}{
		{types.KeySpecHmac224, types.MacAlgorithmSpecHmacSha224, 28},
		{types.KeySpecHmac256, types.MacAlgorithmSpecHmacSha256, 32},
		{types.KeySpecHmac384, types.MacAlgorithmSpecHmacSha384, 48},
		{types.KeySpecHmac512, types.MacAlgorithmSpecHmacSha512, 64},
	}
	// The deprecated CustomerMasterKeySpec names the spec as well.
	//lint:ignore SA1019 KMS still takes the deprecated field, and so must the dev kit
	old, err := c.CreateKey(ctx, &kms.CreateKeyInput{CustomerMasterKeySpec: types.CustomerMasterKeySpecHmac384, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil || old.KeyMetadata.KeySpec != types.KeySpecHmac384 {
		t.Fatalf("CreateKey with CustomerMasterKeySpec HMAC_384: %+v, %v", old, err)
	}
	if g, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: old.KeyMetadata.KeyId, Message: []byte("m"), MacAlgorithm: types.MacAlgorithmSpecHmacSha384}); err != nil || len(g.Mac) != 48 {
		t.Errorf("GenerateMac with a CustomerMasterKeySpec key: %v", err)
	}
	for _, s := range specs {
		key := newHMACKey(t, c, s.spec)
		if !slices.Equal(key.MacAlgorithms, []types.MacAlgorithmSpec{s.alg}) {
			t.Errorf("%s: MacAlgorithms %v", s.spec, key.MacAlgorithms)
		}
		for _, a := range specs {
			g, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.KeyId, Message: []byte("m"), MacAlgorithm: a.alg})
			switch {
			case a.alg == s.alg && (err != nil || len(g.Mac) != s.size):
				t.Errorf("%s with %s: %v", s.spec, a.alg, err)
			case a.alg != s.alg && !errors.As(err, new(*types.InvalidKeyUsageException)):
				t.Errorf("%s with %s: %v, want InvalidKeyUsageException", s.spec, a.alg, err)
			}
		}
	}
}

// The requests KMS refuses, with the errors it names.
func TestHMACRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := kmsClient(t)
	key := newHMACKey(t, c, types.KeySpecHmac256)
	gen := func(id string, msg []byte, alg types.MacAlgorithmSpec) error {
		_, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: aws.String(id), Message: msg, MacAlgorithm: alg})
		return err
	}
	id := aws.ToString(key.KeyId)
	if err := gen(id, bytes.Repeat([]byte("x"), 4096), types.MacAlgorithmSpecHmacSha256); err != nil {
		t.Errorf("a 4,096-byte message: %v", err)
	}
	if err := gen(id, bytes.Repeat([]byte("x"), 4097), types.MacAlgorithmSpecHmacSha256); apiCode(err) != "ValidationException" {
		t.Errorf("a 4,097-byte message: %v, want ValidationException", err)
	}
	if err := gen(id, []byte{}, types.MacAlgorithmSpecHmacSha256); apiCode(err) != "ValidationException" {
		t.Errorf("an empty message: %v, want ValidationException", err)
	}
	if err := gen(id, []byte("m"), "HMAC_MD5"); apiCode(err) != "ValidationException" {
		t.Errorf("an unknown algorithm: %v, want ValidationException", err)
	}
	if _, err := c.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: key.KeyId, Message: []byte("m"), Mac: make([]byte, 6145), MacAlgorithm: types.MacAlgorithmSpecHmacSha256}); apiCode(err) != "ValidationException" {
		t.Errorf("a 6,145-byte MAC: %v, want ValidationException", err)
	}
	for _, missing := range []string{"0b6bd3a4-9e09-4a5c-8a6f-1e3b8f6c0d11", "alias/" + RandomName("nosuch"), "arn:aws:kms:" + Region + ":" + Account + ":alias/" + RandomName("nosuch")} {
		if err := gen(missing, []byte("m"), types.MacAlgorithmSpecHmacSha256); !errors.As(err, new(*types.NotFoundException)) {
			t.Errorf("GenerateMac(%s) = %v, want NotFoundException", missing, err)
		}
	}
	// An alias ARN of another account does not name this account's alias.
	alias := "alias/" + RandomName("hmac")
	if _, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: key.KeyId}); err != nil {
		t.Fatal(err)
	}
	if err := gen("arn:aws:kms:"+Region+":111122223333:"+alias, []byte("m"), types.MacAlgorithmSpecHmacSha256); !errors.As(err, new(*types.NotFoundException)) {
		t.Errorf("GenerateMac(another account's alias ARN) = %v, want NotFoundException", err)
	}

	// Keys of other usages.
	enc, err := c.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gen(aws.ToString(enc.KeyMetadata.KeyId), []byte("m"), types.MacAlgorithmSpecHmacSha256); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("GenerateMac with an encryption key = %v, want InvalidKeyUsageException", err)
	}
	sig, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: sig.KeyMetadata.KeyId, Message: []byte("m"), Mac: make([]byte, 32), MacAlgorithm: types.MacAlgorithmSpecHmacSha256}); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("VerifyMac with a signing key = %v, want InvalidKeyUsageException", err)
	}
	if _, err := c.Encrypt(ctx, &kms.EncryptInput{KeyId: key.KeyId, Plaintext: []byte("m")}); !errors.As(err, new(*types.InvalidKeyUsageException)) {
		t.Errorf("Encrypt with an HMAC key = %v, want InvalidKeyUsageException", err)
	}

	// CreateKey's spec and usage go together.
	for name, in := range map[string]*kms.CreateKeyInput{
		"HMAC spec, encryption usage": {KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeEncryptDecrypt},
		"HMAC spec, no usage":         {KeySpec: types.KeySpecHmac384},
		"MAC usage, no spec":          {KeyUsage: types.KeyUsageTypeGenerateVerifyMac},
		"MAC usage, ECC spec":         {KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac},
	} {
		if _, err := c.CreateKey(ctx, in); apiCode(err) != "ValidationException" {
			t.Errorf("CreateKey %s = %v, want ValidationException", name, err)
		}
	}

	// A disabled key neither generates nor verifies; enabled again, it does.
	g, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.KeyId, Message: []byte("m"), MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DisableKey(ctx, &kms.DisableKeyInput{KeyId: key.KeyId}); err != nil {
		t.Fatal(err)
	}
	if err := gen(id, []byte("m"), types.MacAlgorithmSpecHmacSha256); !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("GenerateMac with a disabled key = %v, want DisabledException", err)
	}
	verify := func() error {
		_, err := c.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: key.KeyId, Message: []byte("m"), Mac: g.Mac, MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
		return err
	}
	if err := verify(); !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("VerifyMac with a disabled key = %v, want DisabledException", err)
	}
	if _, err := c.EnableKey(ctx, &kms.EnableKeyInput{KeyId: key.KeyId}); err != nil {
		t.Fatal(err)
	}
	if err := verify(); err != nil {
		t.Errorf("VerifyMac with the key enabled again: %v", err)
	}
	// A key pending deletion is in the wrong state.
	if _, err := c.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: key.KeyId, PendingWindowInDays: aws.Int32(7)}); err != nil {
		t.Fatal(err)
	}
	if err := verify(); !errors.As(err, new(*types.KMSInvalidStateException)) {
		t.Errorf("VerifyMac with a key pending deletion = %v, want KMSInvalidStateException", err)
	}
}

// With a data dir the key material is on disk before CreateKey answers: a
// handler started afresh over the same kumo state verifies the old MACs.
// A file it cannot read is an error, not an empty key set.
func TestHMACKeysPersist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := kumoURL(); err != nil {
		t.Fatal(err)
	}
	next := kumoSrv.Config.Handler.(*hmacKMS).next
	dir := filepath.Join(t.TempDir(), "kumo") // not there yet: the first key makes it
	h1, err := newHMACKMS(next, dir)
	if err != nil {
		t.Fatal(err)
	}
	s1 := httptest.NewServer(h1)
	defer s1.Close()
	c1 := kmsClient(t, s1.URL)
	key := newHMACKey(t, c1, types.KeySpecHmac512)
	g, err := c1.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.Arn, Message: []byte("kept"), MacAlgorithm: types.MacAlgorithmSpecHmacSha512})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, hmacFileName)); err != nil || !strings.Contains(string(b), aws.ToString(key.Arn)) {
		t.Fatalf("key file after CreateKey: %v, %.80q", err, b)
	}

	h2, err := newHMACKMS(next, dir)
	if err != nil {
		t.Fatal(err)
	}
	s2 := httptest.NewServer(h2)
	defer s2.Close()
	if v, err := kmsClient(t, s2.URL).VerifyMac(ctx, &kms.VerifyMacInput{KeyId: key.Arn, Message: []byte("kept"), Mac: g.Mac, MacAlgorithm: types.MacAlgorithmSpecHmacSha512}); err != nil || !v.MacValid {
		t.Fatalf("VerifyMac after a restart: %+v, %v", v, err)
	}
	// Without the material (a handler that never kept it), the key is
	// refused with an error that says why, never a MAC of other material.
	s3 := httptest.NewServer(&hmacKMS{next: next, keys: map[string]hmacKey{}})
	defer s3.Close()
	if _, err := kmsClient(t, s3.URL).GenerateMac(ctx, &kms.GenerateMacInput{KeyId: key.Arn, Message: []byte("kept"), MacAlgorithm: types.MacAlgorithmSpecHmacSha512}); !errors.As(err, new(*types.KMSInternalException)) || !strings.Contains(err.Error(), "no key material") {
		t.Errorf("GenerateMac without the material = %v, want KMSInternalException naming it", err)
	}

	for name, content := range map[string]string{
		"not JSON":     "{",
		"short key":    `{"arn:aws:kms:us-east-1:000000000000:key/x":{"spec":"HMAC_256","material":"AAAA"}}`,
		"unknown spec": `{"arn:aws:kms:us-east-1:000000000000:key/x":{"spec":"AES","material":"AAAA"}}`,
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, hmacFileName), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newHMACKMS(next, bad); err == nil || !strings.Contains(err.Error(), "dev kit HMAC keys") {
			t.Errorf("%s: newHMACKMS = %v, want an error naming the file", name, err)
		}
	}
}
