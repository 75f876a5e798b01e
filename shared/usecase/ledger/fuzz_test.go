package ledger

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzLambdaHandler: any event gets an answer or an error, never a panic.
func FuzzLambdaHandler(f *testing.F) {
	s := newStream()
	s.many("shard-1", 3)
	ev, _ := json.Marshal(batch("shard-1", s.recs["shard-1"]))
	f.Add(ev)
	f.Add([]byte(`{"action":"digest"}`))
	f.Add([]byte(`{"shardId":"s","Records":[{"eventName":"INSERT","dynamodb":{"Keys":{"dlq_id":{"S":"a"}},"SequenceNumber":"1"}}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := newRig(t, "shard-1")
		_, _ = r.svc.LambdaHandler(context.Background(), raw)
	})
}
