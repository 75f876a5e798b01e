package ledger_test

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The recount's callbacks for the fixture (the real ones are dynamostore's
// SegmentCounterChunks, StartCounterDeltas, CounterKeyInfo): every entry
// is a chunk of its own that counts 1 in "#ctr#n" (-1 for a REMOVE) and 1
// in its minute's bucket; an item counted before the ledger counts 1 in
// "#ctr#n".
func fakeChunks(seg ledger.Segment) ([][]ledger.CounterDelta, error) {
	var out [][]ledger.CounterDelta
	for _, e := range seg.Entries {
		n := int64(1)
		if e.Event == ledger.EventRemove {
			n = -1
		}
		at, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil {
			return nil, err
		}
		out = append(out, []ledger.CounterDelta{{Key: "#ctr#n", N: n}, {Key: "#ctr#b#" + at.Truncate(time.Minute).Format("2006-01-02T15:04"), N: 1}})
	}
	return out, nil
}

func fakeInfo(key string) (ledger.CounterInfo, bool) {
	switch {
	case key == "#ctr#n":
		return ledger.CounterInfo{}, true
	case key == "#ctr#pol":
		return ledger.CounterInfo{Events: true}, true
	case strings.HasPrefix(key, "#ctr#b#"):
		b, err := time.Parse("2006-01-02T15:04", strings.TrimPrefix(key, "#ctr#b#"))
		return ledger.CounterInfo{Bucket: b, Expires: b.Add(48 * time.Hour), Events: true}, err == nil
	}
	return ledger.CounterInfo{}, false
}

func (f *fixture) counterInput(counters map[string]int64, checkpoints map[string]ledger.CounterPos) ledger.CounterInput {
	return ledger.CounterInput{Segments: f.input().Segments, Baselines: f.input().Baselines, Now: f.now, Counters: counters, Checkpoints: checkpoints,
		CheckpointKey: func(shard string) string { return "#led#ctr#" + shard },
		Chunks:        fakeChunks, Info: fakeInfo,
		Start: func(ledger.Item) ([]ledger.CounterDelta, error) {
			return []ledger.CounterDelta{{Key: "#ctr#n", N: 1}}, nil
		}}
}

// The standard fixture's 7 changes (shard-1: 2, 1 and 2 entries in three
// segments; shard-2: 2 in one), all in the minute of t0.
var minute = "#ctr#b#" + t0.Format("2006-01-02T15:04")

func counted() map[string]ledger.CounterPos {
	return map[string]ledger.CounterPos{"shard-1": {Segment: 3, Chunk: 1, Done: true}, "shard-2": {Segment: 1, Chunk: 1, Done: true}}
}

func TestRecountCountersMatches(t *testing.T) {
	f := standard(t)
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 7, minute: 7}, counted()))
	if len(r.Problems) != 0 || r.Checked != 2 || r.Behind != 0 || r.NotChecked != "" {
		t.Fatalf("%+v", r)
	}
}

// A counter rewritten in the table, and one the ledger never writes, are
// named with both counts.
func TestRecountCountersNamesDrift(t *testing.T) {
	f := standard(t)
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 9, minute: 7, "#ctr#odd": 1}, counted()))
	if !resHas(r.Problems, ledger.KindCounterDrift, "#ctr#n", "count 7 up to the checkpoints, the table holds 9") ||
		!resHas(r.Problems, ledger.KindCounterDrift, "#ctr#odd", "not a counter the ledger writes") || len(r.Problems) != 2 {
		t.Fatalf("%+v", r)
	}
	// A counter the ledger counts that the table lacks.
	r = ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 7}, counted()))
	if !resHas(r.Problems, ledger.KindCounterDrift, minute, "count 7 up to the checkpoints, the table holds 0") || len(r.Problems) != 1 {
		t.Fatalf("%+v", r)
	}
}

// Counting lags the ledger: a checkpoint inside shard-1's third segment
// (its first chunk counted) and none yet on shard-2. The counters as they
// are then are consistent, and the lag is counted.
func TestRecountCountersBehindTheirCheckpoint(t *testing.T) {
	f := standard(t)
	pos := map[string]ledger.CounterPos{"shard-1": {Segment: 3, Chunk: 0}}
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 4, minute: 4}, pos))
	if len(r.Problems) != 0 || r.Checked != 2 || r.Behind != 2 {
		t.Fatalf("%+v", r)
	}
	// The same counters against the checkpoint at the segment's end drift.
	pos["shard-1"] = ledger.CounterPos{Segment: 3, Chunk: 1, Done: true}
	if r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 4, minute: 4}, pos)); !resHas(r.Problems, ledger.KindCounterDrift, "#ctr#n", "count 5") {
		t.Fatalf("%+v", r)
	}
}

