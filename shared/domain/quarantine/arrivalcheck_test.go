package quarantine_test

import (
	"fmt"
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

// The note that says a round may have been sent more than once is an
// arrival's exactly when Arrive writes it: on a REDRIVING record, naming
// its round. Written by hand on another arrival, dropped, or naming
// another round, it is no arrival.
func TestCheckArrivalHoldsTheOpenRoundToArrive(t *testing.T) {
	t.Parallel()
	pairs := realTransitions(t)
	open := pairs["Arrive/before the round's outcome"]
	if _, ok := open[1].Attempts[len(open[1].Attempts)-1].MayRepeat(); !ok || quarantine.CheckArrival(open[0], open[1]) != nil {
		t.Fatal("Arrive's own comeback before the round's outcome is refused")
	}
	note := func(p [2]*quarantine.Record, n string) error {
		next := p[1].Clone()
		next.Attempts[len(next.Attempts)-1].Note = n
		return quarantine.CheckArrival(p[0], next)
	}
	claim := "came back before round %d recorded its outcome: possibly sent more than once"
	for name, err := range map[string]error{
		"on a QUARANTINED record":   note(pairs["Arrive"], fmt.Sprintf(claim, 1)),
		"after the round's outcome": note(pairs["Arrive/after a replay"], fmt.Sprintf(claim, 1)),
		"dropped":                   note(open, ""),
		"another round":             note(open, fmt.Sprintf(claim, open[0].RedriveCount+1)),
	} {
		if err == nil {
			t.Errorf("%s: taken for an arrival", name)
		}
	}
}
