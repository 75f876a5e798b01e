package redrive

import (
	"fmt"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A claim-check reference without a size (an item written by hand) counts
// as SQS's largest body in the batch's bytes, not as nothing: the batch
// bound holds whatever a record says.
func TestABodyOfUnknownSizeCountsAsTheLargest(t *testing.T) {
	ids := make([]string, MaxBatchSize)
	recs := map[string]*quarantine.Record{}
	for i := range ids {
		ids[i] = fmt.Sprint("r", i)
		recs[ids[i]] = &quarantine.Record{DLQID: ids[i], BodyRef: &quarantine.ObjectRef{Key: "k"}}
	}
	if got, want := withinBytes(ids, recs), MaxBatchBytes/MaxCallBytes; got != want {
		t.Fatalf("%d records of unknown size in one batch, want %d", got, want)
	}
	recs[ids[0]].BodyRef.Size = 10
	if got := replaySize(recs[ids[0]]); got != 10 {
		t.Fatalf("a stated size counts as %d", got)
	}
}
