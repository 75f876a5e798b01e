package foureyes

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// History is one approval's ledgered versions.
type History struct {
	// Key is the approval's table key; Source and ID are the source and
	// approval id it names.
	Key, Source, ID string
	// Versions are its ledgered versions that are sealed approvals of
	// that key, oldest first (a version that is not is left out: its own
	// check names it forged).
	Versions []*approval.Approval
	// Named are the problems the ledger's other checks named the
	// approval's item with (forged, writer-missing, …): an approval
	// written behind the redrive function is no one's approval.
	Named []string
}

// Finding is what Check found about a record or policy (Subject: its
// table key), said without a payload value.
type Finding struct {
	Subject string
	Detail  string
}

// Check checks every action against the approvals: each names an
// approval (a problem when it names none; a note when it says its
// source's four_eyes left its risk out: quarantine.FourEyesOff, except a
// claim for another queue, whose risk no setting leaves out: a problem),
// and that
// approval is ledgered, of the action's source, covers its risk, was
// approved before the action by a principal that is not its requester
// under its own rules (identity.Rules.Same), before its expiry, its run
// not ended before the action, the action's actor is its requester, the
// plan names the record or policy when it names ids, a correction's body
// is the plan's payload, and its plan's max_messages bounds the claims
// recorded under it, across records.
func Check(actions []Action, approvals []History) (problems, notes []Finding) {
	byID := map[string][]*History{}
	for i := range approvals {
		h := &approvals[i]
		byID[h.ID] = append(byID[h.ID], h)
	}
	claims := map[*History][]Action{}
	offClaims := map[string]int{}
	for _, a := range actions {
		switch a.Approval {
		case "":
			problems = append(problems, Finding{a.Subject, fmt.Sprintf("%s without an approval (%s)", a.What, where(a))})
			continue
		case quarantine.FourEyesOff:
			if a.What == RetargetClaim {
				// No four_eyes setting lets one person replay into another
				// queue (quarantine.Risk.AlwaysFourEyes).
				problems = append(problems, Finding{a.Subject, fmt.Sprintf("%s without an approval (%s): its entry says four-eyes-off, but a replay into another queue (%s) always needs a second person's approval",
					a.What, where(a), a.Queue)})
				continue
			}
			if a.What == ApprovedClaim {
				offClaims[a.Source]++
				continue
			}
			notes = append(notes, Finding{a.Subject, fmt.Sprintf("four-eyes-off: %s on one person's request (%s, by %s): its entry says the source's four_eyes leaves %s out",
				a.What, where(a), a.Actor, riskNames(a.Risks))})
			continue
		}
		h, why := find(a, byID)
		if h == nil {
			problems = append(problems, Finding{a.Subject, fmt.Sprintf("%s under approval %s (%s): %s", a.What, a.Approval, where(a), why)})
			continue
		}
		if reasons := judge(a, h); len(reasons) > 0 {
			problems = append(problems, Finding{a.Subject, fmt.Sprintf("%s under approval %s (%s): %s", a.What, a.Approval, where(a), strings.Join(reasons, "; "))})
		}
		if a.Claim {
			claims[h] = append(claims[h], a)
		}
	}
	for _, h := range sortedKeys(claims) {
		problems = append(problems, overClaimed(h, claims[h])...)
	}
	for _, src := range slices.Sorted(maps.Keys(offClaims)) {
		claims := fmt.Sprintf("%d claims", offClaims[src])
		if offClaims[src] == 1 {
			claims = "1 claim"
		}
		notes = append(notes, Finding{src, "four-eyes-off: " + claims + " in runs on one person's request: their entries say the source's four_eyes leaves large or parked out"})
	}
	return problems, notes
}

// where says which change made an action, and when.
func where(a Action) string {
	return fmt.Sprintf("change %s, at %s", a.Change, quarantine.At(a.At))
}

// find is the approval a names, of a's source, or why there is none.
func find(a Action, byID map[string][]*History) (*History, string) {
	hs := byID[a.Approval]
	for _, h := range hs {
		if h.Source != a.Source {
			continue
		}
		if len(h.Versions) == 0 {
			return nil, fmt.Sprintf("approval %s is in the ledger, but no version of it is a sealed approval", a.Approval)
		}
		return h, ""
	}
	if len(hs) > 0 {
		return nil, fmt.Sprintf("approval %s is for source %q, not %q", a.Approval, hs[0].Source, a.Source)
	}
	return nil, fmt.Sprintf("approval %s is not in the ledger", a.Approval)
}

