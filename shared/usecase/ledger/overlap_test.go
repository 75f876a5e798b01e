package ledger

import (
	"context"
	"testing"
	"time"
)

// staleState serves one digest run's first reads from before another run
// signed (run A read the digest head and the heads, then run B signed the
// next digest over heads the stream had moved meanwhile).
type staleState struct {
	State
	digest DigestHead
	heads  map[string]Head
	served int
}

func (s *staleState) DigestHead(ctx context.Context) (DigestHead, bool, error) {
	if s.served&1 == 0 {
		s.served |= 1
		return s.digest, true, nil
	}
	return s.State.DigestHead(ctx)
}

func (s *staleState) Heads(ctx context.Context, shards []string) (map[string]Head, error) {
	if s.served&2 == 0 {
		s.served |= 2
		return s.heads, nil
	}
	return s.State.Heads(ctx, shards)
}

// Two overlapping digest runs: the one that adopts the other's digest
// proves the heads as they are after it, not the older ones it read
// first, so nothing is named unproven and no alarm fires.
func TestOverlappingDigestRunsNameNoHeadUnproven(t *testing.T) {
	s, r, recs := oneShard(t, 4)
	r.handle(batch("shard-1", recs[0:2]))
	r.now = r.now.Add(time.Minute)
	r.digestWritten(1, "")
	dh, _, err := r.state.DigestHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]Head{"shard-1": r.state.heads["shard-1"]}
	r.handle(batch("shard-1", recs[2:4])) // the stream moves on
	r.now = r.now.Add(time.Minute)
	r.digestWritten(2, "") // run B
	a := r.service("shard-1")
	a.State = &staleState{State: r.state, digest: dh, heads: stale}
	r.now = r.now.Add(time.Minute)
	rep, err := a.Digest(context.Background()) // run A, late
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unproven != 0 || rep.N < 2 {
		t.Fatalf("report %+v: the overlapping run named a head unproven", rep)
	}
	if res := r.verifyBucket(s); !res.OK() {
		t.Fatalf("verify: %v", res.Problems)
	}
}
