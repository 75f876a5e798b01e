package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// DigestReport is what a digest run did.
type DigestReport struct {
	// N is the newest digest's number after the run.
	N       int64 `json:"n"`
	Written bool  `json:"written"`
	// Adopted is true when this run checked and recorded a digest another
	// (concurrent or crashed) run wrote: digest N when nothing was
	// written, or the digests the head was behind the bucket by.
	Adopted bool `json:"adopted,omitempty"`
	Shards  int  `json:"shards"`
	// LagSeconds is the anchoring lag: the longest a change waited for
	// the digest that anchors it (0 when none waited).
	LagSeconds float64 `json:"lag_seconds"`
	// Unproven counts the shard heads of the table the run could not
	// prove against the bucket (prove.go): none of them was signed.
	Unproven int `json:"unproven,omitempty"`
	// Canary is the number of the canary change this run wrote (0: none;
	// pipeline.go).
	Canary int64 `json:"canary,omitempty"`
}

// MetricAnchoringLag is the anchoring lag metric (seconds).
const MetricAnchoringLag = "LedgerAnchoringLag"

// Digest writes the next digest when a head moved since the last one or
// the last one is older than Config.DigestMaxAge (design §5). It first
// fast-forwards: digests in the bucket after the digest head's (a head
// rolled back by a restore, or a run that crashed before recording its
// digest) are checked and adopted, so the next one follows the newest.
func (s *Service) Digest(ctx context.Context) (DigestReport, error) {
	last, hasLast, err := s.State.DigestHead(ctx)
	if err != nil {
		return DigestReport{}, fmt.Errorf("read digest head: %w", err)
	}
	shards, err := s.Shards.Shards(ctx)
	if err != nil {
		return DigestReport{}, fmt.Errorf("list shards: %w", err)
	}
	heads, err := s.State.Heads(ctx, slices.Sorted(maps.Keys(shards)))
	if err != nil {
		return DigestReport{}, fmt.Errorf("read heads: %w", err)
	}
	now := s.now()
	// The lag is what the heads just read say, whatever digest is adopted.
	rep := DigestReport{N: last.N, Shards: len(shards), LagSeconds: lag(heads, now)}
	pipe := s.pipeline(ctx, heads, now) // pipeline.go: the mapping, the canary
	rep.LagSeconds, rep.Canary = max(rep.LagSeconds, pipe.lag), pipe.canaryN()
	// digesthead.go: a digest head item that names no digest of the
	// bucket is repaired from the bucket's newest signed digest.
	last, hasLast, prev, badItem, err := s.previousDigest(ctx, last, hasLast)
	if err != nil {
		if errors.Is(err, dl.ErrChainBroken) {
			s.emitUnproven(now, 1)
		}
		return rep, err
	}
	if last, hasLast, prev, err = s.fastForward(ctx, last, hasLast, prev); err != nil {
		return rep, err
	}
	rep.N, rep.Adopted = last.N, last.N != rep.N
	if rep.Adopted {
		// Another run signed newer heads after this one read them (an
		// overlapping run: schedules are delivered late, runs take up to
		// the timeout): read them again, or the heads just read would be
		// behind the adopted digest's and named unproven. Heads only move
		// forward, so a read after the anchor is fixed is not behind it.
		if heads, err = s.State.Heads(ctx, slices.Sorted(maps.Keys(shards))); err != nil {
			return rep, fmt.Errorf("read heads: %w", err)
		}
	}
	heads, unproven, err := s.proveHeads(ctx, prev, shards, heads) // prove.go: sign only what was checked
	rep.Unproven = len(unproven)
	if badItem {
		s.emitUnproven(now, len(unproven)+1) // the digest head item was not the ledger's
	} else if err == nil || len(unproven) > 0 {
		s.emitUnproven(now, len(unproven))
	}
	if err != nil {
		return rep, err
	}
	listed := shardHeads(shards, heads)
	if hasLast && slices.Equal(prev.Shards, listed) && slices.Equal(prev.Unproven, unproven) && pipe.same(prev) && now.Sub(last.At) < s.Config.DigestMaxAge {
		s.anchor(ctx, *prev, heads) // a digest adopted above, or a mark a crash left undone
		s.emitLag(now, rep.LagSeconds)
		s.emitPipeline(now, pipe)
		return rep, nil
	}
	d, raw, err := s.build(ctx, last, hasLast, listed, unproven, now, pipe)
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
	dh, err := s.recordDigest(ctx, d, raw, last.N)
	if err != nil {
		return rep, err
	}
	rep.N = d.N
	s.anchor(ctx, d, heads)
	s.log().Info("ledger digest", "n", d.N, "written", rep.Written, "adopted", rep.Adopted, "shards", len(d.Shards), "lag_seconds", rep.LagSeconds, "at", dh.At)
	s.emitLag(now, rep.LagSeconds)
	s.emitPipeline(now, pipe)
	return rep, nil
}

