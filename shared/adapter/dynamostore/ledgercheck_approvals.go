package dynamostore

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/foureyes"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerApprovalCheck returns the ledger.Input.CheckAll that dlqctl
// verify passes, online and offline (DESIGN.md invariant 18): from every
// ledgered record version, the high-risk actions it added to the history
// (a parked record's claim, a correction, a claim under an approval); from
// every ledgered policy version, its "created" and "resumed" changes
// (foureyes.RecordActions, PolicyActions); each checked against the
// ledgered versions of the approval it names (foureyes.Check). What is
// wrong is a ledger.KindUnapproved problem naming the record or policy;
// an action its entry says its source's four_eyes left to one person
// (quarantine.FourEyesOff) is a note.
//
// It decodes only what the check reads of a record version (its key,
// source, parked cap, history and corrections, without their bodies),
// and only of a version whose history holds such an entry, and the
// version before it; a key's versions one after the other, so it holds
// two decoded records at a time. Policies and approvals are few and
// decoded whole; an approval version that is not a sealed approval of
// its key is left out (its own check names it forged).
func LedgerApprovalCheck() func(keys []ledger.KeyHistory) ([]ledger.Problem, []ledger.Note) {
	a := LedgerApprovalAcross()
	return func(keys []ledger.KeyHistory) ([]ledger.Problem, []ledger.Note) {
		var problems []ledger.Problem
		vals := make([]any, 0, len(keys))
		for _, k := range keys {
			val, ps := a.Key(k)
			vals, problems = append(vals, val), append(problems, ps...)
		}
		found, notes := a.All(vals)
		return append(problems, found...), notes
	}
}

// LedgerApprovalAcross is LedgerApprovalCheck in the two steps
// (ledger.Input.Across) that let verify check the keys in partitions:
// each key is reduced to its high-risk actions, or an approval to its
// decoded versions, and those are checked together at the end. Actions
// and approvals are few: what verify keeps of every key until the end.
func LedgerApprovalAcross() *ledger.Across {
	return &ledger.Across{
		Key: func(k ledger.KeyHistory) (any, []ledger.Problem) {
			var r approvalFacts
			var err error
			switch {
			case isApprovalKey(k.Key):
				h := approvalHistory(k)
				r.approval = &h
			case isPolicyKey(k.Key):
				r.actions, err = policyActions(nil, k)
			case IsRecordKey(k.Key):
				r.actions, err = recordActions(nil, k)
			}
			if err != nil {
				return r, []ledger.Problem{{Kind: ledger.KindUnapproved, Subject: k.Key,
					Detail: "its high-risk actions were not checked: " + err.Error()}}
			}
			return r, nil
		},
		All: func(vals []any) ([]ledger.Problem, []ledger.Note) {
			var actions []foureyes.Action
			var approvals []foureyes.History
			for _, val := range vals {
				r, _ := val.(approvalFacts)
				actions = append(actions, r.actions...)
				if r.approval != nil {
					approvals = append(approvals, *r.approval)
				}
			}
			found, notes := foureyes.Check(actions, approvals)
			problems := make([]ledger.Problem, 0, len(found))
			for _, f := range found {
				problems = append(problems, ledger.Problem{Kind: ledger.KindUnapproved, Subject: f.Subject, Detail: f.Detail})
			}
			out := make([]ledger.Note, 0, len(notes))
			for _, n := range notes {
				out = append(out, ledger.Note{Subject: n.Subject, Detail: n.Detail})
			}
			return problems, out
		},
	}
}

// approvalFacts is what the approval check keeps of a key: a record's or
// policy's high-risk actions (those read before a version that did not
// decode, too), or an approval's versions.
type approvalFacts struct {
	actions  []foureyes.Action
	approval *foureyes.History
}

// recordActions appends the high-risk actions of record key k's versions.
func recordActions(actions []foureyes.Action, k ledger.KeyHistory) ([]foureyes.Action, error) {
	prevItem, prevUnknown := k.Before, k.BeforeUnknown
	var prev *quarantine.Record
	for _, v := range k.Versions {
		if mayAct(v.Item) {
			var err error
			if prev == nil && prevItem != nil {
				if prev, err = decodeHistory(prevItem); err != nil {
					return actions, fmt.Errorf("the version before change %s does not decode: %w", v.Seq, err)
				}
			}
			next, err := decodeHistory(v.Item)
			if err != nil {
				return actions, fmt.Errorf("change %s does not decode: %w", v.Seq, err)
			}
			actions = append(actions, foureyes.RecordActions(k.Key, v.Seq, prev, next, prevUnknown)...)
			prev = next
		} else {
			prev = nil
		}
		prevItem, prevUnknown = v.Item, false
	}
	return actions, nil
}

