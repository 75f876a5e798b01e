package capacity_test

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
)

// The projection of a made-up run, computed by hand: 100 messages, each
// a 2-unit record write with a 1-unit index put on 'HOT', one batch of
// 100 record changes in 200 ms whose counters transaction writes 10
// items of 2 units, and invocations of 10 messages in 50 ms.
func TestProjectByHand(t *testing.T) {
	r := byHand()
	p := capacity.Project(r)
	// Per message: table 2 + 0.2, index 1 (all on HOT); 1.1 changes.
	if p.IngestTableWCU != 2 || p.IngestIndexWCU != 1 || p.LedgerTableWCU != 0.2 || p.StreamRecords != 1.1 {
		t.Errorf("per message: %+v", p)
	}
	want := map[string]float64{
		"partition key 'HOT' of index ix":                              1000,  // 1000 ÷ 1 WCU per message
		"the on-demand throughput quota of the table":                  18181, // 40000 ÷ 2.2
		"the ledger's stream shards":                                   math.Inf(1),
		"IngestMaxConcurrency 4, the DLQ mapping's MaximumConcurrency": 800, // 4 × 10 ÷ 0.05 s
	}
	// The ledger: 100 changes in 0.2 s = 500 changes/s per shard; a
	// saturated partition writes 1000 ÷ (220 units ÷ 110 changes) = 500:
	// it keeps up.
	if len(p.Limits) != len(want) {
		t.Fatalf("limits %+v", p.Limits)
	}
	for _, l := range p.Limits {
		w, ok := want[l.Name]
		if !ok || math.Floor(l.Rate) != w && !(math.IsInf(w, 1) && math.IsInf(l.Rate, 1)) {
			t.Errorf("limit %q: %v (%s), want %v", l.Name, l.Rate, l.Detail, w)
		}
	}
	if p.N != 800 || p.Binding != "IngestMaxConcurrency 4, the DLQ mapping's MaximumConcurrency" {
		t.Errorf("N %d limited by %q", p.N, p.Binding)
	}
	// At 800 msgs/s the table writes 1,760 WCU/s: still the 4 partitions
	// a new table has. A batch waits 200 ms at 800 × 1.1 ÷ (4 × 500) =
	// 44 % of the shards' throughput: 200 ms ÷ 0.56, then 5 minutes and
	// the digest's 100 ms.
	if p.Shards != 4 || p.AnchoringLag.Round(time.Millisecond) != 357*time.Millisecond+5*time.Minute+100*time.Millisecond {
		t.Errorf("shards %d, lag %s", p.Shards, p.AnchoringLag)
	}
	var out bytes.Buffer
	p.Print(&out, r)
	if !strings.HasSuffix(out.String(), "\nprojected sustained ingest: 800 msgs/s per table (limited by IngestMaxConcurrency 4, the DLQ mapping's MaximumConcurrency)\n") {
		t.Errorf("output:\n%s", out.String())
	}
	// A slower ledger binds: 100 changes in 800 ms is 125 changes/s per
	// shard, under the 500 a saturated partition writes: 4 shards × 125
	// ÷ 1.1 changes per message.
	r.Batches[0].Duration = 800 * time.Millisecond
	p = capacity.Project(r)
	if p.N != 454 || p.Binding != "the ledger's stream shards" {
		t.Errorf("a slow ledger: N %d limited by %q", p.N, p.Binding)
	}
}

// byHand is the made-up run of TestProjectByHand.
func byHand() *capacity.Result {
	r := &capacity.Result{Options: capacity.Options{Messages: 100, Sources: 2, HotShare: 0.8}, MappingConcurrency: 4, MappingBatchSize: 10,
		LedgerBatchSize: 100, LedgerParallel: 1, IngestMemoryMB: 256, LedgerMemoryMB: 256, DigestSchedule: "rate(5 minutes)", Digest: 100 * time.Millisecond}
	for i := range 100 {
		k := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		r.IngestWrites = append(r.IngestWrites, capacity.Write{Target: "table", Key: k, Units: 2, Kind: "write", Changed: true},
			capacity.Write{Target: "ix", Key: "HOT", Units: 1, Kind: "put"})
	}
	var ledger []capacity.Write
	for i := range 10 {
		ledger = append(ledger, capacity.Write{Target: "table", Key: "#ctr#" + string(rune('a'+i)), Units: 2, Kind: "write", Transactional: true, Changed: true})
	}
	r.LedgerWrites = ledger
	r.Batches = []capacity.Batch{{Records: 100, Duration: 200 * time.Millisecond, Writes: ledger}}
	for range 10 {
		r.Invocations = append(r.Invocations, capacity.Invocation{Messages: 10, Duration: 50 * time.Millisecond})
	}
	return r
}

// An index the template keeps only until a migration drops it: the
// projection names its limit, and beside it the projection without its
// writes (here: 40 × 10 ÷ 0.05 s = 8,000 by the mapping, once 'HOT' of
// ix is gone).
func TestProjectWithoutARetiringIndex(t *testing.T) {
	r := byHand()
	r.MappingConcurrency, r.Retiring = 40, "ix"
	r.Layout.Indexes = []capacity.Index{{Name: "ix", Hash: "k"}}
	p := capacity.Project(r)
	if p.N != 1000 || p.Binding != "partition key 'HOT' of index ix" || p.Retired == nil {
		t.Fatalf("N %d limited by %q, retired %v", p.N, p.Binding, p.Retired)
	}
	if q := p.Retired; q.N != 8000 || q.Binding != "IngestMaxConcurrency 40, the DLQ mapping's MaximumConcurrency" || q.IngestIndexWCU != 0 || q.Retired != nil {
		t.Errorf("without ix: N %d limited by %q, index WCU %v", q.N, q.Binding, q.IngestIndexWCU)
	}
	if len(r.IngestWrites) != 200 {
		t.Errorf("the run's writes changed: %d", len(r.IngestWrites))
	}
	var out bytes.Buffer
	p.Print(&out, r)
	if want := "\nwithout index ix (step 3 of the move to the source index drops it): 8000 msgs/s per table (limited by IngestMaxConcurrency 40, the DLQ mapping's MaximumConcurrency)\nprojected sustained ingest: 1000 msgs/s per table (limited by partition key 'HOT' of index ix)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s", out.String())
	}
}
