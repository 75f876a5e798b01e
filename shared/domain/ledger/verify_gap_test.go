package ledger_test

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A digest numbered far beyond the others (a tampered copy) is one
// digest-gap problem for the whole run of missing numbers: verify never
// counts up to it.
func TestVerifyNamesAHugeDigestGapOnce(t *testing.T) {
	t.Parallel()
	f := standard(t)
	d := *f.last
	d.N, d.Signature = 100_000_000_000, ""
	d = f.sign(d, f.key)
	raw, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f.digests[ledger.DigestKey(d.N)] = raw
	res := ledger.Verify(f.input())
	gaps := 0
	for _, p := range res.Problems {
		if p.Kind == ledger.KindDigestGap {
			gaps++
		}
	}
	if gaps != 1 || !res.Has(ledger.KindDigestGap, ledger.DigestKey(f.last.N+1)) {
		t.Fatalf("%d gaps: %v", gaps, res.Problems)
	}
}