// mayAct reports whether a record version's history holds an entry that
// may be a high-risk action (foureyes.RecordActions): a correction, a
// parked record's claim, an unpark, a claim or reclaim naming an approval
// or a target (a redrive to another queue). A version without one added
// none.
func mayAct(it ledger.Item) bool {
	if len(it["corrections"].L) > 0 {
		return true
	}
	for _, a := range it["attempts"].L {
		reason := a.M["reason"].S
		if reason == nil {
			continue
		}
		switch r := *reason; {
		case strings.HasPrefix(r, "parked record claimed"), strings.HasPrefix(r, "correction "), strings.HasPrefix(r, "lease expired"),
			strings.HasPrefix(r, "unparked by hand: "):
			return true
		case strings.HasPrefix(r, "claimed for round"):
			if ap := a.M["approval"].S; ap != nil && *ap != "" {
				return true
			}
			if tg := a.M["target"].S; tg != nil && *tg != "" {
				return true
			}
		}
	}
	return false
}

// decodeHistory decodes what foureyes.RecordActions reads of a record
// version: its id, source, parked cap, history and corrections (their
// bodies left out).
func decodeHistory(it ledger.Item) (*quarantine.Record, error) {
	part := ledger.Item{}
	for _, name := range []string{KeyAttr, sourceAttr, "parked_cap", "attempts"} {
		if v, ok := it[name]; ok {
			part[name] = v
		}
	}
	if cs := it["corrections"].L; len(cs) > 0 {
		l := make([]ledger.Value, len(cs))
		for i, c := range cs {
			m := make(map[string]ledger.Value, len(c.M))
			for name, v := range c.M {
				if name != "body" {
					m[name] = v
				}
			}
			l[i] = ledger.Map(m)
		}
		part["corrections"] = ledger.List(l...)
	}
	sdk, err := SDKItem(part)
	if err != nil {
		return nil, err
	}
	return Unmarshal(sdk)
}

// policyActions appends the "created" and "resumed" changes of policy key
// k's versions.
func policyActions(actions []foureyes.Action, k ledger.KeyHistory) ([]foureyes.Action, error) {
	var prev *policy.Policy
	if k.Before != nil {
		var err error
		if prev, err = decodePolicyHistory(k.Before); err != nil {
			return actions, fmt.Errorf("its version before the ledger does not decode: %w", err)
		}
	}
	prevUnknown := k.BeforeUnknown
	for _, v := range k.Versions {
		next, err := decodePolicyHistory(v.Item)
		if err != nil {
			return actions, fmt.Errorf("change %s does not decode: %w", v.Seq, err)
		}
		actions = append(actions, foureyes.PolicyActions(k.Key, v.Seq, prev, next, prevUnknown)...)
		prev, prevUnknown = next, false
	}
	return actions, nil
}

// decodePolicyHistory decodes a ledgered policy item, its seal unchecked
// (a version that fails its seal is named forged by its own check; its
// history is judged all the same).
func decodePolicyHistory(it ledger.Item) (*policy.Policy, error) {
	raw := it.S(policyAttr)
	if raw == "" {
		return nil, errors.New("a policy item without its policy")
	}
	var p policy.Policy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	return &p, nil
}

// approvalHistory is approval key k's ledgered versions that are sealed
// approvals of the key.
func approvalHistory(k ledger.KeyHistory) foureyes.History {
	h := foureyes.History{Key: k.Key}
	rest := strings.TrimPrefix(k.Key, approvalKeyPrefix)
	if i := strings.LastIndexByte(rest, '#'); i >= 0 {
		h.Source, h.ID = rest[:i], rest[i+1:]
	}
	items := make([]ledger.Item, 0, len(k.Versions)+1)
	if k.Before != nil {
		items = append(items, k.Before)
	}
	for _, v := range k.Versions {
		items = append(items, v.Item)
	}
	for _, it := range items {
		if a, err := decodeLedgeredApproval(it); err == nil {
			h.Versions = append(h.Versions, a)
		}
	}
	for _, n := range k.Named {
		if untrusted[n] {
			h.Named = append(h.Named, string(n))
		}
	}
	// Its whole history or nothing: an approval whose first version the
	// ledger holds is not version 1 and pending (versions missing before
	// it, or the ledger began after it) could have been widened before;
	// it approves nothing.
	if len(h.Versions) > 0 && (h.Versions[0].Version != 1 || h.Versions[0].State != approval.StatePending) {
		h.Named = append(h.Named, "first-version-missing")
	}
	return h
}

// untrusted are the problems that say a version of an approval is not one
// the redrive function wrote: such an approval approves nothing. (A
// rewritten or deleted table item does not unmake its ledgered versions.)
var untrusted = map[ledger.Kind]bool{ledger.KindForged: true, ledger.KindWriterMissing: true, ledger.KindWriterInvalid: true, ledger.KindWriterRole: true}
