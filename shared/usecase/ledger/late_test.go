package ledger

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// chain returns shard's segments, oldest first.
func (r *rig) chain(shard string) []dl.Segment {
	r.t.Helper()
	var out []dl.Segment
	for key := r.state.heads[shard].SegmentKey; key != ""; {
		seg, err := dl.ParseSegment(r.objects.under(key)[key])
		if err != nil {
			r.t.Fatalf("segment %s: %v", key, err)
		}
		out = append([]dl.Segment{seg}, out...)
		key = ""
		if seg.Prev != nil {
			key = seg.Prev.Key
		}
	}
	return out
}

// The first half of a retried batch after its second half: ledgered late
// in the next segment, each entry marked, the head's last seq kept; the
// same batches again (and the whole one) add nothing.
func TestLateChangesAreLedgeredMarkedAndOnlyOnce(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	top := r.state.heads["shard-1"].LastSeq
	if resp := r.handle(batch("shard-1", recs[0:4])); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	h := r.state.heads["shard-1"]
	if h.LastSeq != top || h.Segments != 2 {
		t.Fatalf("head %+v, want last seq %s kept and 2 segments", h, top)
	}
	segs := r.chain("shard-1")
	if len(segs) != 2 || len(segs[1].Entries) != 4 {
		t.Fatalf("chain %+v", segs)
	}
	for _, e := range segs[1].Entries {
		if !e.Late {
			t.Fatalf("entry %s of the late segment not marked late", e.Seq)
		}
	}
	for _, e := range segs[0].Entries {
		if e.Late {
			t.Fatalf("entry %s of the first segment marked late", e.Seq)
		}
	}
	puts := r.objects.puts
	for _, part := range [][2]int{{0, 4}, {4, 8}, {0, 8}, {2, 6}} {
		r.handle(batch("shard-1", recs[part[0]:part[1]]))
	}
	if r.objects.puts != puts {
		t.Fatalf("%d more segments for changes already ledgered", r.objects.puts-puts)
	}
	// New changes follow, not late; the first segment names no parent
	// (shard-1 has none).
	s.write("shard-1", "src#fresh-a", 1)
	s.write("shard-1", "src#fresh-b", 1)
	r.handle(batch("shard-1", s.recs["shard-1"][8:]))
	segs = r.chain("shard-1")
	if len(segs) != 3 || len(segs[2].Entries) != 2 || segs[2].Entries[0].Late || segs[0].ParentShard != "" {
		t.Fatalf("chain %+v", segs)
	}
	r.exact(s)
}

// A late segment whose PUT applied and whose answer was lost: the retry
// meets it through the 412 and adopts it (its key sorts before the head's).
func TestALateSegmentWhoseAnswerWasLostIsAdopted(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	r.objects.afterPut = func(string) error { return errLost }
	if resp := r.handle(batch("shard-1", recs[0:4])); len(resp.BatchItemFailures) == 0 {
		t.Fatal("a lost PUT answer reported as done")
	}
	r.objects.afterPut = nil
	// The next batch (new changes) leaves the orphan alone; the retry
	// adopts it.
	r.handle(batch("shard-1", recs[0:4]))
	if h := r.state.heads["shard-1"]; h.Segments != 2 {
		t.Fatalf("head %+v, want the late segment adopted", h)
	}
	r.exact(s)
}

// A shard's first segment records its parent shard (DescribeStream).
func TestFirstSegmentNamesItsParentShard(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.many("shard-2", 4)
	r := newRig(t, "shard-1", "shard-2")
	r.handle(batch("shard-2", s.recs["shard-2"][:2]))
	r.handle(batch("shard-2", s.recs["shard-2"][2:]))
	segs := r.chain("shard-2")
	if len(segs) != 2 || segs[0].ParentShard != "shard-1" || segs[1].ParentShard != "" {
		t.Fatalf("parents %q %q, want shard-1 on the first segment only", segs[0].ParentShard, segs[1].ParentShard)
	}
	r.exact(s)
}

// A digest head rolled back behind the bucket: one run adopts every newer
// digest, writes the next, anchors the heads and reports the real lag.
func TestDigestHeadRolledBackFastForwards(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 6)
	for i := range 3 {
		r.handle(batch("shard-1", recs[2*i:2*i+2]))
		r.digest()
		r.now = r.now.Add(time.Minute)
	}
	r.state.digest = nil
	s.write("shard-1", "src#fresh-a", 1)
	s.write("shard-1", "src#fresh-b", 1)
	r.handle(batch("shard-1", s.recs["shard-1"][6:]))
	r.now = r.now.Add(30 * time.Minute)
	var logs bytes.Buffer
	r.svc.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	rep, err := r.svc.Digest(context.Background())
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"ledger digest head is behind the bucket`) {
		t.Errorf("no error logged for a digest head behind the bucket: %s", logs.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.N != 4 || !rep.Written || !rep.Adopted || rep.LagSeconds < 30*60 {
		t.Fatalf("report %+v, want digests 1..3 adopted, 4 written, lag ≥ 30 min", rep)
	}
	if h := r.state.heads["shard-1"]; !h.PendingSince.IsZero() || r.state.digest.N != 4 {
		t.Fatalf("head %+v, digest head %+v", h, r.state.digest)
	}
	r.exact(s)
}

// A failed write of a batch holding late changes retries it from its first
// change, not from the first after the head (that would drop the late
// ones): also without counters.
func TestAFailureWithLateChangesRetriesFromTheFirst(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 10)
	r.handle(batch("shard-1", recs[4:8]))
	r.objects.putErr = func(string) error { return errLost }
	resp := r.handle(batch("shard-1", recs))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != recs[0].Change.SequenceNumber {
		t.Fatalf("failures %+v, want from the first change %s", resp.BatchItemFailures, recs[0].Change.SequenceNumber)
	}
	r.objects.putErr = nil
	r.handle(batch("shard-1", recs))
	r.exact(s)
}

// A late segment written while a digest run is between reading the heads
// and marking them anchored keeps the head pending: the head's last_seq
// did not move, its segment did.
func TestALateSegmentDuringADigestStaysPending(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	r.state.afterDigest = func() error {
		r.state.afterDigest = nil
		r.handle(batch("shard-1", recs[0:4])) // late
		return nil
	}
	r.now = r.now.Add(time.Minute)
	r.digest()
	if h := r.state.heads["shard-1"]; h.PendingSince.IsZero() {
		t.Fatalf("head %+v marked anchored, but digest 1 does not hold its late segment", h)
	}
	r.now = r.now.Add(time.Minute)
	r.digestWritten(2, " for the late segment")
	if h := r.state.heads["shard-1"]; !h.PendingSince.IsZero() {
		t.Fatalf("head %+v not anchored by digest 2", h)
	}
	r.exact(s)
}
