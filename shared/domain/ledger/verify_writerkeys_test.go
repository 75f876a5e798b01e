package ledger_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func TestCheckWriterKeys(t *testing.T) {
	keys := []string{"arn:aws:kms:us-east-1:1:key/i", "arn:aws:kms:us-east-1:1:key/r", "arn:aws:kms:us-east-1:1:key/s"}
	f := standard(t) // digests without writer keys nor writer proofs
	if ps, note := ledger.CheckWriterKeys(f.digests, f.der, nil); len(ps) != 0 || note != "" {
		t.Fatalf("no keys either side: %v %q", ps, note)
	}
	if ps, note := ledger.CheckWriterKeys(f.digests, f.der, keys); len(ps) != 0 || !strings.Contains(note, "records none") {
		t.Fatalf("keys given, none recorded: %v %q", ps, note)
	}
	resign := func(k *ecdsa.PrivateKey, edit func(*ledger.Digest)) {
		t.Helper()
		d, err := ledger.ParseDigest(f.digests[ledger.DigestKey(2)])
		if err != nil {
			t.Fatal(err)
		}
		edit(&d)
		raw, err := f.sign(d, k).Encode()
		if err != nil {
			t.Fatal(err)
		}
		f.digests[ledger.DigestKey(2)] = raw
	}
	resign(f.key, func(d *ledger.Digest) {
		d.WriterKeys = map[string]string{"ingest": keys[0], "redrive": keys[1], "sweeper": keys[2]}
	})
	if ps, note := ledger.CheckWriterKeys(f.digests, f.der, keys); len(ps) != 0 || note != "" {
		t.Fatalf("the recorded keys: %v %q", ps, note)
	}
	other := []string{keys[0], keys[1], "arn:aws:kms:us-east-1:1:key/mine"}
	ps, _ := ledger.CheckWriterKeys(f.digests, f.der, other)
	if len(ps) != 1 || ps[0].Kind != ledger.KindWriterKeys || ps[0].Subject != ledger.DigestKey(2) ||
		!strings.Contains(ps[0].Detail, "sweeper key arn:aws:kms:us-east-1:1:key/mine, the digest records "+keys[2]) || strings.Contains(ps[0].Detail, "ingest key") {
		t.Fatalf("another sweeper key: %v", ps)
	}
	if ps, _ := ledger.CheckWriterKeys(f.digests, f.der, nil); len(ps) != 1 || !strings.Contains(ps[0].Detail, "no writer keys were given") {
		t.Fatalf("none given, keys recorded: %v", ps)
	}
	// Writer proofs said on by an older signed digest, no keys recorded.
	resign(f.key, func(d *ledger.Digest) { d.WriterKeys, d.WriterProofs = nil, true })
	if ps, _ := ledger.CheckWriterKeys(f.digests, f.der, nil); len(ps) != 1 || ps[0].Kind != ledger.KindWriterKeys {
		t.Fatalf("none given, writer proofs on: %v", ps)
	}
	// A digest not signed with the key records nothing verify trusts.
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	resign(k, func(d *ledger.Digest) {
		d.WriterProofs, d.WriterKeys = false, map[string]string{"ingest": other[0], "redrive": other[1], "sweeper": other[2]}
	})
	if ps, note := ledger.CheckWriterKeys(f.digests, f.der, other); len(ps) != 0 || !strings.Contains(note, "(1) records none") {
		t.Fatalf("unsigned digest's keys trusted: %v %q", ps, note)
	}
}
