package ledger_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func sortStrings(s []string) { slices.Sort(s) }

func TestPadSeqAndSeqLess(t *testing.T) {
	t.Parallel()
	p, err := ledger.PadSeq("123456789012345678901")
	if err != nil || p != "0000000000000000000123456789012345678901" {
		t.Fatalf("PadSeq = %q, %v", p, err)
	}
	for _, bad := range []string{"", "12a", "-1", "12345678901234567890123456789012345678901"} {
		if _, err := ledger.PadSeq(bad); err == nil {
			t.Errorf("PadSeq(%q) accepted", bad)
		}
	}
	cases := []struct {
		a, b string
		less bool
	}{
		{"9", "10", true}, {"10", "9", false}, {"100", "100", false},
		{"999999999999999999999", "1000000000000000000000", true},
		{"0000000000000000000000000000000000000009", "10", true},
	}
	for _, c := range cases {
		if got := ledger.SeqLess(c.a, c.b); got != c.less {
			t.Errorf("SeqLess(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestItemCanonicalBytes(t *testing.T) {
	t.Parallel()
	a := ledger.Item{"k": ledger.Str("x"), "n": ledger.Num("1"), "ss": ledger.StrSet("b", "a"), "ns": ledger.NumSet("10", "9"),
		"bs": ledger.BinSet([]byte{2}, []byte{1}), "m": ledger.Map(nil), "l": ledger.List(), "b": ledger.Bin([]byte("hi")),
		"t": ledger.Bool(true), "z": ledger.Null(), "deep": ledger.Map(map[string]ledger.Value{"l": ledger.List(ledger.Str("é"), ledger.Num("2"))})}
	ca, err := a.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":{"B":"aGk="},"bs":{"BS":["AQ==","Ag=="]},"deep":{"M":{"l":{"L":[{"S":"é"},{"N":"2"}]}}},"k":{"S":"x"},"l":{"L":[]},"m":{"M":{}},"n":{"N":"1"},"ns":{"NS":["10","9"]},"ss":{"SS":["a","b"]},"t":{"BOOL":true},"z":{"NULL":true}}`
	if string(ca) != want {
		t.Fatalf("canonical\n got %s\nwant %s", ca, want)
	}
	back, err := ledger.ParseItem(ca)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := back.Canonical()
	if string(cb) != want {
		t.Fatalf("round trip %s", cb)
	}
	for _, bad := range []string{`{"k":{}}`, `{"k":{"S":"a","N":"1"}}`, `{"k":{"X":1}}`, `{"k":{"N":"one"}}`, `{"k":{"NULL":false}}`, `[]`, `null`, `{"k":{"S":null}}`} {
		if _, err := ledger.ParseItem([]byte(bad)); err == nil {
			t.Errorf("ParseItem(%s) accepted", bad)
		}
	}
	if _, err := (ledger.Item{"k": {}}).Canonical(); err == nil {
		t.Error("an empty value encoded")
	}
}

func TestSegmentRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	f := standard(t)
	for key, raw := range f.segs {
		s, err := ledger.ParseSegment(raw)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := s.Encode()
		if string(again) != string(raw) || key != ledger.SegmentKey(s.Shard, s.FirstSeq) {
			t.Fatalf("segment %s does not round-trip", key)
		}
	}
	e := ledger.Entry{Seq: "200000000000000000000", Event: ledger.EventInsert, At: t0.Format("2006-01-02T15:04:05Z07:00"), Key: "src#a", Item: record("src#a", 1, "OPEN")}
	if _, err := ledger.NewSegment(arn, "s", nil, []ledger.Entry{e, e}); err == nil {
		t.Error("a segment with one entry twice was built")
	}
	if _, err := ledger.NewSegment(arn, "s", nil, nil); err == nil {
		t.Error("an empty segment was built")
	}
	bad := e
	bad.Item = nil
	if _, err := ledger.NewSegment(arn, "s", nil, []ledger.Entry{bad}); err == nil {
		t.Error("an INSERT without its image was built")
	}
	for _, raw := range []string{`{}`, `{"format":"dlqq-ledger-segment/1","shard":"s","first_seq":"1","last_seq":"1","entries":[]}`, `{"format":"x"}`, `{"format":"dlqq-ledger-segment/1","extra":1}`} {
		if _, err := ledger.ParseSegment([]byte(raw)); err == nil {
			t.Errorf("ParseSegment(%s) accepted", raw)
		}
	}
}

func TestVerifySignatureRSAPSS(t *testing.T) {
	t.Parallel()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	h := sha256.Sum256([]byte("digest"))
	sig, err := rsa.SignPSS(rand.Reader, k, crypto.SHA256, h[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.VerifySignature(ledger.AlgRSAPSS, der, h, sig); err != nil {
		t.Fatal(err)
	}
	h[0] ^= 1
	if err := ledger.VerifySignature(ledger.AlgRSAPSS, der, h, sig); !errors.Is(err, ledger.ErrBadSignature) {
		t.Fatalf("a changed hash: %v", err)
	}
	if err := ledger.VerifySignature(ledger.AlgECDSA, der, h, sig); err == nil {
		t.Fatal("an RSA key verified as ECDSA")
	}
	if err := ledger.VerifySignature("NONE", der, h, sig); err == nil {
		t.Fatal("an unknown algorithm verified")
	}
}

// The hand-written canonical form is RFC 8785's (gowebpki/jcs over
// encoding/json), for awkward strings and names too.
func TestItemCanonicalIsJCS(t *testing.T) {
	t.Parallel()
	odd := []string{"", "a\"b\\c", "\x00\x1f\x7f", "\b\f\n\r\t", "é€", "\U0001F600", "\uffff", "\xff\xfe", "<>&\u2028"}
	it := ledger.Item{}
	for i, s := range odd {
		it[s] = ledger.Str(s)
		it[fmt.Sprintf("l%d", i)] = ledger.List(ledger.StrSet(s, "z"), ledger.Map(map[string]ledger.Value{s: ledger.Num("1")}))
	}
	checkJCS(t, it)
}

func checkJCS(t *testing.T, it ledger.Item) {
	t.Helper()
	got, err := it.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical\n got %q\nwant %q", got, want)
	}
}
