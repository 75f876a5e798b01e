package ledger_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/heappeak"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// BenchmarkVerify100k verifies a ledger of 100,000 records (two versions
// each, four shards, segments of 500 changes).
func BenchmarkVerify100k(b *testing.B) {
	f := newFixture(b)
	for v := int64(1); v <= 2; v++ {
		for i := range 100000 {
			shard := fmt.Sprintf("shard-%d", i%4)
			f.write(shard, fmt.Sprintf("src#%d", i), v)
			if len(f.pending[shard]) == 500 {
				f.flush(shard)
			}
		}
	}
	for s := range f.pending {
		f.flush(s)
	}
	f.digest()
	in := f.input()
	b.ResetTimer()
	for b.Loop() {
		if res := ledger.Verify(in); !res.OK() || res.Items != 100000 {
			b.Fatalf("%d problems", len(res.Problems))
		}
	}
}

// BenchmarkVerifyVersions verifies a ledger of DLQQ_VERIFY_BENCH_VERSIONS
// versions (300,000 unless set: make bench's VERIFY_VERSIONS):
// records of about 3 KB (a 2 KB payload and a history of three entries,
// the size of a real record's item) in three versions each, over four
// shards of 100-change segments, held in memory as dlqctl verify holds
// them. It reports versions verified per second and the most Go heap
// Verify held above its input (heappeak), in total and per version.
func BenchmarkVerifyVersions(b *testing.B) {
	versions := 300000
	if s := os.Getenv("DLQQ_VERIFY_BENCH_VERSIONS"); s != "" {
		var err error
		if versions, err = strconv.Atoi(s); err != nil || versions < 3 {
			b.Fatalf("DLQQ_VERIFY_BENCH_VERSIONS=%q", s)
		}
	}
	records := versions / 3
	f := newFixture(b)
	payload := ledger.Str(strings.Repeat("p", 2048))
	for v := int64(1); v <= 3; v++ {
		for i := range records {
			shard := fmt.Sprintf("shard-%d", i%4)
			id := fmt.Sprintf("src#%d", i)
			f.write(shard, id, v)
			history := make([]ledger.Value, 3)
			for h := range history {
				history[h] = ledger.Map(map[string]ledger.Value{"at": ledger.Str(t0.Add(time.Duration(h) * time.Minute).Format(time.RFC3339Nano)),
					"event": ledger.Str("arrival"), "note": ledger.Str("a history entry of the size redrive and ingest write")})
			}
			it := f.table[id]
			it["payload"], it["history"] = payload, ledger.List(history...)
			if len(f.pending[shard]) == 100 {
				f.flush(shard)
			}
		}
	}
	for s := range f.pending {
		f.flush(s)
	}
	f.digest()
	in := f.input()
	var inputBytes int
	for _, raw := range in.Segments {
		inputBytes += len(raw)
	}
	f.segs, f.table = nil, nil
	b.ResetTimer()
	for b.Loop() {
		var res ledger.Result
		start := time.Now()
		peak := heappeak.Measure(func() { res = ledger.Verify(in) })
		took := time.Since(start)
		if !res.OK() || res.Entries != records*3 {
			b.Fatalf("%d problems, %d entries", len(res.Problems), res.Entries)
		}
		b.ReportMetric(float64(res.Entries)/took.Seconds(), "versions/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(peak)/float64(res.Entries), "heap-B/version")
		b.ReportMetric(float64(inputBytes)/float64(res.Entries), "segment-B/version")
	}
}

func FuzzParse(f *testing.F) {
	fx := standard(f)
	for _, raw := range fx.segs {
		f.Add(raw)
	}
	for _, raw := range fx.digests {
		f.Add(raw)
	}
	f.Add([]byte(`{"k":{"L":[{"M":{"a":{"NS":["1"]}}}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if s, err := ledger.ParseSegment(raw); err == nil {
			if _, err := s.Encode(); err != nil {
				t.Fatalf("a parsed segment does not encode: %v", err)
			}
		}
		if d, err := ledger.ParseDigest(raw); err == nil {
			if _, err := d.Encode(); err != nil {
				t.Fatalf("a parsed digest does not encode: %v", err)
			}
		}
		if it, err := ledger.ParseItem(raw); err == nil {
			checkJCS(t, it)
		}
	})
}