// A checkpoint ahead of its chain (or at a chunk its segment lacks) is
// named, and no counter is compared.
func TestRecountCountersNamesACheckpointAheadOfTheChain(t *testing.T) {
	f := standard(t)
	for name, pos := range map[string]ledger.CounterPos{
		"past the head":       {Segment: 4, Chunk: 0, Done: true},
		"past the last chunk": {Segment: 3, Chunk: 5, Done: true},
		"last chunk not done": {Segment: 3, Chunk: 1},
	} {
		cps := counted()
		cps["shard-1"] = pos
		r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 1}, cps))
		if len(r.Problems) != 1 || r.Problems[0].Kind != ledger.KindCounterCheckpoint || r.Problems[0].Subject != "#led#ctr#shard-1" || r.NotChecked == "" {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

// A time bucket past its TTL is not compared (the table may have deleted
// it), and the result says so.
func TestRecountCountersSkipsExpiredBuckets(t *testing.T) {
	f := standard(t)
	f.now = t0.Add(49 * time.Hour)
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 7}, counted()))
	if len(r.Problems) != 0 || r.Checked != 1 || len(r.Unchecked) != 1 || !strings.Contains(r.Unchecked[0].Detail, "1 time-bucket counters past their TTL") {
		t.Fatalf("%+v", r)
	}
}

// A shard whose chain forks is counted by no one exactly: not checked.
func TestRecountCountersNeedsWholeChains(t *testing.T) {
	f := standard(t)
	var first ledger.Segment
	for _, raw := range f.segs {
		if s, _ := ledger.ParseSegment(raw); s.Shard == "shard-1" && s.Prev == nil {
			first = s
		}
	}
	f.write("shard-1", "src#z", 1)
	f.heads["shard-1"].SegmentKey, f.heads["shard-1"].SegmentSHA256 = ledger.SegmentKey("shard-1", first.FirstSeq), ledger.SHA256Hex(f.segs[ledger.SegmentKey("shard-1", first.FirstSeq)])
	f.flush("shard-1") // a second child of the first segment
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 7}, counted()))
	if r.NotChecked == "" || !strings.Contains(r.NotChecked, "forks") || len(r.Problems) != 0 {
		t.Fatalf("%+v", r)
	}
}

// On a table the ledger started on with a baseline, the counters of what
// the table holds start from its items: an untouched one as it is in the
// baseline, a changed one as its first change's old image, one whose
// first ledgered change is its INSERT not at all; counters of events
// before the baseline are not compared.
func TestRecountCountersStartFromTheBaseline(t *testing.T) {
	f := newFixture(t)
	f.table["src#y"] = record("src#y", 3, "OPEN")
	f.baseline([]ledger.Item{record("src#x", 1, "OPEN"), record("src#y", 3, "OPEN"), record("src#z", 1, "OPEN")})
	pos := map[string]ledger.CounterPos{}
	if r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 3}, pos)); r.NotChecked == "" || len(r.Problems) != 0 {
		t.Fatalf("a baseline and no change yet: %+v", r)
	}
	f.write("shard-1", "src#y", 4)
	f.write("shard-1", "src#z", 1) // its INSERT: it was not there before the stream
	f.flush("shard-1")
	f.digest()
	pos["shard-1"] = ledger.CounterPos{Segment: 1, Chunk: 1, Done: true}
	// x and y before the ledger (2), and the two changes.
	r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 4, minute: 2, "#ctr#pol": 5}, pos))
	if len(r.Problems) != 0 || r.Checked != 2 || len(r.Unchecked) != 1 || !strings.Contains(r.Unchecked[0].Detail, "1 counters of events before the baseline") {
		t.Fatalf("%+v", r)
	}
	if r := ledger.RecountCounters(f.counterInput(map[string]int64{"#ctr#n": 2, minute: 2}, pos)); !resHas(r.Problems, ledger.KindCounterDrift, "#ctr#n", "count 4") {
		t.Fatalf("the baseline's items left out of the table's counters: %+v", r)
	}
}

func resHas(ps []ledger.Problem, kind ledger.Kind, subject, detail string) bool {
	for _, p := range ps {
		if p.Kind == kind && p.Subject == subject && strings.Contains(p.Detail, detail) {
			return true
		}
	}
	return false
}

// A segment the recount cannot read again, or whose bytes changed since
// it chained them, is a problem: nothing is compared, and it never passes.
func TestRecountCountersFailsOnAReadThatFails(t *testing.T) {
	for name, read := range map[string]func(b []byte, reads int) ([]byte, error){
		"unreadable": func([]byte, int) ([]byte, error) { return nil, errors.New("gone") },
		"changed": func(b []byte, reads int) ([]byte, error) {
			if reads > 1 {
				return append(bytes.Clone(b), ' '), nil
			}
			return b, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := standard(t)
			in := f.counterInput(map[string]int64{"#ctr#n": 7, minute: 7}, counted())
			segments, reads := in.Segments, map[string]int{}
			in.SegmentKeys = slices.Sorted(maps.Keys(segments))
			in.ReadSegment = func(key string) ([]byte, error) {
				reads[key]++
				if key != in.SegmentKeys[0] {
					return segments[key], nil
				}
				return read(segments[key], reads[key])
			}
			in.Segments = nil
			r := ledger.RecountCounters(in)
			if !slices.ContainsFunc(r.Problems, func(p ledger.Problem) bool { return p.Kind == ledger.KindUnchecked }) || r.NotChecked == "" {
				t.Fatalf("%+v", r)
			}
		})
	}
}