// judge lists what is wrong with a under h.
func judge(a Action, h *History) []string {
	var r []string
	id := a.Approval
	if len(h.Named) > 0 {
		r = append(r, fmt.Sprintf("approval %s is itself named (%s): written behind the redrive function, it is no one's approval", id, strings.Join(h.Named, ", ")))
	}
	noun := a.What.noun()
	first := h.Versions[0]
	if !slices.ContainsFunc(a.Risks, func(k quarantine.Risk) bool { return slices.Contains(first.Risks, k) }) {
		r = append(r, fmt.Sprintf("approval %s covers %s, not %s", id, riskNames(first.Risks), riskNames(a.Risks)))
	}
	// The version the action ran under: the newest made before it.
	var v *approval.Approval
	for _, x := range h.Versions {
		if !x.Changed().After(a.At) {
			v = x
		}
	}
	if v == nil {
		return append(r, fmt.Sprintf("approval %s was created at %s, after the %s", id, first.CreatedAt, noun))
	}
	switch v.State {
	case approval.StatePending:
		later := ""
		for _, x := range h.Versions {
			if x.State != approval.StatePending && x.DecidedAt != nil {
				later = fmt.Sprintf(": %s at %s", x.State, x.DecidedAt)
				break
			}
		}
		r = append(r, fmt.Sprintf("approval %s was not approved before the %s (pending then%s)", id, noun, later))
	case approval.StateRejected:
		r = append(r, fmt.Sprintf("approval %s was rejected, not approved", id))
	case approval.StateApproved, approval.StateExecuted:
		switch {
		case v.DecidedBy == nil || v.DecidedAt == nil:
			r = append(r, fmt.Sprintf("approval %s names no decider", id))
		default:
			if v.Rules.Same(v.RequestedBy, *v.DecidedBy) {
				r = append(r, fmt.Sprintf("approval %s was approved by its own requester (%s and %s are the same principal under its rules)", id, v.DecidedBy.ARN, v.RequestedBy.ARN))
			}
			if !v.DecidedAt.Before(v.ExpiresAt.Time) {
				r = append(r, fmt.Sprintf("approval %s was approved at %s, after it expired at %s", id, v.DecidedAt, v.ExpiresAt))
			}
		}
		if v.State == approval.StateExecuted && v.Outcome != nil && v.Outcome.At.Before(a.At) {
			r = append(r, fmt.Sprintf("approval %s's run had ended (its outcome recorded at %s) before the %s", id, v.Outcome.At, noun))
		}
	default:
		r = append(r, fmt.Sprintf("approval %s is %q, not approved", id, v.State))
	}
	if a.Actor != v.RequestedBy.ARN {
		r = append(r, fmt.Sprintf("its actor %s is not approval %s's requester %s", a.Actor, id, v.RequestedBy.ARN))
	}
	p, err := parsePlan(v.Plan)
	switch {
	case err != nil:
		r = append(r, fmt.Sprintf("approval %s's plan does not parse", id))
	case len(p.IDs) > 0 && a.What != PolicyCreated && a.What != PolicyResumed && !slices.Contains(p.IDs, a.Target):
		r = append(r, fmt.Sprintf("approval %s's plan names %d ids, not this record", id, len(p.IDs)))
	case p.PolicyID != "" && (a.What == PolicyCreated || a.What == PolicyResumed) && p.PolicyID != a.Target:
		r = append(r, fmt.Sprintf("approval %s's plan names policy %s, not %s", id, p.PolicyID, a.Target))
	case a.What == RetargetClaim && p.Target != a.Queue:
		r = append(r, fmt.Sprintf("approval %s's plan replays into %q, the claim into %q", id, p.Target, a.Queue))
	case a.What == Correction && a.BodySHA256 != "" && (p.Payload == nil || quarantine.BodySHA256([]byte(*p.Payload)) != a.BodySHA256):
		r = append(r, fmt.Sprintf("the corrected body (SHA-256 %s) is not approval %s's planned payload", a.BodySHA256, id))
	}
	return r
}

// plan is what Check reads of an approved plan (a redrive request's
// canonical JSON).
type plan struct {
	IDs         []string `json:"ids"`
	MaxMessages int      `json:"max_messages"`
	PolicyID    string   `json:"policy_id"`
	Payload     *string  `json:"payload"`
	Target      string   `json:"target"`
}

func parsePlan(raw string) (plan, error) {
	var p plan
	err := json.Unmarshal([]byte(raw), &p)
	return p, err
}

// overClaimed names the claims beyond h's plan's max_messages, the
// earliest counted first.
func overClaimed(h *History, cs []Action) []Finding {
	newest := h.Versions[len(h.Versions)-1]
	p, err := parsePlan(newest.Plan)
	if err != nil || p.MaxMessages <= 0 || len(cs) <= p.MaxMessages {
		return nil
	}
	slices.SortStableFunc(cs, func(a, b Action) int { return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Subject, b.Subject)) })
	var out []Finding
	for i, a := range cs[p.MaxMessages:] {
		out = append(out, Finding{a.Subject, fmt.Sprintf("%s under approval %s (%s): claim %d of %d recorded under it, whose plan allows max_messages %d",
			a.What, a.Approval, where(a), p.MaxMessages+i+1, len(cs), p.MaxMessages)})
	}
	return out
}

func riskNames(rs []quarantine.Risk) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

func sortedKeys(m map[*History][]Action) []*History {
	out := make([]*History, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b *History) int { return strings.Compare(a.Key, b.Key) })
	return out
}
