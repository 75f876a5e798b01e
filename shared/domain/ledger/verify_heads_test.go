package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// forge ledgers version v of id with its payload changed (what no
// transition does: fixtureCheck names it).
func (f *fixture) forge(shard, id string, v int64) {
	it := record(id, v, "OPEN")
	it["payload"] = ledger.Str("attacker's payload")
	old := f.table[id]
	ov, _ := old.Int("version")
	f.pending[shard] = append(f.pending[shard], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: id, Item: it, Old: &ledger.Old{Version: ov, Seal: old.S("seal")}})
	f.table[id] = it
}

// evidenced is a ledger that holds evidence: shard-1's chain of three
// segments (src#f, src#d and src#r written in the first; src#f's version
// 2 forged in the second; src#r's version 2 in the third), digest 1 after
// the first segment and digest 2 after the third, and then, behind the
// ledger, src#d deleted from the table and src#r rewritten. shard-2 holds
// src#o, untouched. It returns the fixture and shard-1's head as digest 1
// signed it.
func evidenced(t *testing.T) (*fixture, ledger.Head) {
	t.Helper()
	f := newFixture(t)
	f.write("shard-1", "src#f", 1)
	f.write("shard-1", "src#d", 1)
	f.write("shard-1", "src#r", 1)
	f.flush("shard-1")
	f.write("shard-2", "src#o", 1)
	f.flush("shard-2")
	f.digest()
	first := *f.heads["shard-1"]
	f.forge("shard-1", "src#f", 2)
	f.flush("shard-1")
	f.write("shard-1", "src#r", 2)
	f.flush("shard-1")
	f.digest()
	delete(f.table, "src#d")
	f.table["src#r"] = record("src#r", 2, "RESOLVED")
	return f, first
}

// The evidence evidenced holds, which Verify names whatever the heads say.
var evidence = []named{{ledger.KindForged, "src#f"}, {ledger.KindDeleted, "src#d"}, {ledger.KindRewritten, "src#r"}}

