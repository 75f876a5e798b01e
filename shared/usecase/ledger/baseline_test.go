package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// scanState is the rig's state with a table to scan, pageSize items a
// page; failAt, when > 0, fails the scan of that page (1-based), once.
type scanState struct {
	*memState
	items    []dl.Item
	pageSize int
	failAt   int
	pages    int
}

func (s *scanState) ScanLedgered(_ context.Context, after string, page func([]dl.Item, string) error) error {
	start := 0
	if after != "" {
		start = slices.IndexFunc(s.items, func(it dl.Item) bool { return it.S(dl.KeyAttr) == after }) + 1
		if start == 0 {
			return fmt.Errorf("no key %s", after)
		}
	}
	for {
		s.pages++
		if s.pages == s.failAt {
			s.failAt = 0
			return errors.New("the function timed out")
		}
		end := min(start+s.pageSize, len(s.items))
		var ledgered []dl.Item
		for _, it := range s.items[start:end] {
			if dl.Ledgered(it.S(dl.KeyAttr)) {
				ledgered = append(ledgered, it)
			}
		}
		resume := ""
		if end < len(s.items) {
			resume = s.items[end-1].S(dl.KeyAttr)
		}
		if err := page(ledgered, resume); err != nil {
			return err
		}
		if resume == "" {
			return nil
		}
		start = end
	}
}

func baselineRig(t *testing.T, n int) (*rig, *scanState) {
	r := newRig(t, "shard-1")
	st := &scanState{memState: r.state, pageSize: 2}
	for i := range n {
		st.items = append(st.items, dl.Item{dl.KeyAttr: dl.Str(fmt.Sprintf("src#k%d", i)), dl.VersionAttr: dl.Num("3"), dl.SealAttr: dl.Str(fmt.Sprintf("s%d", i))})
	}
	st.items = append(st.items, dl.Item{dl.KeyAttr: dl.Str("#ctr#src#x#0"), "n": dl.Num("1")}) // not ledgered
	r.svc.State = st
	return r, st
}

func (r *rig) verifyWith(items []dl.Item) dl.Result {
	return dl.Verify(dl.Input{Items: items, Segments: r.objects.under(dl.SegmentPrefix), Digests: r.objects.under(dl.DigestPrefix),
		Baselines: r.objects.under(dl.BaselinePrefix), PublicKeyDER: r.signer.der, Now: r.now})
}

func TestBaselineScansOnceAndTheNextDigestNamesIt(t *testing.T) {
	t.Parallel()
	r, st := baselineRig(t, 5)
	rep, err := r.svc.Baseline(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 3 || rep.Items != 5 || !rep.Complete || rep.Key != dl.BaselineKey(3) {
		t.Fatalf("report %+v, want 3 objects of 5 items", rep)
	}
	if got := len(r.objects.under(dl.BaselinePrefix)); got != 3 {
		t.Fatalf("%d baseline objects", got)
	}
	// Once is enough.
	pages := st.pages
	if rep, err := r.svc.Baseline(context.Background()); err != nil || rep.Written != 0 || !rep.Complete || st.pages != pages {
		t.Fatalf("a second run: %+v, %v (scanned %d pages)", rep, err, st.pages-pages)
	}
	r.digest()
	raw := r.objects.objs[dl.DigestKey(1)]
	d, err := dl.ParseDigest(raw)
	if err != nil || d.Baseline == nil || d.Baseline.Key != dl.BaselineKey(3) || d.Baseline.Items != 5 ||
		d.Baseline.SHA256 != dl.SHA256Hex(r.objects.objs[dl.BaselineKey(3)]) {
		t.Fatalf("digest 1 names baseline %+v (%v)", d.Baseline, err)
	}
	res := r.verifyWith(st.items)
	if !res.OK() || len(res.PreLedger) != 5 || res.BaselineUnanchored {
		t.Fatalf("verify %+v", res)
	}
	// Later digests keep naming it.
	r.now = r.now.Add(DefaultDigestMaxAge + 1)
	r.digest()
	if d, err := dl.ParseDigest(r.objects.objs[dl.DigestKey(2)]); err != nil || d.Baseline == nil || d.Baseline.Key != dl.BaselineKey(3) {
		t.Fatalf("digest 2 names baseline %+v (%v)", d.Baseline, err)
	}
	// A rewrite of a baselined item is named.
	items := slices.Clone(st.items)
	items[0] = dl.Item{dl.KeyAttr: dl.Str("src#k0"), dl.VersionAttr: dl.Num("3"), dl.SealAttr: dl.Str("forged")}
	if res := r.verifyWith(items); !res.Has(dl.KindRewritten, "src#k0") {
		t.Fatalf("a rewritten baselined item: %v", res.Problems)
	}
}

func TestBaselineCutShortGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	r, st := baselineRig(t, 7)
	st.failAt = 3
	rep, err := r.svc.Baseline(context.Background())
	if err == nil || rep.Written != 2 || rep.Complete {
		t.Fatalf("a run cut short: %+v, %v", rep, err)
	}
	if res := r.verifyWith(st.items); !res.Has(dl.KindBaseline, dl.BaselinePrefix) {
		t.Fatalf("verify of an incomplete baseline: %v", res.Problems)
	}
	rep, err = r.svc.Baseline(context.Background())
	if err != nil || rep.Written != 2 || !rep.Complete || rep.Items != 7 {
		t.Fatalf("the run that finishes it: %+v, %v", rep, err)
	}
	r.now = r.now.Add(DefaultDigestMaxAge + 1)
	r.digest()
	if res := r.verifyWith(st.items); !res.OK() || len(res.PreLedger) != 7 {
		t.Fatalf("verify %+v", res)
	}
}

