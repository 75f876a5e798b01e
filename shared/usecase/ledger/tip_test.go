package ledger

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A head item rewritten behind the ledger never makes the stream handler
// fork or write after a point that is not the chain's tip: it rebuilds
// the head from the bucket (from digest 1's head, following the chain),
// rewrites the head item, publishes LedgerHeadsUnproven, and ledgers the
// next batch after the true tip, in a process that remembers the head it
// wrote (warm) and in a new one (cold).
func TestStreamRebuildsAnUnprovenHead(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(hs []Head) (Head, bool){
		"rolled back behind the digest": func(hs []Head) (Head, bool) { return hs[1], true },
		"rolled back after the digest":  func(hs []Head) (Head, bool) { h := hs[3]; h.Segments = hs[2].Segments; return h, true },
		"hash zeroed":                   func(hs []Head) (Head, bool) { h := hs[4]; h.SegmentSHA256 = strings.Repeat("0", 64); return h, true },
		"segments rewritten":            func(hs []Head) (Head, bool) { h := hs[4]; h.Segments = 9; return h, true },
		"last_seq rewritten":            func(hs []Head) (Head, bool) { h := hs[4]; h.LastSeq = hs[2].LastSeq; return h, true },
		"deleted":                       func(hs []Head) (Head, bool) { return Head{}, false },
	} {
		for _, cold := range []bool{false, true} {
			t.Run(name+map[bool]string{false: " warm", true: " cold"}[cold], func(t *testing.T) {
				t.Parallel()
				s, r, heads := fiveSegments(t)
				if cold {
					r.svc = r.service("shard-1")
				}
				var emf bytes.Buffer
				r.svc.Metrics = &emf
				if bad, ok := tamper(heads); ok {
					r.setHead(bad)
				} else {
					r.state.mu.Lock()
					delete(r.state.heads, "shard-1")
					r.state.mu.Unlock()
				}
				s.write("shard-1", "src#after-1", 1)
				s.write("shard-1", "src#after-2", 1)
				recs := s.recs["shard-1"]
				r.handle(batch("shard-1", recs[10:]))
				h := r.state.heads["shard-1"]
				if c := r.chain("shard-1"); h.Segments != 6 || len(c) != 6 || dl.SegmentKey("shard-1", c[4].FirstSeq) != heads[4].SegmentKey {
					t.Fatalf("head %+v, want the sixth segment after the true fifth", h)
				}
				r.exact(s)
				if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != 1.0 {
					t.Fatalf("emf %s, want %s 1", emf.String(), MetricHeadsUnproven)
				}
			})
		}
	}
}

// A head rolled back along its own chain past a late segment (whose key
// sorts below the chain's end, so the listing after the head misses it):
// the handler finds the segment that already follows the head and writes
// after it, not beside it.
func TestStreamDoesNotForkBesideALateSegment(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	first := r.state.heads["shard-1"]
	r.handle(batch("shard-1", recs[0:4])) // late: the chain's second segment
	r.afterTheLateSegment(t, s, first)
}

// afterTheLateSegment checks that shard-1's head is the late segment (the
// chain's second), rolls the head back to first, and checks that the next
// batch is written after the late segment, not beside it.
func (r *rig) afterTheLateSegment(t *testing.T, s *stream, first Head) {
	t.Helper()
	if r.state.heads["shard-1"].Segments != 2 {
		t.Fatalf("head %+v, want the late segment", r.state.heads["shard-1"])
	}
	r.setHead(first)
	s.write("shard-1", "src#after", 1)
	r.handle(batch("shard-1", s.recs["shard-1"][8:]))
	if h := r.state.heads["shard-1"]; h.Segments != 3 {
		t.Fatalf("head %+v, want a third segment after the late one", h)
	}
	r.exact(s)
}

// A head item pointed at a fork the bucket holds (a segment beside the
// real fifth, after the fourth): the batch fails as a broken chain and
// nothing is written.
func TestStreamRefusesAForkedHead(t *testing.T) {
	t.Parallel()
	s, r, heads := fiveSegments(t)
	seg, err := dl.NewSegment(streamARN, "shard-1", &dl.Ref{Key: heads[3].SegmentKey, SHA256: heads[3].SegmentSHA256},
		[]dl.Entry{{Seq: "9" + heads[4].LastSeq[1:], Event: dl.EventInsert, At: r.now.Format(time.RFC3339Nano), Key: "src#x",
			Item: dl.Item{"dlq_id": dl.Str("src#x")}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := seg.Encode()
	key := dl.SegmentKey("shard-1", seg.FirstSeq)
	if err := r.objects.PutIfAbsent(context.Background(), key, raw, r.now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	r.setHead(Head{Shard: "shard-1", LastSeq: mustPad(t, seg.LastSeq), SegmentKey: key, SegmentSHA256: dl.SHA256Hex(raw), Segments: 5})
	puts := r.objects.puts
	s.write("shard-1", "src#after", 1)
	for _, svc := range []*Service{r.svc, r.service("shard-1")} {
		if _, err := svc.HandleStream(context.Background(), batch("shard-1", s.recs["shard-1"][10:])); !errors.Is(err, dl.ErrChainBroken) {
			t.Fatalf("HandleStream: %v, want a broken chain", err)
		}
	}
	if r.objects.puts != puts {
		t.Fatalf("%d objects written after a forked head", r.objects.puts-puts)
	}
}

// A late segment whose PUT applied and whose answer was lost, retried
// split differently (Lambda bisects a failing batch): the retry's key is
// not the orphan's, and the orphan sorts below the head, but the proof
// finds it following the head and adopts it; nothing is ledgered twice
// and nothing forks.
func TestALateOrphanIsAdoptedWhenTheRetryIsSplitDifferently(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	r.objects.afterPut = func(string) error { return errLost }
	if resp := r.handle(batch("shard-1", recs[0:4])); len(resp.BatchItemFailures) == 0 {
		t.Fatal("a lost PUT answer reported as done")
	}
	r.objects.afterPut = nil
	puts := r.objects.puts
	r.handle(batch("shard-1", recs[2:4]))
	r.handle(batch("shard-1", recs[0:2]))
	if h := r.state.heads["shard-1"]; h.Segments != 2 || r.objects.puts != puts {
		t.Fatalf("head %+v, %d more segments: want the orphan adopted and nothing written", h, r.objects.puts-puts)
	}
	r.exact(s)
}
