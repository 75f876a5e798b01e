package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// DigestReport is what a digest run did.
type DigestReport struct {
	// N is the newest digest's number after the run.
	N       int64 `json:"n"`
	Written bool  `json:"written"`
	// Adopted is true when a concurrent or crashed run had written digest
	// N: this run checked and recorded it instead of writing its own.
	Adopted bool `json:"adopted,omitempty"`
	Shards  int  `json:"shards"`
	// LagSeconds is the anchoring lag: the longest a change waited for
	// the digest that anchors it (0 when none waited).
	LagSeconds float64 `json:"lag_seconds"`
}

// MetricAnchoringLag is the anchoring lag metric (seconds).
const MetricAnchoringLag = "LedgerAnchoringLag"

// Digest writes the next digest when a head moved since the last one or
// the last one is older than Config.DigestMaxAge (design §5).
func (s *Service) Digest(ctx context.Context) (DigestReport, error) {
	last, hasLast, err := s.State.DigestHead(ctx)
	if err != nil {
		return DigestReport{}, fmt.Errorf("read digest head: %w", err)
	}
	shardIDs, err := s.Shards.Shards(ctx)
	if err != nil {
		return DigestReport{}, fmt.Errorf("list shards: %w", err)
	}
	heads, err := s.State.Heads(ctx, shardIDs)
	if err != nil {
		return DigestReport{}, fmt.Errorf("read heads: %w", err)
	}
	now := s.now()
	rep := DigestReport{N: last.N, Shards: len(heads)}
	var prev *dl.Digest
	if hasLast {
		raw, err := s.Objects.Get(ctx, last.Key)
		if err != nil {
			return rep, fmt.Errorf("read digest %s: %w", last.Key, err)
		}
		d, err := dl.ParseDigest(raw)
		if err != nil || d.N != last.N || dl.SHA256Hex(raw) != last.SHA256 {
			return rep, fmt.Errorf("%w: digest %s is not the one the digest head names", dl.ErrChainBroken, last.Key)
		}
		prev = &d
	}
	if hasLast && !moved(prev, heads) && now.Sub(last.At) < s.Config.DigestMaxAge {
		rep.LagSeconds = lag(heads, now)
		s.emitLag(now, rep.LagSeconds)
		return rep, nil
	}
	d, raw, err := s.build(ctx, last, hasLast, heads, now)
	if err != nil {
		return rep, err
	}
	err = s.Objects.PutIfAbsent(ctx, dl.DigestKey(d.N), raw, now.Add(s.Config.Retention))
	if errors.Is(err, dl.ErrExists) {
		if d, raw, err = s.adoptDigest(ctx, last, hasLast, d.N); err != nil {
			return rep, err
		}
		rep.Adopted = true
	} else if err != nil {
		return rep, fmt.Errorf("put digest %d: %w", d.N, err)
	} else {
		rep.Written = true
	}
	at, _ := time.Parse(time.RFC3339Nano, d.At)
	dh := DigestHead{N: d.N, Key: dl.DigestKey(d.N), SHA256: dl.SHA256Hex(raw), Signature: d.Signature, At: at}
	if err := s.State.PutDigestHead(ctx, dh, last.N); err != nil {
		got, ok, rerr := s.State.DigestHead(ctx)
		if rerr != nil || !ok || got.N < d.N || (got.N == d.N && got.SHA256 != dh.SHA256) {
			return rep, errors.Join(fmt.Errorf("update digest head to %d: %w", d.N, err), rerr)
		}
	}
	rep.N = d.N
	rep.LagSeconds = s.anchor(ctx, d, heads, at)
	s.log().Info("ledger digest", "n", d.N, "written", rep.Written, "adopted", rep.Adopted, "shards", len(d.Shards), "lag_seconds", rep.LagSeconds)
	s.emitLag(now, rep.LagSeconds)
	return rep, nil
}

// moved reports whether a head differs from what the previous digest says.
func moved(prev *dl.Digest, heads map[string]Head) bool {
	was := map[string]dl.Head{}
	for _, h := range prev.Shards {
		was[h.Shard] = h
	}
	for id, h := range heads {
		w, ok := was[id]
		if !ok || w.SegmentKey != h.SegmentKey || w.SegmentSHA256 != h.SegmentSHA256 {
			return true
		}
	}
	return false
}