// recordDigest moves the digest head from prevN to d. An update whose
// answer was lost, or that a concurrent run made, is recognised by
// reading the head back.
func (s *Service) recordDigest(ctx context.Context, d dl.Digest, raw []byte, prevN int64) (DigestHead, error) {
	at, _ := time.Parse(time.RFC3339Nano, d.At)
	dh := DigestHead{N: d.N, Key: dl.DigestKey(d.N), SHA256: dl.SHA256Hex(raw), Signature: d.Signature, At: at}
	if err := s.State.PutDigestHead(ctx, dh, prevN); err != nil {
		got, ok, rerr := s.State.DigestHead(ctx)
		if rerr != nil || !ok || got.N < d.N || (got.N == d.N && got.SHA256 != dh.SHA256) {
			return dh, errors.Join(fmt.Errorf("update digest head to %d: %w", d.N, err), rerr)
		}
	}
	return dh, nil
}

// fastForward adopts, in order, every digest of the bucket after the
// digest head's that chains to it (signature and prev checked), moving
// the head along. The head being behind the bucket is logged as an error:
// a restore of the table or a direct write rolled it back (or a run
// crashed between its PUT and the head's update).
func (s *Service) fastForward(ctx context.Context, last DigestHead, hasLast bool, prev *dl.Digest) (DigestHead, bool, *dl.Digest, error) {
	after := ""
	if hasLast {
		after = last.Key
	}
	keys, err := s.Objects.List(ctx, dl.DigestPrefix, after)
	if err != nil {
		return last, hasLast, prev, fmt.Errorf("list digests: %w", err)
	}
	if len(keys) == 0 {
		return last, hasLast, prev, nil
	}
	s.log().Error("ledger digest head is behind the bucket: adopting the newer digests", "head_n", last.N, "newer", len(keys), "first", keys[0])
	for _, key := range keys {
		if key != dl.DigestKey(last.N+1) {
			return last, hasLast, prev, fmt.Errorf("%w: %s in the bucket where digest %d belongs", dl.ErrChainBroken, key, last.N+1)
		}
		d, raw, err := s.adoptDigest(ctx, last, hasLast, last.N+1)
		if err != nil {
			return last, hasLast, prev, err
		}
		dh, err := s.recordDigest(ctx, d, raw, last.N)
		if err != nil {
			return last, hasLast, prev, err
		}
		last, hasLast, prev = dh, true, &d
	}
	return last, hasLast, prev, nil
}

// shardHeads is the digest's list: every shard DescribeStream lists, with
// its parent and its head (empty when it has none yet), by shard id.
func shardHeads(shards map[string]string, heads map[string]Head) []dl.Head {
	out := []dl.Head{}
	for _, id := range slices.Sorted(maps.Keys(shards)) {
		h := heads[id]
		out = append(out, dl.Head{Shard: id, ParentShard: shards[id], LastSeq: h.LastSeq, SegmentKey: h.SegmentKey,
			SegmentSHA256: h.SegmentSHA256, Segments: h.Segments})
	}
	return out
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

// build makes and signs digest last.N+1 over heads, recording the heads
// that were not proven (proveHeads) and what the run saw of the pipeline.
func (s *Service) build(ctx context.Context, last DigestHead, hasLast bool, hs []dl.Head, unproven []dl.UnprovenHead, now time.Time, pipe pipelineSeen) (dl.Digest, []byte, error) {
	var dprev *dl.DigestPrev
	if hasLast {
		dprev = &dl.DigestPrev{Key: last.Key, SHA256: last.SHA256, Signature: last.Signature}
	}
	d := dl.NewDigest(last.N+1, now, s.Config.StreamARN, s.Signer.KeyID(), s.Signer.Algorithm(), dprev, hs)
	d.Unproven = unproven
	d.Mapping, d.Canary = pipe.mapping, pipe.canary
	d.WriterProofs, d.WriterKeys = s.Config.WriterProofs, s.Config.WriterKeys
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
	if err := s.adoptable(ctx, key); err != nil {
		return dl.Digest{}, nil, err
	}
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
// moved since.
func (s *Service) anchor(ctx context.Context, d dl.Digest, heads map[string]Head) {
	for _, dh := range d.Shards {
		h, ok := heads[dh.Shard]
		if !ok || dh.SegmentKey == "" || h.SegmentKey != dh.SegmentKey {
			continue
		}
		if h.PendingSince.IsZero() && h.AnchoredSeq == h.LastSeq {
			continue
		}
		if err := s.State.MarkAnchored(ctx, dh.Shard, h.SegmentKey, h.LastSeq); err != nil && !errors.Is(err, dl.ErrConflict) {
			// The next run marks it; the head stays pending meanwhile.
			s.log().Warn("ledger could not mark a head anchored", "shard", dh.Shard, "error", err.Error())
		}
	}
}
