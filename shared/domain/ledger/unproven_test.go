package ledger

import (
	"strings"
	"testing"
	"time"
)

// A digest's unproven heads round-trip, and a list without a reason, out
// of order or naming a shard twice is refused.
func TestDigestUnprovenParsesStrictly(t *testing.T) {
	d := NewDigest(1, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "arn:s", "arn:k", AlgECDSA, nil, nil)
	d.Unproven = []UnprovenHead{{Shard: "a", SegmentKey: "k", SegmentSHA256: "00", Segments: 3, LastSeq: "1", Reason: "r"}, {Shard: "b", Reason: ReasonNotReached}}
	raw, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDigest(raw)
	if err != nil || len(got.Unproven) != 2 || got.Unproven[0] != d.Unproven[0] {
		t.Fatalf("ParseDigest = %+v, %v", got.Unproven, err)
	}
	if plain, _ := NewDigest(1, time.Now(), "s", "k", AlgECDSA, nil, nil).Encode(); strings.Contains(string(plain), "unproven") {
		t.Fatalf("a digest without unproven heads names them: %s", plain)
	}
	for name, us := range map[string][]UnprovenHead{
		"no reason": {{Shard: "a"}},
		"no shard":  {{Reason: "r"}},
		"unsorted":  {{Shard: "b", Reason: "r"}, {Shard: "a", Reason: "r"}},
		"twice":     {{Shard: "a", Reason: "r"}, {Shard: "a", Reason: "s"}},
	} {
		d.Unproven = us
		raw, _ := d.Encode()
		if _, err := ParseDigest(raw); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
