// Package foureyes is the ledger's cross-item check of DESIGN.md
// invariant 18: every high-risk action a sealed history records ran under
// the approval of a second, different principal. One version's check
// (quarantine.CheckTransition, approval.CheckTransition) sees one key; an
// approval is another item. So dlqctl verify collects, from every
// ledgered version, the high-risk actions it added (RecordActions,
// PolicyActions) and checks each against the ledgered versions of the
// approval it names (Check).
//
// The package is pure: dynamostore decodes the ledgered items
// (LedgerApprovalCheck) and turns what Check finds into ledger problems.
// Nothing it says quotes a payload: ids, states, times and hashes only.
package foureyes

import (
	"regexp"
	"strconv"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// What names a high-risk action as a problem says it.
type What string

// The high-risk actions a history records.
const (
	// ParkedClaim: a PARKED record claimed for an approved replay
	// (quarantine.Record.ClaimParked).
	ParkedClaim What = "claimed a parked record"
	// ParkedReclaim: an approved replay of a parked record, its lease
	// expired, taken over by another run (only an approved run of parked
	// records may: the record is still the parked one).
	ParkedReclaim What = "reclaimed the expired claim of a parked record"
	// ApprovedClaim: a record claimed by a run under an approval (a large
	// run, or the other records of a run that includes parked ones): the
	// approval must be one and count the claim.
	ApprovedClaim What = "claimed a record"
	// Correction: a corrected payload (quarantine.Record.Correct).
	Correction What = "executed a correction"
	// PolicyCreated and PolicyResumed: a standing policy's "created" and
	// "resumed" changes.
	PolicyCreated What = "created a standing policy"
	PolicyResumed What = "resumed a standing policy"
	// RetargetClaim: a record claimed by a run that replays into another
	// registered queue (request field target) than its own source: its
	// approval must cover the risk retarget and its plan name that queue.
	RetargetClaim What = "claimed a record for another queue"
	// Unparked: a PARKED record returned to quarantine by hand
	// (quarantine.Record.Unpark), after which any run may replay it: the
	// first step of replaying a parked record, high-risk as that is.
	Unparked What = "unparked a record"
)

// noun is w as "the … at T" says it.
func (w What) noun() string {
	switch w {
	case Correction:
		return "correction"
	case PolicyCreated:
		return "policy's creation"
	case PolicyResumed:
		return "resume"
	case Unparked:
		return "unpark"
	}
	return "claim"
}

// Action is one high-risk action a ledgered version added to a history.
type Action struct {
	// Subject is the record's or policy's table key; Change the ledger
	// change (sequence number) whose version added the action.
	Subject, Change string
	What            What
	// Source is the record's or policy's source; Target what an approved
	// plan names it by (a record's id, a policy's id).
	Source, Target string
	// Risks are the risks an approval of the action covers (one of them
	// is enough: a claim in an approved run may be in a large run or in
	// one that includes parked records).
	Risks []quarantine.Risk
	// Approval and Actor are the history entry's; At is its time.
	Approval, Actor string
	At              time.Time
	// Claim counts the action toward its approved plan's max_messages.
	Claim bool
	// BodySHA256 is a correction's body hash: the approved plan's payload
	// must hash to it ("" when the entry does not say).
	BodySHA256 string
	// Queue is the registered source a retargeted claim sends to (the
	// entry's Target): the approved plan's target must be it.
	Queue string
}

// The reasons the lifecycle writes (shared/domain/quarantine/lifecycle.go,
// correction.go). The operator's own words follow "correction N: " only.
var (
	parkedClaimReason = regexp.MustCompile(`^parked record claimed with approval; `)
	claimReason       = regexp.MustCompile(`^claimed for round [0-9]+$`)
	reclaimReason     = regexp.MustCompile(`^lease expired; round [0-9]+ reclaimed, `)
	correctionReason  = regexp.MustCompile(`^correction ([0-9]+): `)
	unparkReason      = regexp.MustCompile(`^unparked by hand: `)
)

// RecordActions returns the high-risk actions next, a ledgered version of
// record key made by change, added to its history: the entries and
// corrections it has that prev does not. prev nil is the record's first
// version (all of its history is new), unless prevUnknown: the version
// before it is not in the ledger, and only its newest history entry (and
// that entry's correction) is its own.
func RecordActions(key, change string, prev, next *quarantine.Record, prevUnknown bool) []Action {
	var attempts []quarantine.Attempt
	var corrections []quarantine.Correction
	switch {
	case prevUnknown:
		if n := len(next.Attempts); n > 0 {
			attempts = next.Attempts[n-1:]
			if m := correctionReason.FindStringSubmatch(attempts[0].Reason); m != nil && attempts[0].Stage == quarantine.StageCorrection {
				for _, c := range next.Corrections {
					if strconv.Itoa(c.N) == m[1] {
						corrections = append(corrections, c)
					}
				}
			}
		}
	case prev == nil:
		attempts, corrections = next.Attempts, next.Corrections
	default:
		attempts = added(prev.Attempts, next.Attempts, attemptKey)
		corrections = added(prev.Corrections, next.Corrections, correctionKey)
	}
	var out []Action
	act := func(w What, actor, approval string, at quarantine.Time, risks ...quarantine.Risk) *Action {
		out = append(out, Action{Subject: key, Change: change, What: w, Source: next.Source, Target: next.DLQID, Risks: risks,
			Approval: approval, Actor: actor, At: at.Time})
		return &out[len(out)-1]
	}
	corrected := map[int]bool{}
	for _, c := range corrections {
		corrected[c.N] = true
		act(Correction, c.Actor, c.Approval, c.At, quarantine.RiskCorrection).BodySHA256 = c.BodySHA256
	}
	for _, a := range attempts {
		claim := a.Stage == quarantine.StageRedrive && (parkedClaimReason.MatchString(a.Reason) || claimReason.MatchString(a.Reason) || reclaimReason.MatchString(a.Reason))
		switch {
		case claim && a.Target != "":
			// A replay into another queue: its approval must cover
			// retarget (and parked, for a parked record: checked as the
			// parked claim it also is, not counted twice).
			rt := act(RetargetClaim, a.Actor, a.Approval, a.At, quarantine.RiskRetarget)
			rt.Claim, rt.Queue = true, a.Target
			if parkedClaimReason.MatchString(a.Reason) || reclaimReason.MatchString(a.Reason) && next.ParkedCap != 0 {
				act(ParkedClaim, a.Actor, a.Approval, a.At, quarantine.RiskParked)
			}
		case a.Stage == quarantine.StageRedrive && parkedClaimReason.MatchString(a.Reason):
			act(ParkedClaim, a.Actor, a.Approval, a.At, quarantine.RiskParked).Claim = true
		case a.Stage == quarantine.StageRedrive && reclaimReason.MatchString(a.Reason) && next.ParkedCap != 0:
			act(ParkedReclaim, a.Actor, a.Approval, a.At, quarantine.RiskParked).Claim = true
		case a.Stage == quarantine.StageRedrive && (claimReason.MatchString(a.Reason) || reclaimReason.MatchString(a.Reason)) && a.Approval != "":
			act(ApprovedClaim, a.Actor, a.Approval, a.At, quarantine.RiskLarge, quarantine.RiskParked).Claim = true
		case a.Stage == quarantine.StageOperator && unparkReason.MatchString(a.Reason):
			act(Unparked, a.Actor, a.Approval, a.At, quarantine.RiskParked)
		case a.Stage == quarantine.StageCorrection && correctionReason.MatchString(a.Reason):
			// The entry of a correction the version does not hold (written
			// by hand): the entry is the action.
			n, _ := strconv.Atoi(correctionReason.FindStringSubmatch(a.Reason)[1])
			if !corrected[n] {
				act(Correction, a.Actor, a.Approval, a.At, quarantine.RiskCorrection).BodySHA256 = a.BodySHA256
			}
		}
	}
	return out
}

// PolicyActions returns the "created" and "resumed" changes next, a
// ledgered version of the standing policy at key made by change, added to
// its history (prev and prevUnknown as for RecordActions). Every resume
// counts, whoever suspended the policy: the redrive function asks for an
// approval on every policy_resume (risk resume), and only the breaker
// suspends a policy.
func PolicyActions(key, change string, prev, next *policy.Policy, prevUnknown bool) []Action {
	var changes []policy.Change
	switch {
	case prevUnknown:
		if n := len(next.History); n > 0 {
			changes = next.History[n-1:]
		}
	case prev == nil:
		changes = next.History
	default:
		changes = added(prev.History, next.History, changeKey)
	}
	var out []Action
	for _, c := range changes {
		a := Action{Subject: key, Change: change, Source: next.Source, Target: next.ID, Approval: c.Approval, Actor: c.Actor, At: c.At.Time}
		switch c.Action {
		case "created":
			a.What, a.Risks = PolicyCreated, []quarantine.Risk{quarantine.RiskPolicy}
		case "resumed":
			a.What, a.Risks = PolicyResumed, []quarantine.Risk{quarantine.RiskResume}
		default:
			continue
		}
		out = append(out, a)
	}
	return out
}

// added returns the elements of next that prev does not hold (as a
// multiset: an entry prev holds twice is taken twice), in next's order.
// Histories only grow (older entries may be evicted), so these are the
// entries the version added, wherever a forged version put them.
func added[E any, K comparable](prev, next []E, key func(E) K) []E {
	have := make(map[K]int, len(prev))
	for _, e := range prev {
		have[key(e)]++
	}
	var out []E
	for _, e := range next {
		k := key(e)
		if have[k] > 0 {
			have[k]--
			continue
		}
		out = append(out, e)
	}
	return out
}

type attemptK struct {
	at                                                                  int64
	stage, reason, messageID, actor, body, note, kind, approval, target string
	receiveCount                                                        int
}

func attemptKey(a quarantine.Attempt) attemptK {
	return attemptK{a.At.UnixNano(), a.Stage, a.Reason, a.MessageID, a.Actor, a.BodySHA256, a.Note, a.Kind, a.Approval, a.Target, a.ReceiveCount}
}

type correctionK struct {
	n                           int
	at                          int64
	actor, approval, body, diff string
}

// correctionKey leaves the body out: an archived stub drops it.
func correctionKey(c quarantine.Correction) correctionK {
	return correctionK{c.N, c.At.UnixNano(), c.Actor, c.Approval, c.BodySHA256, c.DiffSHA256}
}

type changeK struct {
	at                            int64
	actor, action, note, approval string
}

func changeKey(c policy.Change) changeK {
	return changeK{c.At.UnixNano(), c.Actor, c.Action, c.Note, c.Approval}
}
