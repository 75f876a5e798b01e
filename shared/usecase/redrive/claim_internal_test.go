package redrive

import (
	"fmt"
	"strings"
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

// The message attributes count too, claim-checked or inline: a record of
// an empty body and 1,000 KiB of attributes is as large as one of a
// 1,000 KiB body.
func TestAttributesCountInTheBatchBytes(t *testing.T) {
	ids := make([]string, MaxBatchSize)
	recs := map[string]*quarantine.Record{}
	for i := range ids {
		ids[i] = fmt.Sprint("r", i)
		recs[ids[i]] = &quarantine.Record{DLQID: ids[i], Body: "{}", AttributesRef: &quarantine.ObjectRef{Key: "a", Size: 1000 << 10}}
	}
	if got, want := withinBytes(ids, recs), MaxBatchBytes/(1000<<10); got != want {
		t.Fatalf("%d records of 1,000 KiB of attributes in one batch, want %d", got, want)
	}
	inline := &quarantine.Record{Body: "{}", Attributes: map[string]quarantine.Attribute{"trace": {DataType: "String", StringValue: strings.Repeat("x", 100)}}}
	if got := replaySize(inline); got != 2+5+6+100 {
		t.Fatalf("inline attributes count as %d bytes", got-2)
	}
}
