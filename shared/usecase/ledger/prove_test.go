package ledger

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// fiveSegments ledgers ten changes of shard-1 as five segments of two,
// with digest 1 signed after the third, and returns the heads after each
// batch.
func fiveSegments(t *testing.T) (*stream, *rig, []Head) {
	t.Helper()
	s, r, recs := oneShard(t, 10)
	var heads []Head
	for i := 0; i < 10; i += 2 {
		r.handle(batch("shard-1", recs[i:i+2]))
		heads = append(heads, r.state.heads["shard-1"])
		if i == 4 {
			r.now = r.now.Add(time.Minute)
			r.digestWritten(1, "")
		}
	}
	return s, r, heads
}

func (r *rig) parsedDigest(n int64) dl.Digest {
	r.t.Helper()
	d, err := dl.ParseDigest(r.objects.under(dl.DigestKey(n))[dl.DigestKey(n)])
	if err != nil {
		r.t.Fatalf("digest %d: %v", n, err)
	}
	return d
}

func (r *rig) setHead(h Head) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	r.state.heads[h.Shard] = h
}

// verifyBucket runs Verify over the bucket and the stream's table.
func (r *rig) verifyBucket(s *stream) dl.Result {
	r.t.Helper()
	in := dl.Input{Segments: r.objects.under(dl.SegmentPrefix), Digests: r.objects.under(dl.DigestPrefix), PublicKeyDER: r.signer.der, Now: r.now}
	for _, img := range s.table {
		it, err := dynamostore.LedgerItemFromStream(img)
		if err != nil {
			r.t.Fatal(err)
		}
		in.Items = append(in.Items, it)
	}
	return dl.Verify(in)
}

// A head item rewritten behind the ledger (rolled back behind the last
// digest, its hash zeroed, its count or last_seq changed, pointed at a
// fork) is never signed: the digest keeps digest 1's head of the shard,
// records the rejected head and why, and publishes LedgerHeadsUnproven.
func TestDigestSignsNoUnprovenHead(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tamper func(r *rig, heads []Head) Head
		reason string
	}{
		"rolled back behind the digest": {func(_ *rig, hs []Head) Head { return hs[1] }, "went backwards"},
		"hash zeroed": {func(_ *rig, hs []Head) Head {
			h := hs[4]
			h.SegmentSHA256 = strings.Repeat("0", 64)
			return h
		}, "does not hash"},
		"segments rewritten":         {func(_ *rig, hs []Head) Head { h := hs[4]; h.Segments++; return h }, "the head counts"},
		"last_seq rewritten":         {func(_ *rig, hs []Head) Head { h := hs[4]; h.LastSeq = hs[3].LastSeq; return h }, "the head ends at"},
		"last_seq behind the digest": {func(_ *rig, hs []Head) Head { h := hs[4]; h.LastSeq = hs[1].LastSeq; return h }, "went backwards"},
		"a fork": {func(r *rig, hs []Head) Head {
			// A segment after the fourth beside the real fifth, and the
			// head pointed at it.
			seg, err := dl.NewSegment(streamARN, "shard-1", &dl.Ref{Key: hs[3].SegmentKey, SHA256: hs[3].SegmentSHA256},
				[]dl.Entry{{Seq: "9" + hs[4].LastSeq[1:], Event: dl.EventInsert, At: r.now.Format(time.RFC3339Nano), Key: "src#x",
					Item: dl.Item{"dlq_id": dl.Str("src#x")}}})
			if err != nil {
				r.t.Fatal(err)
			}
			raw, _ := seg.Encode()
			key := dl.SegmentKey("shard-1", seg.FirstSeq)
			if err := r.objects.PutIfAbsent(context.Background(), key, raw, r.now.Add(time.Hour)); err != nil {
				r.t.Fatal(err)
			}
			return Head{Shard: "shard-1", LastSeq: mustPad(r.t, seg.LastSeq), SegmentKey: key, SegmentSHA256: dl.SHA256Hex(raw), Segments: 5}
		}, "a fork"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, r, heads := fiveSegments(t)
			bad := tc.tamper(r, heads)
			r.setHead(bad)
			var emf bytes.Buffer
			r.svc.Metrics = &emf
			r.now = r.now.Add(time.Minute)
			rep := r.digest()
			if !rep.Written || rep.N != 2 || rep.Unproven != 1 {
				t.Fatalf("report %+v, want digest 2 written with one unproven head", rep)
			}
			d1, d2 := r.parsedDigest(1), r.parsedDigest(2)
			if d2.Shards[0] != d1.Shards[0] {
				t.Fatalf("digest 2 signs %+v, want digest 1's %+v kept", d2.Shards[0], d1.Shards[0])
			}
			if len(d2.Unproven) != 1 || d2.Unproven[0].SegmentKey != bad.SegmentKey || d2.Unproven[0].SegmentSHA256 != bad.SegmentSHA256 ||
				d2.Unproven[0].Segments != bad.Segments || d2.Unproven[0].LastSeq != bad.LastSeq || !strings.Contains(d2.Unproven[0].Reason, tc.reason) {
				t.Fatalf("digest 2 records %+v, want the head %+v, %q", d2.Unproven, bad, tc.reason)
			}
			if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != 1.0 {
				t.Fatalf("emf %s, want %s 1", emf.String(), MetricHeadsUnproven)
			}
			// The same head again, the digest young: nothing new to sign.
			r.now = r.now.Add(5 * time.Minute)
			if rep := r.digest(); rep.Written || rep.Unproven != 1 {
				t.Fatalf("report %+v, want nothing written and the head still unproven", rep)
			}
			if name != "a fork" {
				// Verify names the rejected head the signed digest records
				// (head-unproven), and nothing else: no evidence is lost.
				if res := r.verifyBucket(s); len(res.Problems) != 1 || !res.Has(dl.KindHeadUnproven, dl.DigestKey(2)) {
					t.Fatalf("verify: %v", res.Problems)
				}
			}
			// The true head back: signed.
			r.setHead(heads[4])
			r.now = r.now.Add(time.Minute)
			rep = r.digest()
			if name == "a fork" {
				// Both branches follow the fourth segment: neither is signed.
				d3 := r.parsedDigest(3)
				if rep.Unproven != 1 || d3.Shards[0] != d1.Shards[0] || d3.Unproven[0].SegmentKey != heads[4].SegmentKey || !strings.Contains(d3.Unproven[0].Reason, "a fork") {
					t.Fatalf("report %+v, digest 3 %+v: a head on a forked chain must stay unproven", rep, d3)
				}
				return
			}
			if d3 := r.parsedDigest(3); !rep.Written || rep.Unproven != 0 || d3.Shards[0].SegmentKey != heads[4].SegmentKey || d3.Unproven != nil {
				t.Fatalf("report %+v, digest 3 %+v: want the true head signed", rep, d3)
			}
		})
	}
}

