package writerproof_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/macfake"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// BenchmarkWriterProof is the proof's own cost (the fake's HMAC stands in
// for KMS's answer: shared/dev/bench's BenchmarkWriterProofKMS adds the
// call): a batch's tree and its one MAC, every version's proof, and the
// verifier's recomputation of each root (one MAC check per batch).
func BenchmarkWriterProof(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 10, 50, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			f, keys := setup()
			ls := leaves(n)
			var calls, size int64
			for range b.N {
				p := writerproof.NewProver(macfake.MAC{Keys: f, ARN: ingestARN}, writerproof.RoleIngest)
				if err := p.Announce(ctx, ls); err != nil {
					b.Fatal(err)
				}
				for _, l := range ls {
					pr, err := p.Prove(ctx, l)
					if err != nil {
						b.Fatal(err)
					}
					enc := pr.Encode()
					size += int64(len(enc))
					if _, err := writerproof.Check(ctx, keys, f.Verify, l, enc); err != nil {
						b.Fatal(err)
					}
				}
				calls += p.Calls()
			}
			b.ReportMetric(float64(calls)/float64(b.N), "macs/batch")
			b.ReportMetric(float64(calls)/float64(b.N)/float64(n), "macs/msg")
			b.ReportMetric(float64(size)/float64(b.N)/float64(n), "proof-bytes/msg")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/msg")
		})
	}
}
