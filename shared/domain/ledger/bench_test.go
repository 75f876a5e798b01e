package ledger_test

import (
	"fmt"
	"testing"

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