func mustPad(t testing.TB, seq string) string {
	t.Helper()
	p, err := dl.PadSeq(seq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A run out of time signs no head it has not walked: the shard keeps the
// previous digest's head, "not reached in time", and the next run
// proves and signs it.
func TestDigestRunOutOfTimeKeepsThePreviousHead(t *testing.T) {
	t.Parallel()
	_, r, heads := fiveSegments(t)
	r.svc = r.service("shard-1") // cold: nothing cached
	r.now = r.now.Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Second)) // less than proveReserve
	defer cancel()
	rep, err := r.svc.Digest(ctx)
	if err != nil || !rep.Written || rep.Unproven != 1 {
		t.Fatalf("report %+v, %v: want digest 2 with the head unproven", rep, err)
	}
	d1, d2 := r.parsedDigest(1), r.parsedDigest(2)
	if d2.Shards[0] != d1.Shards[0] || len(d2.Unproven) != 1 || d2.Unproven[0].Reason != dl.ReasonNotReached {
		t.Fatalf("digest 2 %+v / %+v, want digest 1's head kept, not reached in time", d2.Shards, d2.Unproven)
	}
	r.now = r.now.Add(5 * time.Minute)
	if rep := r.digest(); !rep.Written || rep.Unproven != 0 || r.parsedDigest(3).Shards[0].SegmentKey != heads[4].SegmentKey {
		t.Fatalf("report %+v, want the head signed by the next run", rep)
	}
}

// The previous digest's head gone from the bucket: the run signs nothing
// (a broken chain), and says so in the metric.
func TestDigestRefusesWhenTheSignedHeadIsGone(t *testing.T) {
	t.Parallel()
	_, r, heads := fiveSegments(t)
	r.svc = r.service("shard-1")
	var emf bytes.Buffer
	r.svc.Metrics = &emf
	r.objects.mu.Lock()
	delete(r.objects.objs, heads[2].SegmentKey)
	r.objects.mu.Unlock()
	r.now = r.now.Add(time.Minute)
	if _, err := r.svc.Digest(context.Background()); !errors.Is(err, dl.ErrChainBroken) {
		t.Fatalf("Digest: %v, want a broken chain", err)
	}
	if _, ok := r.objects.under(dl.DigestKey(2))[dl.DigestKey(2)]; ok {
		t.Fatal("digest 2 written over a signed head that is not in the bucket")
	}
	if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != 1.0 {
		t.Fatalf("emf %s, want %s 1", emf.String(), MetricHeadsUnproven)
	}
}
