package kmsmac_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// hmacKey starts an embedded stack (the dev kit's KMS HMAC keys in front
// of kumo) and creates an HMAC_256 key with an alias.
func hmacKey(t *testing.T) (c *kms.Client, arn, alias string) {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c = kms.NewFromConfig(st.AWS)
	out, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	alias = "alias/" + embedded.RandomName("writer")
	if _, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: out.KeyMetadata.KeyId}); err != nil {
		t.Fatal(err)
	}
	return c, aws.ToString(out.KeyMetadata.Arn), alias
}

// A MAC made through the alias verifies under the key's ARN (which
// Generate returns) and the alias; a changed MAC or message, or another
// key, is false with no error.
func TestGenerateAndVerify(t *testing.T) {
	ctx := context.Background()
	c, arn, alias := hmacKey(t)
	msg := bytes.Repeat([]byte{0xab}, 32)
	mac, keyARN, err := kmsmac.MAC{API: c, KeyID: alias}.Generate(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if keyARN != arn || len(mac) != kmsmac.MACSize {
		t.Fatalf("Generate = %d bytes under %s; want %d under %s", len(mac), keyARN, kmsmac.MACSize, arn)
	}
	v := kmsmac.Verifier{API: c}
	for _, id := range []string{arn, alias} {
		if ok, err := v.Verify(ctx, id, msg, mac); !ok || err != nil {
			t.Errorf("Verify(%s) = %v, %v; want true", id, ok, err)
		}
	}
	other, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(mac)
	flipped[31] ^= 0x80
	for name, c := range map[string]struct {
		key      string
		msg, mac []byte
	}{
		"changed MAC":     {arn, msg, flipped},
		"changed message": {arn, append(bytes.Clone(msg), 0), mac},
		"another key":     {aws.ToString(other.KeyMetadata.Arn), msg, mac},
		"short MAC":       {arn, msg, mac[:16]},
		"empty MAC":       {arn, msg, nil},
		"over-long MAC":   {arn, msg, make([]byte, 7000)},
	} {
		if ok, err := v.Verify(ctx, c.key, c.msg, c.mac); ok || err != nil {
			t.Errorf("%s: Verify = %v, %v; want false, nil", name, ok, err)
		}
	}
}

// A disabled key, an unknown key and a key of another usage are errors,
// not "false": verify must not call a proof invalid because KMS refused.
func TestRefusalsAreErrors(t *testing.T) {
	ctx := context.Background()
	c, arn, alias := hmacKey(t)
	msg := []byte("root")
	mac, _, err := kmsmac.MAC{API: c, KeyID: arn}.Generate(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	v := kmsmac.Verifier{API: c}
	for _, c := range []struct {
		key  string
		want any
	}{
		{"alias/" + embedded.RandomName("nosuch"), new(*types.NotFoundException)},
		{aws.ToString(enc.KeyMetadata.Arn), new(*types.InvalidKeyUsageException)},
	} {
		if ok, err := v.Verify(ctx, c.key, msg, mac); ok || !errors.As(err, c.want) {
			t.Errorf("Verify(%s) = %v, %v; want an error %T", c.key, ok, err, c.want)
		}
		if _, _, err := (kmsmac.MAC{API: v.API, KeyID: c.key}).Generate(ctx, msg); !errors.As(err, c.want) {
			t.Errorf("Generate(%s) = %v; want an error %T", c.key, err, c.want)
		}
	}
	if _, err := c.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Verify(ctx, alias, msg, mac); ok || !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("Verify with a disabled key = %v, %v; want DisabledException", ok, err)
	}
	if _, _, err := (kmsmac.MAC{API: c, KeyID: alias}).Generate(ctx, msg); !errors.As(err, new(*types.DisabledException)) {
		t.Errorf("Generate with a disabled key = %v; want DisabledException", err)
	}
}

// Bad input is an error before any call: no client, no key, a message KMS
// would refuse (empty or over 4,096 bytes).
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	var calls int
	api := countingAPI{&calls}
	for name, msg := range map[string][]byte{"empty": nil, "4,097 bytes": make([]byte, kmsmac.MaxMessage+1)} {
		if _, _, err := (kmsmac.MAC{API: api, KeyID: "alias/k"}).Generate(ctx, msg); err == nil || !strings.Contains(err.Error(), "1 to 4096") {
			t.Errorf("Generate %s message: %v", name, err)
		}
		if _, err := (kmsmac.Verifier{API: api}).Verify(ctx, "alias/k", msg, make([]byte, 32)); err == nil {
			t.Errorf("Verify %s message: no error", name)
		}
	}
	if _, _, err := (kmsmac.MAC{API: api}).Generate(ctx, []byte("m")); err == nil {
		t.Error("Generate without a key id: no error")
	}
	if _, _, err := (kmsmac.MAC{KeyID: "alias/k"}).Generate(ctx, []byte("m")); err == nil {
		t.Error("Generate without a client: no error")
	}
	if _, err := (kmsmac.Verifier{API: api}).Verify(ctx, "", []byte("m"), make([]byte, 32)); err == nil {
		t.Error("Verify without a key id: no error")
	}
	if _, err := (kmsmac.Verifier{}).Verify(ctx, "alias/k", []byte("m"), make([]byte, 32)); err == nil {
		t.Error("Verify without a client: no error")
	}
	if calls != 0 {
		t.Errorf("%d KMS calls for bad input", calls)
	}
	// An answer without a MAC or key id is an error, not an empty proof.
	for name, out := range map[string]*kms.GenerateMacOutput{
		"no MAC":    {KeyId: aws.String("arn:aws:kms:us-east-1:000000000000:key/k")},
		"no key id": {Mac: make([]byte, 32)},
	} {
		if _, _, err := (kmsmac.MAC{API: fixedAPI{gen: out}, KeyID: "alias/k"}).Generate(ctx, []byte("m")); err == nil {
			t.Errorf("Generate with an answer with %s: no error", name)
		}
	}
	// MacValid false (KMS never answers it) is not a proof.
	if ok, err := (kmsmac.Verifier{API: fixedAPI{verify: &kms.VerifyMacOutput{MacValid: false}}}).Verify(ctx, "alias/k", []byte("m"), make([]byte, 32)); ok || err != nil {
		t.Errorf("Verify with MacValid false = %v, %v", ok, err)
	}
}

type countingAPI struct{ n *int }

func (c countingAPI) GenerateMac(context.Context, *kms.GenerateMacInput, ...func(*kms.Options)) (*kms.GenerateMacOutput, error) {
	*c.n++
	return nil, errors.New("called")
}

func (c countingAPI) VerifyMac(context.Context, *kms.VerifyMacInput, ...func(*kms.Options)) (*kms.VerifyMacOutput, error) {
	*c.n++
	return nil, errors.New("called")
}

type fixedAPI struct {
	gen    *kms.GenerateMacOutput
	verify *kms.VerifyMacOutput
}

func (f fixedAPI) GenerateMac(context.Context, *kms.GenerateMacInput, ...func(*kms.Options)) (*kms.GenerateMacOutput, error) {
	return f.gen, nil
}

func (f fixedAPI) VerifyMac(context.Context, *kms.VerifyMacInput, ...func(*kms.Options)) (*kms.VerifyMacOutput, error) {
	return f.verify, nil
}
