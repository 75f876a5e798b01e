package ledger_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func TestParseExpectedDigest(t *testing.T) {
	sum := strings.Repeat("aB", 32)
	e, err := ledger.ParseExpectedDigest("12:" + sum)
	if err != nil || e.N != 12 || e.SHA256 != strings.ToLower(sum) {
		t.Fatalf("%+v %v", e, err)
	}
	for _, bad := range []string{"", "12", "0:" + sum, "-1:" + sum, "x:" + sum, "12:abc", "12:" + strings.Repeat("zz", 32)} {
		if _, err := ledger.ParseExpectedDigest(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The expected digest must be in the copy, hash to what was recorded,
// verify, and have every digest before it.
func TestCheckExpectedDigest(t *testing.T) {
	f := standard(t) // digests 1 and 2
	two := ledger.ExpectedDigest{N: 2, SHA256: ledger.SHA256Hex(f.digests[ledger.DigestKey(2)])}
	if p := ledger.CheckExpectedDigest(f.digests, f.der, two); p != nil {
		t.Fatalf("the copy holds it: %v", p)
	}
	one := ledger.ExpectedDigest{N: 1, SHA256: ledger.SHA256Hex(f.digests[ledger.DigestKey(1)])}
	if p := ledger.CheckExpectedDigest(f.digests, f.der, one); p != nil {
		t.Fatalf("a newer digest is fine: %v", p)
	}
	cut := map[string][]byte{ledger.DigestKey(1): f.digests[ledger.DigestKey(1)]}
	if p := ledger.CheckExpectedDigest(cut, f.der, two); p == nil || p.Kind != ledger.KindExpectDigest || p.Subject != ledger.DigestKey(2) || !strings.Contains(p.Detail, "not in the copy (its newest digest is #1)") {
		t.Fatalf("cut short: %v", p)
	}
	if p := ledger.CheckExpectedDigest(f.digests, f.der, ledger.ExpectedDigest{N: 2, SHA256: one.SHA256}); p == nil || !strings.Contains(p.Detail, "not the SHA-256 recorded") {
		t.Fatalf("another digest 2: %v", p)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ledger.ParseDigest(f.digests[ledger.DigestKey(2)])
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.sign(d, other).Encode()
	if err != nil {
		t.Fatal(err)
	}
	resigned := map[string][]byte{ledger.DigestKey(1): f.digests[ledger.DigestKey(1)], ledger.DigestKey(2): raw}
	if p := ledger.CheckExpectedDigest(resigned, f.der, ledger.ExpectedDigest{N: 2, SHA256: ledger.SHA256Hex(raw)}); p == nil || !strings.Contains(p.Detail, "does not verify") {
		t.Fatalf("re-signed with another key: %v", p)
	}
	gap := map[string][]byte{ledger.DigestKey(2): f.digests[ledger.DigestKey(2)]}
	if p := ledger.CheckExpectedDigest(gap, f.der, two); p == nil || !strings.Contains(p.Detail, "missing from the copy (1)") {
		t.Fatalf("digest 1 gone: %v", p)
	}
}

func TestCheckDigestKeys(t *testing.T) {
	f := standard(t) // signed with key_id "key"
	if ps := ledger.CheckDigestKeys(f.digests, "key"); len(ps) != 0 {
		t.Fatalf("%v", ps)
	}
	ps := ledger.CheckDigestKeys(f.digests, "arn:aws:kms:us-east-1:1:key/other")
	if len(ps) != 2 || ps[0].Kind != ledger.KindDigestKey || ps[0].Subject != ledger.DigestKey(1) || !strings.Contains(ps[1].Detail, `digest 2 names key_id "key", not the signing key arn:aws:kms:us-east-1:1:key/other`) {
		t.Fatalf("%v", ps)
	}
}

func TestNewestSigned(t *testing.T) {
	f := standard(t)
	d, sha, ok := ledger.NewestSigned(f.digests, f.der)
	if !ok || d.N != 2 || sha != ledger.SHA256Hex(f.digests[ledger.DigestKey(2)]) {
		t.Fatalf("%d %s %v", d.N, sha, ok)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.sign(d, other).Encode()
	if err != nil {
		t.Fatal(err)
	}
	f.digests[ledger.DigestKey(2)] = raw
	if d, _, ok := ledger.NewestSigned(f.digests, f.der); !ok || d.N != 1 {
		t.Fatalf("digest 2 not signed with the key: %d %v", d.N, ok)
	}
}
