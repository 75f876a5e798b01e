package ledger

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The problems of an export's own evidence (issue 25, part F): a copy
// proves its freshness only by a digest the auditor recorded elsewhere,
// and a digest names the key that signed it.
const (
	// KindExpectDigest: the digest the auditor expects (verify
	// --expect-digest N:SHA256) is not in the copy, does not hash to the
	// SHA-256 recorded, or does not verify with the public key.
	KindExpectDigest Kind = "expect-digest"
	// KindDigestKey: a digest's key_id is not the signing key verify was
	// given.
	KindDigestKey Kind = "digest-key"
)

// ExpectedDigest is a digest recorded outside the copy: its number and the
// SHA-256 (hex) of its bytes.
type ExpectedDigest struct {
	N      int64
	SHA256 string
}

// ParseExpectedDigest reads "N:SHA256" (N a digest number from 1, SHA256
// 64 hex digits, any case).
func ParseExpectedDigest(s string) (ExpectedDigest, error) {
	ns, sum, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return ExpectedDigest{}, fmt.Errorf("%q: want N:SHA256 (a digest number and the SHA-256 of its bytes, as verify and ledger export print them)", s)
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n < 1 {
		return ExpectedDigest{}, fmt.Errorf("%q: the digest number %q is not a whole number from 1", s, ns)
	}
	sum = strings.ToLower(sum)
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
		return ExpectedDigest{}, fmt.Errorf("%q: the SHA-256 %q is not 64 hex digits", s, sum)
	}
	return ExpectedDigest{N: n, SHA256: sum}, nil
}

func (e ExpectedDigest) String() string { return fmt.Sprintf("%d:%s", e.N, e.SHA256) }

// CheckExpectedDigest checks that digests (object key to bytes) hold the
// expected digest: present under its key, hashing to want.SHA256, well
// formed and signed with publicKeyDER, with every digest before it present
// (a copy with a gap below it is not the copy of the bucket that held it;
// Verify names the gap and the chain too). A newer digest is fine. It
// returns nil when all holds.
func CheckExpectedDigest(digests map[string][]byte, publicKeyDER []byte, want ExpectedDigest) *Problem {
	key := DigestKey(want.N)
	fail := func(format string, args ...any) *Problem {
		return &Problem{Kind: KindExpectDigest, Subject: key, Detail: fmt.Sprintf("--expect-digest %s: ", want) + fmt.Sprintf(format, args...)}
	}
	raw, ok := digests[key]
	if !ok {
		var have []int64
		for k, b := range digests {
			if d, err := ParseDigest(b); err == nil && k == DigestKey(d.N) {
				have = append(have, d.N)
			}
		}
		newest := "none"
		if len(have) > 0 {
			newest = fmt.Sprintf("#%d", slices.Max(have))
		}
		return fail("digest %d is not in the copy (its newest digest is %s): digests were removed from it, or it was taken before", want.N, newest)
	}
	if got := SHA256Hex(raw); got != want.SHA256 {
		return fail("digest %d hashes to %s, not the SHA-256 recorded", want.N, got)
	}
	d, err := ParseDigest(raw)
	if err != nil {
		return fail("digest %d does not parse: %v", want.N, err)
	}
	if d.N != want.N {
		return fail("the object holds digest %d", d.N)
	}
	if err := VerifyDigest(d, publicKeyDER); err != nil {
		return fail("digest %d does not verify with the public key: %v", want.N, err)
	}
	var missing []string
	for n := int64(1); n < want.N; n++ {
		if _, ok := digests[DigestKey(n)]; !ok {
			missing = append(missing, strconv.FormatInt(n, 10))
			if len(missing) == 5 {
				missing = append(missing, "…")
				break
			}
		}
	}
	if len(missing) > 0 {
		return fail("digests before it are missing from the copy (%s)", strings.Join(missing, ", "))
	}
	return nil
}

// CheckDigestKeys names every well-formed digest under its own key whose
// key_id is not keyARN, the signing key verify was given (resolved to its
// ARN by KMS). A digest whose signature verifies with that key's public
// key but names another one was not written by the ledger as it is
// configured.
func CheckDigestKeys(digests map[string][]byte, keyARN string) []Problem {
	if keyARN == "" {
		return nil
	}
	var out []Problem
	for _, key := range slices.Sorted(mapKeys(digests)) {
		d, err := ParseDigest(digests[key])
		if err != nil || key != DigestKey(d.N) {
			continue // digest-invalid (Verify)
		}
		if d.KeyID != keyARN {
			out = append(out, Problem{Kind: KindDigestKey, Subject: key,
				Detail: fmt.Sprintf("digest %d names key_id %q, not the signing key %s", d.N, d.KeyID, keyARN)})
		}
	}
	return out
}

// NewestSigned returns the highest-numbered digest of digests that is well
// formed, under its own key and verifies with publicKeyDER, and the
// SHA-256 of its bytes (ok false: none).
func NewestSigned(digests map[string][]byte, publicKeyDER []byte) (d Digest, sha string, ok bool) {
	var ns []int64
	parsed := map[int64]Digest{}
	for key, raw := range digests {
		if p, err := ParseDigest(raw); err == nil && key == DigestKey(p.N) {
			ns = append(ns, p.N)
			parsed[p.N] = p
		}
	}
	slices.Sort(ns)
	for i := len(ns) - 1; i >= 0; i-- {
		p := parsed[ns[i]]
		if VerifyDigest(p, publicKeyDER) == nil {
			return p, SHA256Hex(digests[DigestKey(p.N)]), true
		}
	}
	return Digest{}, "", false
}