func TestVerifyKeepsItsEvidenceWhenAHeadLies(t *testing.T) {
	t.Parallel()
	type want struct {
		kind    ledger.Kind
		subject string
	}
	d3 := ledger.DigestKey(3)
	const firstSegment, lastSegment1 = "<shard-1's first segment>", "<shard-1's last segment>"
	cases := []struct {
		name string
		// tamper changes the fixture's state (its heads: the table's
		// #led#head# items) as a function role could, and lets the ledger
		// go on from it.
		tamper func(f *fixture, first ledger.Head)
		// input tampers with the bucket, if set.
		input func(f *fixture, in *ledger.Input)
		// want: the problems, firstSegment and lastSegment1 standing for
		// shard-1's first and last segments before tamper.
		want []want
		// anchored: the entries anchored (of 6: 5 on shard-1's chain, 1
		// on shard-2's).
		anchored int
	}{
		{"a head rolled back to an older segment with its right hash", func(f *fixture, first ledger.Head) {
			*f.heads["shard-1"] = first
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindHeadBackwards, d3}}, 6},
		{"a head's hash zeroed", func(f *fixture, first ledger.Head) {
			f.heads["shard-1"].SegmentSHA256 = strings.Repeat("0", 64)
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindHeadUnsupported, d3}}, 6},
		{"a head pointed at an older segment with the newest count", func(f *fixture, first ledger.Head) {
			h := f.heads["shard-1"]
			h.SegmentKey, h.SegmentSHA256 = first.SegmentKey, first.SegmentSHA256
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindHeadUnsupported, d3}, {ledger.KindHeadBackwards, d3}}, 6},
		{"a head rolled back and the ledger forked from it", func(f *fixture, first ledger.Head) {
			*f.heads["shard-1"] = first
			f.write("shard-1", "src#n", 1)
			f.flush("shard-1")
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindSegmentChain, firstSegment}, {ledger.KindHeadUnsupported, d3},
			{ledger.KindHeadBackwards, d3}, {ledger.KindUnledgered, "src#n"}}, 6},
		{"a head deleted and the ledger started the shard again", func(f *fixture, first ledger.Head) {
			delete(f.heads, "shard-1")
			f.write("shard-1", "src#n", 1)
			f.flush("shard-1")
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindSegmentChain, firstSegment}, {ledger.KindHeadUnsupported, d3},
			{ledger.KindHeadBackwards, d3}, {ledger.KindUnledgered, "src#n"}}, 6},
		{"a shard listed with no chain", func(f *fixture, first ledger.Head) {
			f.heads["shard-1"] = &ledger.Head{Shard: "shard-1"}
			f.now = f.now.Add(time.Minute)
			f.digest()
		}, nil, []want{{ledger.KindHeadBackwards, d3}}, 6},
		{"the head's segment's bytes changed", nil, func(f *fixture, in *ledger.Input) {
			k := lastSegment(f, "shard-1")
			in.Segments[k] = []byte(strings.Replace(string(in.Segments[k]), `"OPEN"`, `"PARKED"`, 1))
		}, []want{{ledger.KindSegmentHash, lastSegment1}, {ledger.KindHeadUnsupported, ledger.DigestKey(2)}}, 4},
		{"the head's segment missing", nil, func(f *fixture, in *ledger.Input) {
			delete(in.Segments, lastSegment(f, "shard-1"))
		}, []want{{ledger.KindSegmentMissing, lastSegment1}, {ledger.KindHeadUnsupported, ledger.DigestKey(2)}}, 4},
	}
	t.Run("a zeroed hash names the head, not the segment", func(t *testing.T) {
		t.Parallel()
		f, _ := evidenced(t)
		f.heads["shard-1"].SegmentSHA256 = strings.Repeat("0", 64)
		f.now = f.now.Add(time.Minute)
		f.digest()
		// The segment's bytes are the ones digest 2 signed.
		if res := ledger.Verify(f.input()); res.Has(ledger.KindSegmentHash, lastSegment(f, "shard-1")) {
			t.Errorf("an intact segment named: %v", res.Problems)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, first := evidenced(t)
			keys := segmentsOf(f, "shard-1")
			if c.tamper != nil {
				c.tamper(f, first)
			}
			in := f.input()
			if c.input != nil {
				c.input(f, &in)
			}
			res := ledger.Verify(in)
			for _, p := range res.Problems {
				t.Log(p)
			}
			for _, w := range c.want {
				switch w.subject {
				case firstSegment:
					w.subject = keys[0]
				case lastSegment1:
					w.subject = keys[len(keys)-1]
				}
				if !res.Has(w.kind, w.subject) {
					t.Errorf("no %s naming %s in %v", w.kind, w.subject, res.Problems)
				}
			}
			wantNamed(t, res, evidence...) // the evidence is kept
			if got := res.Entries - res.Unanchored; got != c.anchored {
				t.Errorf("%d entries anchored (%d of %d not yet), want %d", got, res.Unanchored, res.Entries, c.anchored)
			}
		})
	}
}

// The same ledger with its heads untouched names the evidence and nothing
// about heads, and anchors everything.
func TestVerifyEvidencedLedgerAsIs(t *testing.T) {
	t.Parallel()
	f, _ := evidenced(t)
	res := ledger.Verify(f.input())
	if len(res.Problems) != len(evidence) || res.Unanchored != 0 {
		t.Fatalf("problems %v, %d not yet anchored; want the evidence only", res.Problems, res.Unanchored)
	}
	wantNamed(t, res, evidence...)
}

