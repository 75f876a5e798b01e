package demo

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A duplicate send is explained by the version of the history that said
// so, also after the record's bounded history dropped that entry; a round
// no version speaks of stays unexplained.
func TestMayRepeatSeesEveryVersion(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := storetest.Record(t, "soak-explained")
	claimed, err := r.Claim("soak", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := claimed.SendUnknown("soak", "InternalError", 1, now)
	if err != nil {
		t.Fatal(err)
	}
	// Round 2, then enough payload reads and notes to push the round 1
	// entry out of the bounded history.
	cur, err := unknown.Claim("soak", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err = cur.MarkSent("soak", "m2", false, false, now); err != nil {
		t.Fatal(err)
	}
	for range quarantine.DefaultMaxAttempts {
		if cur, err = cur.NoteSentWhileChanged("soak", "m2", 2, false, false, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := mayRepeat([]*quarantine.Record{cur}); got[cur.DLQID]["1"] {
		t.Fatalf("the final record still holds the round 1 entry: the test shows nothing (%d attempts)", len(cur.Attempts))
	}
	got := mayRepeat([]*quarantine.Record{claimed, unknown, cur})
	if !got[cur.DLQID]["1"] {
		t.Error("round 1, possibly sent in an earlier version, is not explained")
	}
	if got[cur.DLQID]["2"] {
		t.Error("round 2, sent once without doubt, is explained")
	}
}
