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

// Across is a cross-item check in two steps (Input.Across): Key reduces
// one key's history to what All needs of it (a record's high-risk
// actions, an approval's versions: small, since every key's is kept until
// All) and names what is wrong with the key alone; All checks the
// reductions together, in key order, and returns the problems it finds
// and notes (information). Key is called with each key's history once
// every other check has named that key (KeyHistory.Named), from one
// goroutine; neither may keep its argument.
type Across struct {
	Key func(KeyHistory) (any, []Problem)
	All func([]any) ([]Problem, []Note)
}

// reduced is one key's reduction (Across.Key).
type reduced struct {
	key string
	val any
}

// acrossCheck is Input.Across, or Input.CheckAll in its form (which keeps
// every key's versions until the end: a partitioned run then holds them
// all).
func (in Input) acrossCheck() *Across {
	switch {
	case in.Across != nil:
		return in.Across
	case in.CheckAll != nil:
		return &Across{
			Key: func(k KeyHistory) (any, []Problem) { return k, nil },
			All: func(vals []any) ([]Problem, []Note) {
				keys := make([]KeyHistory, len(vals))
				for i, val := range vals {
					keys[i] = val.(KeyHistory)
				}
				return in.CheckAll(keys)
			},
		}
	}
	return nil
}

// across records, for the cross-item check, key's ledgered changes ls (in
// order) and the version before them (nil: none known).
func (v *verifier) across(key string, before *version, ls []ledgered) {
	if v.cross == nil {
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

// reduceAcross reduces the pass's keys (Across.Key), each with the kinds
// of problem named on it so far: a key's other checks all run in its pass.
func (v *verifier) reduceAcross() {
	if v.cross == nil || len(v.keys) == 0 {
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
		k := v.keys[i]
		if n := named[k.Key]; len(n) > 0 {
			slices.Sort(n)
			k.Named = n
		}
		val, problems := callAcrossKey(v.cross.Key, k)
		v.keys[i] = KeyHistory{}
		v.reductions = append(v.reductions, reduced{key: k.Key, val: val})
		v.res.Problems = append(v.res.Problems, problems...)
	}
	v.keys = v.keys[:0]
}

// runAcross checks every key's reduction together (Across.All), in key
// order, and adds what it returns.
func (v *verifier) runAcross() {
	if v.cross == nil {
		return
	}
	slices.SortFunc(v.reductions, func(a, b reduced) int { return strings.Compare(a.key, b.key) })
	vals := make([]any, len(v.reductions))
	for i, r := range v.reductions {
		vals[i] = r.val
	}
	v.reductions = nil
	problems, notes := callAcrossAll(v.cross.All, vals)
	v.res.Problems = append(v.res.Problems, problems...)
	v.res.Notes = append(v.res.Notes, notes...)
}

// callAcrossKey calls reduce, turning a panic into a problem of the key.
func callAcrossKey(reduce func(KeyHistory) (any, []Problem), k KeyHistory) (val any, problems []Problem) {
	defer func() {
		if r := recover(); r != nil {
			val, problems = nil, []Problem{{Kind: KindUnapproved, Subject: k.Key, Detail: fmt.Sprintf("the cross-item check failed on it: %v", r)}}
		}
	}()
	return reduce(k)
}

// callAcrossAll calls check, turning a panic into a problem.
func callAcrossAll(check func([]any) ([]Problem, []Note), vals []any) (problems []Problem, notes []Note) {
	defer func() {
		if r := recover(); r != nil {
			problems = []Problem{{Kind: KindUnapproved, Subject: "(all)", Detail: fmt.Sprintf("the cross-item check failed: %v", r)}}
			notes = nil
		}
	}()
	return check(vals)
}
