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

// An "arrival" whose history bound is taken from itself could drop a
// record's claims and sends from its current version: refused.
func TestCheckArrivalRefusesAHistoryCutShort(t *testing.T) {
	t.Parallel()
	p := realTransitions(t)["Arrive/after a replay"][0] // a sent record
	if len(p.Attempts) < 3 {
		t.Fatalf("the sent record has %d attempts, want at least 3", len(p.Attempts))
	}
	next, err := reArrive(p.Clone(), 2, transNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.CheckArrival(p, next); err == nil {
		t.Errorf("an arrival that keeps %d of %d history entries is accepted", len(next.Attempts), len(p.Attempts))
	}
}
