package ledger_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func TestVerifyFindsNothingInAnIntactLedger(t *testing.T) {
	t.Parallel()
	f := standard(t)
	res := ledger.Verify(f.input())
	if !res.OK() {
		t.Fatalf("problems: %v", res.Problems)
	}
	if res.Items != 4 || res.Entries != 7 || res.Digests != 2 || res.LastDigest != 2 || res.Unanchored != 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestVerifyNamesEachProblem(t *testing.T) {
	t.Parallel()
	f := standard(t) // for the object keys (the same in every standard fixture)
	type want struct {
		kind    ledger.Kind
		subject string
	}
	cases := []struct {
		name   string
		tamper func(f *fixture, in *ledger.Input)
		want   []want
	}{
		{"a record rewritten and re-sealed", func(f *fixture, in *ledger.Input) {
			it := record("src#b", 3, "RESOLVED") // its own seal is as good as the real one's
			replaceItem(in, "src#b", it)
		}, []want{{ledger.KindRewritten, "src#b"}}},
		{"a policy rewritten", func(f *fixture, in *ledger.Input) {
			replaceItem(in, "#pol#src#p1", record("#pol#src#p1", 1, "DISABLED"))
		}, []want{{ledger.KindRewritten, "#pol#src#p1"}}},
		{"a record deleted", func(f *fixture, in *ledger.Input) {
			replaceItem(in, "src#c", nil)
		}, []want{{ledger.KindDeleted, "src#c"}}},
		{"an item the ledger never saw", func(f *fixture, in *ledger.Input) {
			in.Items = append(in.Items, record("src#z", 1, "OPEN"))
		}, []want{{ledger.KindUnledgered, "src#z"}}},
		{"a set reordered is the same version", func(f *fixture, in *ledger.Input) {
			it := record("src#a", 2, "OPEN")
			it["tags"] = ledger.StrSet("a", "b")
			replaceItem(in, "src#a", it)
		}, nil},
		{"a segment missing", func(f *fixture, in *ledger.Input) {
			delete(in.Segments, secondSegment(f, "shard-1"))
		}, []want{{ledger.KindSegmentMissing, secondSegment(f, "shard-1")}}},
		{"a segment's bytes changed", func(f *fixture, in *ledger.Input) {
			k := secondSegment(f, "shard-1")
			in.Segments[k] = []byte(strings.Replace(string(in.Segments[k]), `"OPEN"`, `"PARKED"`, 1))
		}, []want{{ledger.KindSegmentHash, secondSegment(f, "shard-1")}}},
		{"a segment not on its chain", func(f *fixture, in *ledger.Input) {
			s, _ := ledger.NewSegment(arn, "shard-2", &ledger.Ref{Key: "ledger/segments/shard-2/x.json", SHA256: "00"},
				[]ledger.Entry{{Seq: "999999999999999999999", Event: ledger.EventInsert, At: t0.Format(time.RFC3339Nano), Key: "src#x", Item: record("src#x", 1, "OPEN")}})
			raw, _ := s.Encode()
			in.Segments[ledger.SegmentKey("shard-2", s.FirstSeq)] = raw
		}, []want{{ledger.KindSegmentOffChain, ledger.SegmentKey("shard-2", "999999999999999999999")}}},
		{"a digest forged", func(f *fixture, in *ledger.Input) {
			d, _ := ledger.ParseDigest(in.Digests[ledger.DigestKey(2)])
			d.Shards[0].Segments++
			raw, _ := d.Encode()
			in.Digests[ledger.DigestKey(2)] = raw
		}, []want{{ledger.KindDigestSignature, ledger.DigestKey(2)}}},
		{"a digest signed by another key", func(f *fixture, in *ledger.Input) {
			other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			d, _ := ledger.ParseDigest(in.Digests[ledger.DigestKey(2)])
			raw, _ := f.sign(d, other).Encode()
			in.Digests[ledger.DigestKey(2)] = raw
		}, []want{{ledger.KindDigestSignature, ledger.DigestKey(2)}}},
		{"a digest swapped for a validly signed one of another chain", func(f *fixture, in *ledger.Input) {
			d, _ := ledger.ParseDigest(in.Digests[ledger.DigestKey(2)])
			d.Prev.SHA256 = strings.Repeat("0", 64)
			raw, _ := f.sign(d, f.key).Encode()
			in.Digests[ledger.DigestKey(2)] = raw
		}, []want{{ledger.KindDigestChain, ledger.DigestKey(2)}}},
		{"two digests swapped", func(f *fixture, in *ledger.Input) {
			k1, k2 := ledger.DigestKey(1), ledger.DigestKey(2)
			in.Digests[k1], in.Digests[k2] = in.Digests[k2], in.Digests[k1]
		}, []want{{ledger.KindDigestInvalid, ledger.DigestKey(1)}, {ledger.KindDigestInvalid, ledger.DigestKey(2)}}},
		{"a digest missing", func(f *fixture, in *ledger.Input) {
			delete(in.Digests, ledger.DigestKey(1))
		}, []want{{ledger.KindDigestGap, ledger.DigestKey(1)}}},
		{"an anchored head's segment missing", func(f *fixture, in *ledger.Input) {
			d, _ := ledger.ParseDigest(in.Digests[ledger.DigestKey(2)])
			delete(in.Segments, d.Shards[0].SegmentKey)
		}, []want{{ledger.KindSegmentMissing, lastSegment(f, "shard-1")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := standard(t)
			in := f.input()
			c.tamper(f, &in)
			res := ledger.Verify(in)
			for _, w := range c.want {
				if !res.Has(w.kind, w.subject) {
					t.Errorf("no %s naming %s in %v", w.kind, w.subject, res.Problems)
				}
			}
			if len(c.want) == 0 && !res.OK() {
				t.Errorf("problems: %v", res.Problems)
			}
		})
	}
}

func TestVerifyNamesAVersionMissingFromTheMiddleOfAChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.write("shard-1", "src#a", 2)
	f.write("shard-1", "src#a", 3)
	f.flush("shard-1")
	f.digest()
	in := f.input()
	// The same history with version 2's entry taken out of the segment
	// before it was written (a write the stream never carried).
	g := newFixture(t)
	g.key, g.der = f.key, f.der
	g.write("shard-1", "src#a", 1)
	g.write("shard-1", "src#a", 2)
	g.write("shard-1", "src#a", 3)
	g.pending["shard-1"] = append(g.pending["shard-1"][:1], g.pending["shard-1"][2])
	g.flush("shard-1")
	g.digest()
	if res := ledger.Verify(in); !res.OK() {
		t.Fatalf("the whole chain: %v", res.Problems)
	}
	res := ledger.Verify(g.input())
	if !res.Has(ledger.KindVersionMissing, "src#a") && !res.Has(ledger.KindOldMismatch, "src#a") {
		t.Fatalf("no version-missing naming src#a: %v", res.Problems)
	}
	if !strings.Contains(fmt.Sprint(res.Problems), "version 2 missing") {
		t.Errorf("problems do not say version 2 is missing: %v", res.Problems)
	}
}

func TestVerifyNamesADuplicatedEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("shard-1", "src#a", 1)
	f.flush("shard-1")
	f.write("shard-1", "src#a", 2)
	f.write("shard-1", "src#a", 3)
	again := f.pending["shard-1"][1]
	f.flush("shard-1")
	f.write("shard-1", "src#a", 4)
	// A buggy writer ledgers version 3's change again in the next segment.
	f.pending["shard-1"] = append(f.pending["shard-1"], again)
	f.flush("shard-1")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindDuplicate, "shard-1") {
		t.Fatalf("no duplicate-entry naming shard-1: %v", res.Problems)
	}
}

