package quarantine

import (
	"slices"
	"strings"
)

// Risk names why an operator action is high-risk: such an action needs a
// second, different verified principal's approval of its exact plan
// (DESIGN.md invariant 18), unless its source's four_eyes setting leaves
// the risk out (never RiskRetarget: Risk.AlwaysFourEyes).
type Risk string

// The risks.
const (
	// RiskParked: a run that replays parked records (include_parked), or
	// an unpark, which makes a parked record replayable by any run.
	RiskParked Risk = "parked"
	// RiskLarge: a run over the function's approval threshold.
	RiskLarge Risk = "large"
	// RiskCorrection: a corrected payload replaces what is sent.
	RiskCorrection Risk = "correction"
	// RiskPolicy: a standing policy replays without a person each time.
	RiskPolicy Risk = "policy"
	// RiskResume: resuming a policy whose breaker tripped.
	RiskResume Risk = "resume"
	// RiskRetarget: a run that replays into another registered queue
	// (request field target) instead of each record's own source. It
	// always needs a second person, whatever the source's or the
	// target's four_eyes say: one operator never pushes records into
	// another source's queue (AlwaysFourEyes).
	RiskRetarget Risk = "retarget"
)

var risks = []Risk{RiskParked, RiskLarge, RiskCorrection, RiskPolicy, RiskResume, RiskRetarget}

// AlwaysFourEyes reports whether r needs a second person on every
// source, whatever its four_eyes setting says (RiskRetarget: a list
// written before it existed, or an empty one, must not let one operator
// push records into another source's queue). four_eyes may still name
// it: it changes nothing.
func (r Risk) AlwaysFourEyes() bool { return r == RiskRetarget }

// Valid reports whether r is one of the risks.
func (r Risk) Valid() bool { return slices.Contains(risks, r) }

// RiskNames lists the risks for messages.
func RiskNames() string {
	s := make([]string, len(risks))
	for i, r := range risks {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
