package ledger

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// KindWriterKeys (issue 25 review): the writer keys verify was given are
// not those the newest signed digest records, or none were given though
// the signed digests say writer proofs are on. The keys come from mutable
// configuration (the stack's outputs, a flag); the digests record those
// the ledger function was deployed with, under the signing key.
const KindWriterKeys Kind = "writer-keys"

// CheckWriterKeys compares the writer keys verify was given (keyARNs, one
// per writerproof.Roles, in their order; nil: none given) with those the
// newest signed digest of digests records. It returns the problems and a
// note (the digests record no writer keys: the given ones were trusted as
// given). A digest counts as signed when it is well formed, under its own
// key and verifies with publicKeyDER.
func CheckWriterKeys(digests map[string][]byte, publicKeyDER []byte, keyARNs []string) ([]Problem, string) {
	newest, _, ok := NewestSigned(digests, publicKeyDER)
	if !ok {
		return nil, ""
	}
	subject := DigestKey(newest.N)
	if keyARNs == nil {
		proofsOn := newest.WriterProofs
		for key, raw := range digests {
			if d, err := ParseDigest(raw); err == nil && d.WriterProofs && key == DigestKey(d.N) && VerifyDigest(d, publicKeyDER) == nil {
				proofsOn = true
			}
		}
		if !proofsOn && len(newest.WriterKeys) == 0 {
			return nil, ""
		}
		return []Problem{{Kind: KindWriterKeys, Subject: subject,
			Detail: fmt.Sprintf("the signed digests say writer proofs are on (digest %d records writer keys %s) and no writer keys were given: writer proofs are not checked, so a version written by hand with a valid seal goes unnamed", newest.N, describeWriterKeys(newest.WriterKeys))}}, ""
	}
	if len(newest.WriterKeys) == 0 {
		return nil, fmt.Sprintf("writer keys: the newest signed digest (%d) records none (a ledger deployed before digests recorded them): the writer keys given are trusted as given", newest.N)
	}
	var diffs []string
	for i, r := range writerproof.Roles {
		given := ""
		if i < len(keyARNs) {
			given = keyARNs[i]
		}
		if rec := newest.WriterKeys[string(r)]; rec != given {
			diffs = append(diffs, fmt.Sprintf("%s key %s, the digest records %s", r, given, cmpOrNone(rec)))
		}
	}
	for r := range newest.WriterKeys {
		if !writerproof.Role(r).Valid() {
			diffs = append(diffs, fmt.Sprintf("the digest records a key for %q, not a writing role", r))
		}
	}
	if len(diffs) == 0 {
		return nil, ""
	}
	slices.Sort(diffs)
	return []Problem{{Kind: KindWriterKeys, Subject: subject,
		Detail: fmt.Sprintf("the writer keys given are not those signed digest %d records (%s): the configuration names keys the ledger was not deployed with", newest.N, strings.Join(diffs, "; "))}}, ""
}

func describeWriterKeys(keys map[string]string) string {
	if len(keys) == 0 {
		return "none"
	}
	var parts []string
	for _, r := range slices.Sorted(mapKeys(keys)) {
		parts = append(parts, r+"="+keys[r])
	}
	return strings.Join(parts, ",")
}

func cmpOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
