package ledger

import (
	"fmt"
	"slices"
	"strings"
)

// KindUnapproved: a ledgered version that executed a high-risk action (a
// parked record's claim, a correction, a claim under an approval, a
// standing policy's creation or resume) without a valid approval by a
// second, different principal (DESIGN.md invariant 18; Input.CheckAll,
// dynamostore.LedgerApprovalCheck).
const KindUnapproved Kind = "unapproved"

// KeyHistory is one ledgered key's versions as Verify ordered them, for
// Input.CheckAll.
type KeyHistory struct {
	Key string
	// Before is the version before Versions[0], when known: the key's
	// baseline entry (or the ledgered version equal to it) when the first
	// ledgered change follows the baseline; for a key only in the baseline
	// it is that entry, and Versions is empty. Nil when Versions[0] is the
	// key's INSERT, or when the version before it is unknown
	// (BeforeUnknown).
	Before Item
	// BeforeUnknown: the key's first ledgered change is not an INSERT and
	// follows no baseline entry (named version-missing): what its first
	// version added cannot be told from what it kept.
	BeforeUnknown bool
	// Versions are the key's ledgered versions, oldest first; a REMOVE is
	// left out.
	Versions []HistoryVersion
	// Named are the kinds of problem Verify named the key with before
	// CheckAll (forged, writer-missing, …), sorted, without repeats.
	Named []Kind
}

// HistoryVersion is one ledgered version of a key: the item, the change that
// made it and when the stream saw that change.
type HistoryVersion struct {
	Item Item
	Seq  string
	At   string
}

// across records, for Input.CheckAll, key's ledgered changes ls (in
// order) and the version before them (nil: none known).
func (v *verifier) across(key string, before *version, ls []ledgered) {
	if v.in.CheckAll == nil {
		return
	}
	kv := KeyHistory{Key: key, Versions: make([]HistoryVersion, 0, len(ls))}
	switch {
	case before != nil:
		kv.Before = before.item
	case len(ls) > 0 && ls[0].e.Event != EventInsert:
		kv.BeforeUnknown = true
	}
	for _, l := range ls {
		if l.e.Item != nil {
			kv.Versions = append(kv.Versions, HistoryVersion{Item: l.e.Item, Seq: l.e.Seq, At: l.e.At})
		}
	}
	v.keys = append(v.keys, kv)
}

// runAcross calls Input.CheckAll once with every key's versions, sorted
// by key, each with the kinds of problem named on it so far, and adds what
// it returns.
func (v *verifier) runAcross() {
	if v.in.CheckAll == nil {
		return
	}
	named := map[string][]Kind{}
	for _, p := range v.res.Problems {
		if !slices.Contains(named[p.Subject], p.Kind) {
			named[p.Subject] = append(named[p.Subject], p.Kind)
		}
	}
	slices.SortFunc(v.keys, func(a, b KeyHistory) int { return strings.Compare(a.Key, b.Key) })
	for i := range v.keys {
		if k := named[v.keys[i].Key]; len(k) > 0 {
			slices.Sort(k)
			v.keys[i].Named = k
		}
	}
	problems, notes := callCheckAll(v.in.CheckAll, v.keys)
	v.keys = nil
	v.res.Problems = append(v.res.Problems, problems...)
	v.res.Notes = append(v.res.Notes, notes...)
}

// callCheckAll calls check, turning a panic into a problem.
func callCheckAll(check func([]KeyHistory) ([]Problem, []Note), keys []KeyHistory) (problems []Problem, notes []Note) {
	defer func() {
		if r := recover(); r != nil {
			problems = []Problem{{Kind: KindUnapproved, Subject: "(all)", Detail: fmt.Sprintf("the cross-item check failed: %v", r)}}
			notes = nil
		}
	}()
	return check(keys)
}