// A fork that no signed digest supports: the chain follows the branch
// written first (the lowest first seq) and names the fork; the records on
// that branch are still checked.
func TestVerifyFollowsTheFirstWrittenBranchOfAnUnsignedFork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#f", 1)
	f.flush("shard-1")
	first := *f.heads["shard-1"]
	f.forge("shard-1", "src#f", 2)
	branch := f.flush("shard-1")
	*f.heads["shard-1"] = first // rolled back before any digest
	f.write("shard-1", "src#n", 1)
	other := f.flush("shard-1")
	res := ledger.Verify(f.input())
	wantNamed(t, res, named{ledger.KindSegmentChain, first.SegmentKey}, named{ledger.KindSegmentOffChain, other}, named{ledger.KindForged, "src#f"}, named{ledger.KindUnledgered, "src#n"})
	if res.Has(ledger.KindSegmentOffChain, branch) {
		t.Errorf("the first-written branch %s is off-chain: %v", branch, res.Problems)
	}
}

// Two first segments (the head deleted, and the ledger started the shard
// again) that no signed digest reaches: the chain starts at the first
// written and names both; the records on its chain are still checked.
func TestVerifyStartsAtTheFirstWrittenOfTwoUnsignedRoots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#f", 1)
	root := f.flush("shard-1")
	f.forge("shard-1", "src#f", 2)
	f.flush("shard-1")
	delete(f.heads, "shard-1")
	f.write("shard-1", "src#n", 1)
	other := f.flush("shard-1")
	res := ledger.Verify(f.input())
	wantNamed(t, res, named{ledger.KindSegmentChain, root}, named{ledger.KindSegmentChain, other}, named{ledger.KindSegmentOffChain, other}, named{ledger.KindForged, "src#f"}, named{ledger.KindUnledgered, "src#n"})
	if res.Has(ledger.KindSegmentOffChain, root) {
		t.Errorf("the first-written root %s is off-chain: %v", root, res.Problems)
	}
}

// A fork whose later branch a signed digest supports (the head was rolled
// back before the digest ran, and the ledger went on from it): the chain
// follows the signed branch.
func TestVerifyFollowsTheSignedBranchOfAFork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	first := *f.heads["shard-1"]
	f.write("shard-1", "src#a", 2)
	unsigned := f.flush("shard-1")
	*f.heads["shard-1"] = first
	f.forge("shard-1", "src#a", 2)
	signed := f.flush("shard-1")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindSegmentOffChain, unsigned) || res.Has(ledger.KindSegmentOffChain, signed) || !res.Has(ledger.KindForged, "src#a") {
		t.Errorf("want %s off-chain, %s's forgery named: %v", unsigned, signed, res.Problems)
	}
	if res.Has(ledger.KindHeadUnsupported, ledger.DigestKey(1)) || res.Unanchored != 0 {
		t.Errorf("the signed branch's head is not supported (%d entries not yet anchored): %v", res.Unanchored, res.Problems)
	}
}

// A segment missing from the middle of a chain that a signed digest's
// head reaches beyond the gap: the chain goes on after the gap, so the
// records there are still checked.
func TestVerifyBridgesAGapTheDigestsCover(t *testing.T) {
	t.Parallel()
	f, _ := evidenced(t)
	f.write("shard-1", "src#r", 3)
	f.flush("shard-1")
	f.digest()
	in := f.input()
	gap := segmentsOf(f, "shard-1")[2] // src#r's version 2
	delete(in.Segments, gap)
	res := ledger.Verify(in)
	for _, w := range []struct {
		kind    ledger.Kind
		subject string
	}{{ledger.KindSegmentMissing, gap}, {ledger.KindForged, "src#f"}, {ledger.KindDeleted, "src#d"}, {ledger.KindVersionMissing, "src#r"}} {
		if !res.Has(w.kind, w.subject) && (w.kind != ledger.KindVersionMissing || !res.Has(ledger.KindOldMismatch, w.subject)) {
			t.Errorf("no %s naming %s in %v", w.kind, w.subject, res.Problems)
		}
	}
	if res.Has(ledger.KindSegmentOffChain, lastSegment(f, "shard-1")) || res.Has(ledger.KindHeadUnsupported, ledger.DigestKey(3)) {
		t.Errorf("the segment after the gap is not on the chain: %v", res.Problems)
	}
}
