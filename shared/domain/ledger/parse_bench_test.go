package ledger_test

import (
	"fmt"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func BenchmarkParseSegment(b *testing.B) {
	f := newFixture(b)
	for i := range 500 {
		f.write("s", fmt.Sprintf("src#%d", i), 1)
	}
	key := f.flush("s")
	raw := f.segs[key]
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ledger.ParseSegment(raw); err != nil {
			b.Fatal(err)
		}
	}
}
