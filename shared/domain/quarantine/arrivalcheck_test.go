package quarantine_test

import (
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Every pair Arrive makes (a bounded window included) is an arrival; no
// pair another transition makes is.
func TestCheckArrivalAcceptsOnlyWhatArriveMakes(t *testing.T) {
	t.Parallel()
	arrivals := 0
	for name, p := range realTransitions(t) {
		err := quarantine.CheckArrival(p[0], p[1])
		if strings.HasPrefix(name, "Arrive") {
			arrivals++
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		} else if err == nil {
			t.Errorf("%s: taken for an arrival", name)
		}
	}
	if arrivals < 5 {
		t.Fatalf("only %d arrivals among the real transitions", arrivals)
	}
	if quarantine.CheckArrival(nil, in(t, quarantine.StatusQuarantined)) == nil {
		t.Error("an arrival without the version before it")
	}
}
