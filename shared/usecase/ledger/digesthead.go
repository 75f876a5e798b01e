package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// previousDigest reads the digest the digest head item names (last; none
// when !hasLast). Any function role can write the item: when it names a
// digest the bucket does not hold, or one whose bytes or number are not
// the item's, the item is not trusted. The digest run then goes on from
// the newest digest of the bucket whose signature verifies and that
// chains to the digest before it (as signedAnchor does), logs the item as
// tampering, and rewrites the item to it; repaired is true. A bucket read
// that fails fails the run (retried). With no signed digest in the bucket
// to go on from, the chain is broken.
func (s *Service) previousDigest(ctx context.Context, last DigestHead, hasLast bool) (_ DigestHead, _ bool, _ *dl.Digest, repaired bool, _ error) {
	if !hasLast {
		return last, false, nil, false, nil
	}
	raw, err := s.Objects.Get(ctx, last.Key)
	if err != nil && !errors.Is(err, dl.ErrNotFound) {
		return last, hasLast, nil, false, fmt.Errorf("read digest %s: %w", last.Key, err)
	}
	var why string
	if err == nil {
		d, perr := dl.ParseDigest(raw)
		if perr == nil && d.N == last.N && dl.SHA256Hex(raw) == last.SHA256 && last.Key == dl.DigestKey(d.N) {
			return last, true, &d, false, nil
		}
		why = "it is not the digest the item names"
	} else {
		why = "the bucket does not hold it"
	}
	dh, d, err := s.newestSignedDigest(ctx)
	if err != nil {
		return last, hasLast, nil, false, err
	}
	if d == nil {
		return last, hasLast, nil, false, fmt.Errorf("%w: the digest head names %s (%s), and the bucket holds no signed digest to go on from",
			dl.ErrChainBroken, capped(last.Key), why)
	}
	s.log().Error("ledger digest head item does not name a digest of the bucket (a write to the table): going on from the bucket's newest signed digest",
		"item_n", last.N, "item_key", capped(last.Key), "reason", why, "digest", dh.Key)
	if err := s.State.PutDigestHead(ctx, dh, last.N); err != nil {
		return last, hasLast, nil, false, fmt.Errorf("repair digest head to %d: %w", dh.N, err)
	}
	return dh, true, d, true, nil
}

// newestSignedDigest is the newest digest of the bucket under its own key
// whose signature verifies and whose prev is the digest before it in the
// bucket (nil when there is none).
func (s *Service) newestSignedDigest(ctx context.Context) (DigestHead, *dl.Digest, error) {
	keys, err := s.Objects.List(ctx, dl.DigestPrefix, "")
	if err != nil {
		return DigestHead{}, nil, fmt.Errorf("list digests: %w", err)
	}
	pub, err := s.publicKey(ctx)
	if err != nil {
		return DigestHead{}, nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		raw, err := s.Objects.Get(ctx, keys[i])
		if err != nil {
			return DigestHead{}, nil, fmt.Errorf("read digest %s: %w", keys[i], err)
		}
		d, err := dl.ParseDigest(raw)
		if err != nil || dl.DigestKey(d.N) != keys[i] || dl.VerifyDigest(d, pub) != nil {
			s.log().Warn("ledger found a digest that does not verify", "key", keys[i])
			continue
		}
		if d.Prev != nil {
			praw, err := s.Objects.Get(ctx, d.Prev.Key)
			if err != nil && !errors.Is(err, dl.ErrNotFound) {
				return DigestHead{}, nil, fmt.Errorf("read digest %s: %w", d.Prev.Key, err)
			}
			if err != nil || d.Prev.Key != dl.DigestKey(d.N-1) || dl.SHA256Hex(praw) != d.Prev.SHA256 {
				s.log().Warn("ledger found a digest that does not chain to the one before it", "key", keys[i])
				continue
			}
		}
		at, _ := time.Parse(time.RFC3339Nano, d.At)
		return DigestHead{N: d.N, Key: keys[i], SHA256: dl.SHA256Hex(raw), Signature: d.Signature, At: at}, &d, nil
	}
	return DigestHead{}, nil, nil
}