// lag is the longest a change still pending has waited, at now.
func lag(heads map[string]Head, now time.Time) float64 {
	var l float64
	for _, h := range heads {
		if !h.PendingSince.IsZero() {
			l = max(l, now.Sub(h.PendingSince).Seconds())
		}
	}
	return l
}

// build makes and signs digest last.N+1 over heads.
func (s *Service) build(ctx context.Context, last DigestHead, hasLast bool, heads map[string]Head, now time.Time) (dl.Digest, []byte, error) {
	var dprev *dl.DigestPrev
	if hasLast {
		dprev = &dl.DigestPrev{Key: last.Key, SHA256: last.SHA256, Signature: last.Signature}
	}
	var hs []dl.Head
	for _, id := range slices.Sorted(mapKeys(heads)) {
		h := heads[id]
		hs = append(hs, dl.Head{Shard: id, LastSeq: h.LastSeq, SegmentKey: h.SegmentKey, SegmentSHA256: h.SegmentSHA256, Segments: h.Segments})
	}
	d := dl.NewDigest(last.N+1, now, s.Config.StreamARN, s.Signer.KeyID(), s.Signer.Algorithm(), dprev, hs)
	var err error
	if d.Baseline, err = s.baselineRef(ctx, last, hasLast); err != nil { // baseline.go
		return d, nil, err
	}
	hash, err := d.SigningHash()
	if err != nil {
		return d, nil, err
	}
	sig, err := s.Signer.Sign(ctx, hash)
	if err != nil {
		return d, nil, fmt.Errorf("sign digest %d: %w", d.N, err)
	}
	d.Signature = base64.StdEncoding.EncodeToString(sig)
	raw, err := d.Encode()
	return d, raw, err
}

// adoptDigest reads digest n that another run wrote and checks that it is
// ours: signed by the key and chained to the digest head.
func (s *Service) adoptDigest(ctx context.Context, last DigestHead, hasLast bool, n int64) (dl.Digest, []byte, error) {
	key := dl.DigestKey(n)
	raw, err := s.Objects.Get(ctx, key)
	if err != nil {
		return dl.Digest{}, nil, fmt.Errorf("read digest %s: %w", key, err)
	}
	d, err := dl.ParseDigest(raw)
	if err != nil {
		return d, nil, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
	}
	pub, err := s.Signer.PublicKey(ctx)
	if err != nil {
		return d, nil, fmt.Errorf("public key: %w", err)
	}
	if err := dl.VerifyDigest(d, pub); err != nil {
		return d, nil, fmt.Errorf("%w: %s: %v", dl.ErrChainBroken, key, err)
	}
	want := dl.DigestPrev{Key: last.Key, SHA256: last.SHA256, Signature: last.Signature}
	if d.N != n || hasLast != (d.Prev != nil) || (d.Prev != nil && *d.Prev != want) {
		return d, nil, fmt.Errorf("%w: %s does not follow digest %d", dl.ErrChainBroken, key, last.N)
	}
	s.log().Warn("ledger adopted a digest another run wrote", "n", n)
	return d, raw, nil
}

// anchor marks the heads d covers as anchored, each only if it has not
// moved since, and returns the anchoring lag at at.
func (s *Service) anchor(ctx context.Context, d dl.Digest, heads map[string]Head, at time.Time) float64 {
	var l float64
	for _, dh := range d.Shards {
		h, ok := heads[dh.Shard]
		if !ok || h.SegmentKey != dh.SegmentKey {
			continue
		}
		if !h.PendingSince.IsZero() {
			l = max(l, at.Sub(h.PendingSince).Seconds())
		}
		if h.PendingSince.IsZero() && h.AnchoredSeq == h.LastSeq {
			continue
		}
		if err := s.State.MarkAnchored(ctx, dh.Shard, h.LastSeq); err != nil && !errors.Is(err, dl.ErrConflict) {
			// The next run marks it; the head stays pending meanwhile.
			s.log().Warn("ledger could not mark a head anchored", "shard", dh.Shard, "error", err.Error())
		}
	}
	return l
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
