package ledger

import (
	"context"
	"encoding/json"
	"testing"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func entrySeeds(f *testing.F) {
	s := newStream()
	s.many("shard-1", 3)
	ev, _ := json.Marshal(batch("shard-1", s.recs["shard-1"]))
	f.Add(ev)
	f.Add([]byte(`{"action":"digest"}`))
	f.Add([]byte(`{"action":"baseline"}`))
	f.Add([]byte(`{"shardId":"s","Records":[{"eventName":"INSERT","dynamodb":{"Keys":{"dlq_id":{"S":"a"}},"SequenceNumber":"1"}}]}`))
	f.Add([]byte(`{"action":"digest","shardId":"shard-1","Records":[]}`))
}

// FuzzStreamEntry: any event gets an answer or an error, never a panic,
// and the stream function never writes a digest or a baseline.
func FuzzStreamEntry(f *testing.F) {
	entrySeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, _ := baselineRig(t, 1)
		_, _ = r.svc.StreamEntry(context.Background(), raw)
		if n := len(r.objects.under(dl.DigestPrefix)) + len(r.objects.under(dl.BaselinePrefix)); n > 0 || r.state.digest != nil {
			t.Fatalf("the stream entry wrote %d digest or baseline objects for %q", n, raw)
		}
	})
}

// FuzzDigestEntry: any event gets an answer or an error, never a panic,
// and the digest function never writes a segment or a shard head.
func FuzzDigestEntry(f *testing.F) {
	entrySeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, _ := baselineRig(t, 1)
		_, _ = r.svc.DigestEntry(context.Background(), raw)
		if n := len(r.objects.under(dl.SegmentPrefix)); n > 0 || len(r.state.heads) > 0 {
			t.Fatalf("the digest entry wrote %d segments, %d heads for %q", n, len(r.state.heads), raw)
		}
	})
}
