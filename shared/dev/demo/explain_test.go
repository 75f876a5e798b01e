package demo

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Only the sealed history's own words for a possible second send of that
// round explain a duplicate of it.
func TestExplainsDuplicate(t *testing.T) {
	for reason, want := range map[string]bool{
		"lease expired; round 2 reclaimed, a duplicate send is possible":                  true,
		"send outcome unknown (round 2): possibly sent":                                   true,
		"sent (round 2); an earlier try may also have been enqueued, possibly sent twice": true,
		"lease expired; round 21 reclaimed, a duplicate send is possible":                 false,
		"send outcome unknown (round 3): possibly sent":                                   false,
		"send outcome unknown (round 21): possibly sent":                                  false,
		"sent (round 2)":                          false,
		"claimed for round 2":                     false,
		"sent (round 2) while the record changed": false,
	} {
		if got := explainsDuplicate(quarantine.Attempt{Reason: reason}, "2"); got != want {
			t.Errorf("%q explains a duplicate of round 2: %v, want %v", reason, got, want)
		}
	}
}
