package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A segment an earlier try wrote, whose key now holds a second version or
// a delete marker, is not adopted: the batch fails as a broken chain and
// the head stays.
func TestSegmentWithMoreThanOneVersionIsNotAdopted(t *testing.T) {
	t.Parallel()
	for _, marker := range []bool{false, true} {
		_, r, recs := oneShard(t, 4)
		crashed := false
		r.state.failAdvance = func() error {
			if crashed {
				return nil
			}
			crashed = true
			return errors.New("the process died")
		}
		if resp := r.handle(batch("shard-1", recs)); len(resp.BatchItemFailures) != 1 {
			t.Fatalf("failures %+v, want the batch failed after its PUT", resp.BatchItemFailures)
		}
		keys := r.objects.under(dl.SegmentPrefix)
		if len(keys) != 1 {
			t.Fatalf("segments %v", keys)
		}
		for key := range keys {
			r.objects.addVersion(key, marker)
		}
		_, err := r.service("shard-1").HandleStream(context.Background(), batch("shard-1", recs))
		if !errors.Is(err, dl.ErrChainBroken) || !strings.Contains(err.Error(), "not adopted") {
			t.Fatalf("marker %v: HandleStream: %v, want a broken chain naming the versions", marker, err)
		}
		if _, ok := r.state.heads["shard-1"]; ok {
			t.Fatalf("marker %v: head %+v moved to a segment with two versions", marker, r.state.heads["shard-1"])
		}
	}
}

// A digest a crashed run wrote, whose key holds a second version or a
// delete marker, is not adopted (nor after a 412).
func TestDigestWithMoreThanOneVersionIsNotAdopted(t *testing.T) {
	t.Parallel()
	for _, marker := range []bool{false, true} {
		_, r, recs := oneShard(t, 4)
		r.handle(batch("shard-1", recs))
		r.state.failDigest = func() error { return errors.New("the process died") }
		if _, err := r.svc.Digest(context.Background()); err == nil {
			t.Fatal("Digest succeeded without recording its head")
		}
		r.state.failDigest = nil
		r.objects.addVersion(dl.DigestKey(1), marker)
		r.now = r.now.Add(time.Minute)
		if _, err := r.svc.Digest(context.Background()); !errors.Is(err, dl.ErrChainBroken) || !strings.Contains(err.Error(), "not adopted") {
			t.Fatalf("marker %v: Digest: %v, want a broken chain naming the versions", marker, err)
		}
		if r.state.digest != nil {
			t.Fatalf("marker %v: digest head %+v recorded", marker, *r.state.digest)
		}
	}
}
