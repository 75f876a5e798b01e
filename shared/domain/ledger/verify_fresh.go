package ledger

import "time"

// DefaultMaxDigestAge is Input.MaxDigestAge when it is zero: the design's
// DIGEST_MAX_AGE (55m), plus the 5-minute schedule, plus a margin.
const DefaultMaxDigestAge = 75 * time.Minute

// fresh names a signed digest that is not after its predecessor, and a
// newest signed digest older than Input.MaxDigestAge (a ledger copy cut
// short, or a digest function that stopped).
func (v *verifier) fresh(signed []*parsedDigest) {
	var prevAt time.Time
	var newest *parsedDigest
	var newestAt time.Time
	for _, p := range signed {
		at, err := time.Parse(time.RFC3339Nano, p.d.At)
		if err != nil {
			v.fail(KindDigestInvalid, p.key, "at %q: not RFC 3339", p.d.At)
			continue
		}
		if !prevAt.IsZero() && !at.After(prevAt) {
			v.fail(KindDigestChain, p.key, "signed at %s, not after the digest before it (%s)", p.d.At, prevAt.Format(time.RFC3339Nano))
		}
		prevAt, newest, newestAt = at, p, at
	}
	maxAge := v.in.MaxDigestAge
	if maxAge == 0 {
		maxAge = DefaultMaxDigestAge
	}
	if maxAge < 0 {
		return
	}
	switch {
	case newest != nil:
		if age := v.in.Now.Sub(newestAt); age > maxAge {
			v.fail(KindDigestStale, newest.key, "the newest signed digest (#%d) is %s old, more than %s", newest.d.N, age.Round(time.Second), maxAge)
		}
	case v.res.Unanchored > 0 && v.res.OldestUnanchored > maxAge:
		v.fail(KindDigestStale, DigestPrefix, "no signed digest; the oldest change is %s old, more than %s", v.res.OldestUnanchored.Round(time.Second), maxAge)
	}
}