// The counters' recount takes each segment's header from a Verify over
// the same bytes (CounterInput.Headers) and finds what it finds parsing
// every segment itself: with a segment that does not parse, and with one
// whose bytes changed since the Verify read them (a header is of bytes,
// not of a key).
func TestRecountCountersWithAVerifysHeaders(t *testing.T) {
	f := standard(t)
	in := f.counterInput(map[string]int64{"#ctr#n": 7, minute: 7}, counted())
	keys := slices.Sorted(maps.Keys(in.Segments))
	reader := func(segs map[string][]byte) func(string) ([]byte, error) {
		return func(key string) ([]byte, error) { return segs[key], nil }
	}
	recount := func(segs map[string][]byte, h *ledger.SegmentHeaders) ledger.CounterResult {
		c := in
		c.Segments, c.SegmentKeys, c.ReadSegment, c.Headers = nil, keys, reader(segs), h
		return ledger.RecountCounters(c)
	}
	headersOf := func(segs map[string][]byte) *ledger.SegmentHeaders {
		h := ledger.NewSegmentHeaders(in.Chunks)
		_, _ = ledger.VerifyErr(ledger.Input{SegmentKeys: keys, ReadSegment: reader(segs), Headers: h, Partitions: 1, SpillDir: t.TempDir()})
		return h
	}
	whole, broken := in.Segments, maps.Clone(in.Segments)
	broken[keys[0]] = []byte(`{"format":"x"}`)
	if r := recount(whole, nil); len(r.Problems) > 0 || r.Checked == 0 || r.NotChecked != "" || recount(broken, nil).NotChecked == "" {
		t.Fatalf("without headers: %+v; with a segment broken: %+v", r, recount(broken, nil))
	}
	cases := map[string]struct{ verified, recounted map[string][]byte }{
		"same bytes":                             {whole, whole},
		"a segment that does not parse":          {broken, broken},
		"a segment changed since verify read it": {whole, broken},
		"a segment mended since verify read it":  {broken, whole},
	}
	check := func(what string) {
		t.Helper()
		for name, c := range cases {
			if got, want := recount(c.recounted, headersOf(c.verified)), recount(c.recounted, nil); !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %s: with a Verify's headers %+v, without %+v", what, name, got, want)
			}
		}
	}
	check("counted")
	// A segment that does not count: the same answer from the headers.
	in.Chunks = func(s ledger.Segment) ([][]ledger.CounterDelta, error) {
		if s.Shard == "shard-2" {
			return nil, errors.New("not countable")
		}
		return fakeChunks(s)
	}
	if r := recount(whole, nil); r.NotChecked == "" || !strings.Contains(r.NotChecked, "not countable") {
		t.Fatalf("a segment that does not count: %+v", r)
	}
	check("a segment that does not count")

	// The deltas are those of the segment as read, old images included
	// (the counters count a MODIFY's old item), and a segment they count
	// is read once, to hash it.
	g := newFixture(t)
	g.oldItems = true
	g.write("shard-1", "src#a", 1)
	g.write("shard-1", "src#a", 2)
	g.flush("shard-1")
	g.write("shard-1", "src#a", 3)
	g.flush("shard-1")
	in = g.counterInput(map[string]int64{"#ctr#n": 3}, map[string]ledger.CounterPos{"shard-1": {Segment: 2, Chunk: 0, Done: true}})
	in.Chunks = func(s ledger.Segment) ([][]ledger.CounterDelta, error) {
		var olds []ledger.CounterDelta
		for _, e := range s.Entries {
			if e.OldItem != nil {
				olds = append(olds, ledger.CounterDelta{Key: "#ctr#n", N: 10})
			}
		}
		return [][]ledger.CounterDelta{olds}, nil
	}
	whole = in.Segments
	keys = slices.Sorted(maps.Keys(whole))
	var reads int
	counting := func(key string) ([]byte, error) { reads++; return whole[key], nil }
	c := in
	c.Segments, c.SegmentKeys, c.ReadSegment = nil, keys, counting
	want := ledger.RecountCounters(c)
	if !resHas(want.Problems, ledger.KindCounterDrift, "#ctr#n", "count 20") {
		t.Fatalf("the old images uncounted: %+v", want)
	}
	reads, c.Headers = 0, headersOf(whole)
	if got := ledger.RecountCounters(c); !reflect.DeepEqual(got, want) || reads != len(keys) {
		t.Fatalf("with a Verify's headers %+v (%d reads of %d segments), without %+v", got, reads, len(keys), want)
	}
}
