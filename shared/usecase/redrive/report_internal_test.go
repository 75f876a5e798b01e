package redrive

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A run of 10,000 records with the longest ids still answers within
// Lambda's 6 MB response limit, with every count exact.
func TestReportStaysUnderTheResponseLimit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 512) // the longest idempotency key
	rep := &Report{}
	outcomes := []*Outcome{&rep.Redriven, &rep.Skipped, &rep.Failed}
	for i := range MaxMaxMessages {
		rep.note(outcomes[i%3], fmt.Sprintf("%s#%s-%05d", strings.Repeat("q", 80), long, i))
	}
	merged := &Report{}
	merged.AddOutcomes(rep)
	merged.AddOutcomes(rep)
	for _, r := range []*Report{rep, merged} {
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) >= 6_000_000 {
			t.Fatalf("report is %d bytes", len(raw))
		}
	}
	if n := rep.Redriven.Count + rep.Skipped.Count + rep.Failed.Count; n != MaxMaxMessages || !rep.Failed.IDsTruncated {
		t.Fatalf("counted %d, truncated %v", n, rep.Failed.IDsTruncated)
	}
	if merged.Redriven.Count != 2*rep.Redriven.Count || !merged.Redriven.IDsTruncated {
		t.Fatalf("merged %d of %d", merged.Redriven.Count, 2*rep.Redriven.Count)
	}
}
