package ledger

import (
	"testing"
	"time"
)

// R6: Lambda documents that a record processed more than once may come out
// of order. If a retry delivers the later half first, the earlier half is
// dropped as "≤ head" with success: never ledgered, no error.
func TestReviewOutOfOrderRetryDropsChangesSilently(t *testing.T) {
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	resp := r.handle(batch("shard-1", recs[0:4]))
	t.Logf("second batch: failures %+v (none: reported as done)", resp.BatchItemFailures)
	r.exact(s)
}

// R7: the digest head item rolled back (a PITR restore of the table, or a
// direct write): each 5-minute run adopts ONE old digest and stops, so new
// changes wait N runs to be anchored, and the lag reported meanwhile is 0.
func TestReviewDigestHeadRollbackCrawlsAndHidesTheLag(t *testing.T) {
	s, r, recs := oneShard(t, 2)
	r.handle(batch("shard-1", recs[:1]))
	r.digest()
	r.now = r.now.Add(time.Minute)
	r.handle(batch("shard-1", recs[1:2]))
	r.digest()
	r.now = r.now.Add(time.Minute)
	s.many("shard-1", 2)
	r.handle(batch("shard-1", s.recs["shard-1"][2:]))
	r.digest()
	r.state.digest = nil // the digest head as a restore from before digest 1 leaves it
	r.now = r.now.Add(time.Minute)
	s.many("shard-1", 2)
	r.handle(batch("shard-1", s.recs["shard-1"][4:]))
	r.now = r.now.Add(30 * time.Minute)
	for i := 0; i < 3; i++ {
		rep := r.digest()
		t.Logf("run %d: %+v", i, rep)
		if rep.Adopted && rep.LagSeconds == 0 {
			t.Errorf("run %d adopted digest %d and reports lag 0 while a change has waited 30 minutes", i, rep.N)
		}
	}
}
