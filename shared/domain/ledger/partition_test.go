package ledger_test

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// streamed is in read as streams (Input.ReadSegment, ScanItems) and checked
// in n partitions spilled under dir.
func streamed(in ledger.Input, n int, dir string) ledger.Input {
	segments, items := in.Segments, in.Items
	in.SegmentKeys = slices.Sorted(maps.Keys(segments))
	in.ReadSegment = func(key string) ([]byte, error) {
		b, ok := segments[key]
		if !ok {
			return nil, fmt.Errorf("no segment %s", key)
		}
		return b, nil
	}
	in.ScanItems = func(yield func(ledger.Item) error) error {
		for _, it := range items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	}
	in.Segments, in.Items, in.Partitions, in.SpillDir = nil, nil, n, dir
	return in
}

// crossCheck is a cross-item check that says what it was given: each
// key's kinds named, its version before, and how many keys and versions.
func crossCheck(keys []ledger.KeyHistory) ([]ledger.Problem, []ledger.Note) {
	var ps []ledger.Problem
	var ns []ledger.Note
	total := 0
	for i, k := range keys {
		total += len(k.Versions)
		if len(k.Named) > 0 {
			ns = append(ns, ledger.Note{Subject: k.Key, Detail: fmt.Sprint(k.Named)})
		}
		if i > 0 && keys[i-1].Key >= k.Key {
			ps = append(ps, ledger.Problem{Kind: "order", Subject: k.Key})
		}
		if k.BeforeUnknown {
			ns = append(ns, ledger.Note{Subject: k.Key, Detail: "before unknown"})
		}
		if k.Before != nil {
			ns = append(ns, ledger.Note{Subject: k.Key, Detail: "before " + k.Before.S("seal")})
		}
	}
	ns = append(ns, ledger.Note{Subject: "(total)", Detail: fmt.Sprint(len(keys), total)})
	return ps, ns
}

// A partitioned run of Verify, its input read as streams, finds what one
// run in memory finds, problem for problem, note for note and count for
// count, in 2, 3, 7 or 64 partitions: on 60 random ledgers of 40 records
// and policies over 3 shards, with baselines, writer proofs (some missing,
// unverified or forged), the cross-item check, and tampering (items
// rewritten, deleted, invented, repeated or changed within the grace;
// segments dropped).
func TestPartitionedRunsFindWhatOneRunFinds(t *testing.T) {
	t.Parallel()
	problems := 0
	for seed := int64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		f := newFixture(t)
		shards := []string{"shard-1", "shard-2", "shard-3"}
		nkeys := 40
		ver := map[string]int64{}
		var ids []string
		for i := range nkeys {
			id := fmt.Sprintf("src#k%03d", i)
			if i%9 == 0 {
				id = fmt.Sprintf("#pol#src#p%03d", i)
			}
			ids = append(ids, id)
		}
		// baseline of some keys
		if seed%3 == 0 {
			var items []ledger.Item
			for _, id := range ids[:10] {
				it := record(id, 1, "OPEN")
				f.table[id] = it
				ver[id] = 1
				items = append(items, it)
			}
			f.baseline(items)
		}
		for round := 0; round < 6; round++ {
			for _, id := range ids {
				if r.Intn(3) == 0 {
					continue
				}
				sh := shards[r.Intn(len(shards))]
				ver[id]++
				f.writeProved(sh, id, ver[id], []string{"ok", "ok", "ok", "", "offline", "forged"}[r.Intn(6)])
			}
			for _, sh := range shards {
				if len(f.pending[sh]) > 0 {
					f.flush(sh)
				}
			}
			if r.Intn(2) == 0 {
				if round == 2 {
					f.proofDigest()
				} else {
					f.digest()
				}
			}
		}
		in := f.input()
		in.CheckWriter = writerCheck
		in.CheckAll = crossCheck
		in.Grace = time.Minute
		// tamper
		for i := 0; i < 6; i++ {
			switch r.Intn(7) {
			case 0: // rewrite a table item
				k := r.Intn(len(in.Items))
				it := ledger.Item{}
				for a, v := range in.Items[k] {
					it[a] = v
				}
				it["payload"] = ledger.Str("x")
				in.Items[k] = it
			case 1: // delete a table item
				k := r.Intn(len(in.Items))
				in.Items = append(in.Items[:k], in.Items[k+1:]...)
			case 2: // add an unledgered item
				in.Items = append(in.Items, record(fmt.Sprintf("src#new%d", i), 1, "OPEN"))
			case 3: // drop a segment
				keys := slices.Sorted(func(y func(string) bool) {
					for k := range in.Segments {
						if !y(k) {
							return
						}
					}
				})
				delete(in.Segments, keys[r.Intn(len(keys))])
			case 4: // non-ledgered item
				in.Items = append(in.Items, ledger.Item{"dlq_id": ledger.Str("#ctr#x"), "n": ledger.Num("3")})
			case 5: // duplicate an item in the table scan
				in.Items = append(in.Items, in.Items[r.Intn(len(in.Items))])
			case 6: // pending item: newer version not ledgered, recent
				k := r.Intn(len(in.Items))
				old := in.Items[k]
				v, _ := old.Int("version")
				it := record(old.S("dlq_id"), v+1, "OPEN")
				it["last_seen"] = ledger.Str(f.now.Format(time.RFC3339Nano))
				in.Items[k] = it
			}
		}
		want := ledger.Verify(in)
		problems += len(want.Problems)
		for _, n := range []int{2, 3, 7, 64} {
			got, err := ledger.VerifyErr(streamed(in, n, t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("seed %d, %d partitions:\nin one run:    %+v\nin partitions: %+v", seed, n, want, got)
			}
		}
	}
	if problems < 100 {
		t.Fatalf("the ledgers had %d problems in all: the tampering did not reach the checks", problems)
	}
}