func TestVerifyNamesADeletionTheLedgerSaw(t *testing.T) {
	t.Parallel()
	f := standard(t)
	f.remove("shard-2", "src#c")
	f.flush("shard-2")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindDeleted, "src#c") || len(res.Problems) != 1 {
		t.Fatalf("problems %v, want src#c deleted only", res.Problems)
	}
}

func TestVerifyReportsWhatIsNotYetAnchored(t *testing.T) {
	t.Parallel()
	f := standard(t)
	f.write("shard-1", "src#a", 3)
	f.flush("shard-1")
	f.write("shard-3", "src#d", 1) // a new shard, never in a digest
	f.flush("shard-3")
	f.now = f.now.Add(time.Minute)
	res := ledger.Verify(f.input())
	if !res.OK() {
		t.Fatalf("problems: %v", res.Problems)
	}
	if res.Unanchored != 2 || res.OldestUnanchored != time.Minute+time.Second {
		t.Fatalf("unanchored %d, oldest %s; want 2, 1m1s", res.Unanchored, res.OldestUnanchored)
	}
}

func TestVerifyGivesRecentUnledgeredChangesGrace(t *testing.T) {
	t.Parallel()
	f := standard(t)
	it := record("src#z", 1, "OPEN")
	it["status_since"] = ledger.Str(f.now.Add(-time.Second).Format(time.RFC3339Nano))
	in := f.input()
	in.Items = append(in.Items, it)
	in.Grace = time.Minute
	if res := ledger.Verify(in); !res.OK() || res.NotYetLedgered != 1 {
		t.Fatalf("within grace: %+v", res)
	}
	in.Now = in.Now.Add(2 * time.Minute)
	if res := ledger.Verify(in); !res.Has(ledger.KindUnledgered, "src#z") {
		t.Fatalf("after grace: %v", res.Problems)
	}
}