// An incomplete baseline is not named by a digest, and once the ledger has
// started (a digest) it cannot be finished: its rest would be scanned after
// the ledger began.
func TestAnIncompleteBaselineIsNotNamedAndNotFinishedLate(t *testing.T) {
	t.Parallel()
	r, st := baselineRig(t, 7)
	st.failAt = 3
	if rep, err := r.svc.Baseline(context.Background()); err == nil || rep.Written != 2 || rep.Complete {
		t.Fatalf("a run cut short: %+v, %v", rep, err)
	}
	r.digest()
	if d, _ := dl.ParseDigest(r.objects.objs[dl.DigestKey(1)]); d.Baseline != nil {
		t.Fatalf("digest 1 names an incomplete baseline %+v", d.Baseline)
	}
	puts := r.objects.puts
	if rep, err := r.svc.Baseline(context.Background()); err == nil || !strings.Contains(err.Error(), "ledger has started") || rep.Written != 0 || r.objects.puts != puts {
		t.Fatalf("finishing a baseline after the ledger's first digest: %+v, %v (%d puts)", rep, err, r.objects.puts-puts)
	}
}

// A baseline is refused once the ledger has started: a segment or a digest
// exists (review 2 R2-4: a late baseline would pass off an item written
// behind the ledger as pre-ledger). A complete baseline still answers.
func TestBaselineRefusedOnceTheLedgerStarted(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(r *rig){
		"a segment": func(r *rig) {
			s := newStream()
			s.many("shard-1", 2)
			r.handle(batch("shard-1", s.recs["shard-1"]))
		},
		"a digest": func(r *rig) { r.digest() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, st := baselineRig(t, 3)
			start(r)
			puts, pages := r.objects.puts, st.pages
			rep, err := r.svc.Baseline(context.Background())
			if err == nil || !strings.Contains(err.Error(), "ledger has started") || rep.Written != 0 || r.objects.puts != puts || st.pages != pages {
				t.Fatalf("a baseline after the ledger started: %+v, %v (%d puts, %d pages)", rep, err, r.objects.puts-puts, st.pages-pages)
			}
			if len(r.objects.under(dl.BaselinePrefix)) != 0 {
				t.Fatal("a refused baseline wrote an object")
			}
		})
	}
	// Taken before the ledger started, it records when it began, and a
	// later run answers that it is complete.
	r, _ := baselineRig(t, 3)
	began := r.now
	r.now = r.now.Add(time.Second)
	r.svc.Now = func() time.Time { n := r.now; r.now = r.now.Add(time.Second); return n }
	if _, err := r.svc.Baseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := dl.ParseBaseline(r.objects.objs[dl.BaselineKey(1)])
	if err != nil || b.At != began.Add(time.Second).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("baseline 1 at %q (%v), want when the run began, %s", b.At, err, began.Add(time.Second))
	}
	r.digest()
	if rep, err := r.svc.Baseline(context.Background()); err != nil || !rep.Complete || rep.Written != 0 {
		t.Fatalf("a run after a complete baseline: %+v, %v", rep, err)
	}
}

func TestDigestEntryDispatchesTheBaselineAction(t *testing.T) {
	t.Parallel()
	r, _ := baselineRig(t, 1)
	out, err := r.svc.DigestEntry(context.Background(), json.RawMessage(`{"action":"baseline"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rep, ok := out.(BaselineReport); !ok || rep.Written != 1 || !rep.Complete {
		t.Fatalf("handler answered %#v", out)
	}
	// Without a table to scan, the action fails loudly.
	r.svc.State = r.state
	if _, err := r.svc.DigestEntry(context.Background(), json.RawMessage(`{"action":"baseline"}`)); err == nil {
		t.Fatal("a baseline without a scanner succeeded")
	}
}