func replaceItem(in *ledger.Input, id string, it ledger.Item) {
	out := in.Items[:0]
	for _, x := range in.Items {
		if x.S("dlq_id") != id {
			out = append(out, x)
		}
	}
	if it != nil {
		out = append(out, it)
	}
	in.Items = out
}

func segmentsOf(f *fixture, shard string) []string {
	var keys []string
	for k := range f.segs {
		if strings.HasPrefix(k, ledger.SegmentPrefix+shard+"/") {
			keys = append(keys, k)
		}
	}
	sortStrings(keys)
	return keys
}

func secondSegment(f *fixture, shard string) string { return segmentsOf(f, shard)[1] }
func lastSegment(f *fixture, shard string) string {
	k := segmentsOf(f, shard)
	return k[len(k)-1]
}

func TestVerifyNamesARewriteTheLedgerSaw(t *testing.T) {
	t.Parallel()
	f := standard(t)
	// Re-sealed in place (same version), and the stream carried it.
	it := record("src#c", 1, "RESOLVED")
	f.pending["shard-2"] = append(f.pending["shard-2"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: "src#c", Item: it, Old: &ledger.Old{Version: 1, Seal: seal("src#c", 1)}})
	f.table["src#c"] = it
	// A hold keeps the version too, and is no rewrite.
	held := record("src#a", 2, "OPEN")
	held["integrity_hold"] = ledger.Str("seal")
	held["integrity_hold_at"] = ledger.Str(f.now.Format(time.RFC3339Nano))
	f.pending["shard-1"] = append(f.pending["shard-1"], ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano),
		Key: "src#a", Item: held, Old: &ledger.Old{Version: 2, Seal: seal("src#a", 2)}})
	f.table["src#a"] = held
	f.flush("shard-1")
	f.flush("shard-2")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.Has(ledger.KindRewritten, "src#c") || len(res.Problems) != 1 {
		t.Fatalf("problems %v, want src#c rewritten only", res.Problems)
	}
}

// A closed shard that later digests no longer name stays anchored by the
// digest that last named it.
func TestVerifyKeepsAShardAnchoredByAnEarlierDigest(t *testing.T) {
	t.Parallel()
	f := standard(t)
	delete(f.heads, "shard-2") // trimmed from the stream: the next digests leave it out
	f.write("shard-1", "src#a", 3)
	f.flush("shard-1")
	f.digest()
	res := ledger.Verify(f.input())
	if !res.OK() || res.Unanchored != 0 || res.LastDigest != 3 {
		t.Fatalf("result %+v, want nothing unanchored", res)
	}
}
