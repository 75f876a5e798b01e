package ledger_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// pipelineDigest signs the fixture's next digest with what its run saw of
// the mapping and the canary it wrote (nil: the member is absent).
func (f *fixture) pipelineDigest(seen *ledger.MappingSeen, canary *ledger.CanaryRef) string {
	f.t.Helper()
	key := f.digestWith(func(d *ledger.Digest) { d.Mapping, d.Canary = seen, canary })
	if back, err := ledger.ParseDigest(f.digests[key]); err != nil || back.Mapping == nil != (seen == nil) || back.Canary == nil != (canary == nil) {
		f.t.Fatalf("the digest's pipeline members do not read back: %+v %v", back, err)
	}
	return key
}

// canary writes canary n on shard (not yet flushed) and returns it as the
// digest records it.
func (f *fixture) canary(shard string, n int64) *ledger.CanaryRef {
	e := ledger.Entry{Seq: f.nextSeq(), Event: ledger.EventModify, At: f.now.Format(time.RFC3339Nano), Key: ledger.CanaryKey,
		Item: ledger.Item{"dlq_id": ledger.Str(ledger.CanaryKey), ledger.CanaryNAttr: ledger.Num(strconv.FormatInt(n, 10)), ledger.CanaryAtAttr: ledger.Str(f.now.Format(time.RFC3339Nano))}}
	if n == 1 {
		e.Event = ledger.EventInsert
	}
	f.pending[shard] = append(f.pending[shard], e)
	return &ledger.CanaryRef{N: n, At: f.now.Format(time.RFC3339Nano)}
}

func enabled(uuid, modified string) *ledger.MappingSeen {
	return &ledger.MappingSeen{Mappings: []ledger.Mapping{{UUID: uuid, State: ledger.MappingEnabled, LastModified: modified, EventSourceARN: arn, StartingPosition: "TRIM_HORIZON"}}}
}

// run is one digest run of a healthy pipeline: the canary written by the
// run before arrived (on shard-1) with a record change, and the digest
// records this run's canary.
func (f *fixture) run(seen *ledger.MappingSeen, n int64, arrived bool) string {
	f.t.Helper()
	if arrived && n > 1 {
		f.canary("shard-1", n-1)
	}
	f.write("shard-1", "src#a", n)
	f.flush("shard-1")
	f.now = f.now.Add(5 * time.Minute)
	c := &ledger.CanaryRef{N: n, At: f.now.Format(time.RFC3339Nano)}
	return f.pipelineDigest(seen, c)
}

func TestVerifyMappingAndCanaries(t *testing.T) {
	t.Parallel()
	const lm = "2026-12-01T09:00:00Z"
	healthy := func(t *testing.T) *fixture {
		f := newFixture(t)
		for n := int64(1); n <= 3; n++ {
			f.run(enabled("u-1", lm), n, true)
		}
		return f
	}
	t.Run("a healthy pipeline is clean", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		f.run(enabled("u-1", lm), 4, true)
		f.canary("shard-1", 4)
		f.flush("shard-1")
		f.now = f.now.Add(5 * time.Minute)
		f.pipelineDigest(enabled("u-1", lm), &ledger.CanaryRef{N: 5, At: f.now.Format(time.RFC3339Nano)})
		// Canary 5 arrives after the newest digest: a canary is no
		// record's version and no change waiting for its digest.
		f.canary("shard-1", 5)
		f.flush("shard-1")
		res := ledger.Verify(f.input())
		if !res.OK() || res.Entries != 4 || res.Unanchored != 0 {
			t.Fatalf("%v: %d versions, %d not anchored; want 4 (src#a's) and 0", res.Problems, res.Entries, res.Unanchored)
		}
	})
	t.Run("older digests without the members are accepted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.write("shard-1", "src#a", 1)
		f.flush("shard-1")
		f.pipelineDigest(nil, nil)
		f.write("shard-1", "src#a", 2)
		f.flush("shard-1")
		f.now = f.now.Add(5 * time.Minute)
		f.pipelineDigest(enabled("u-1", lm), &ledger.CanaryRef{N: 1, At: f.now.Format(time.RFC3339Nano)})
		if res := ledger.Verify(f.input()); !res.OK() {
			t.Fatalf("%v", res.Problems)
		}
	})
	for _, c := range []struct {
		name  string
		seen  *ledger.MappingSeen
		kind  ledger.Kind
		other string // a second mapping's state, when set
	}{
		{"disabled", &ledger.MappingSeen{Mappings: []ledger.Mapping{{UUID: "u-1", State: "Disabled", LastModified: lm, EventSourceARN: arn}}}, ledger.KindMappingOff, ""},
		{"disabling", &ledger.MappingSeen{Mappings: []ledger.Mapping{{UUID: "u-1", State: "Disabling", LastModified: lm, EventSourceARN: arn}}}, ledger.KindMappingOff, ""},
		{"none", &ledger.MappingSeen{Mappings: []ledger.Mapping{}}, ledger.KindMappingOff, ""},
		{"re-created", &ledger.MappingSeen{Mappings: []ledger.Mapping{{UUID: "u-2", State: ledger.MappingEnabled, LastModified: lm, EventSourceARN: arn, StartingPosition: "LATEST"}}}, ledger.KindMappingRecreated, ""},
		{"updated", enabled("u-1", "2026-12-01T10:12:00Z"), ledger.KindMappingChanged, ""},
		{"another stream", &ledger.MappingSeen{Mappings: []ledger.Mapping{{UUID: "u-1", State: ledger.MappingEnabled, LastModified: lm, EventSourceARN: arn + "x"}}}, ledger.KindMappingStream, ""},
		{"two mappings", &ledger.MappingSeen{Mappings: []ledger.Mapping{enabled("u-1", lm).Mappings[0], {UUID: "u-9", State: ledger.MappingEnabled, LastModified: lm, EventSourceARN: arn}}}, ledger.KindMappingChanged, ""},
		{"unreadable", &ledger.MappingSeen{Mappings: []ledger.Mapping{}, Error: "AccessDeniedException"}, ledger.KindMappingUnread, ""},
		{"absent after present", nil, ledger.KindMappingUnread, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := healthy(t)
			key := f.run(c.seen, 4, true)
			f.run(enabled("u-1", lm), 5, true)
			res := ledger.Verify(f.input())
			if !res.Has(c.kind, key) {
				t.Fatalf("want %s at %s: %v", c.kind, key, res.Problems)
			}
			for _, p := range res.Problems {
				if p.Subject != key && p.Kind != ledger.KindMappingRecreated && p.Kind != ledger.KindMappingChanged {
					t.Errorf("another problem: %v", p)
				}
			}
		})
	}
	t.Run("a canary that never arrived", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		key := f.run(enabled("u-1", lm), 4, true)
		// Canary 4 never reaches the ledger (the mapping skipped it), 5 does.
		f.run(enabled("u-1", lm), 5, false)
		for n := int64(6); n <= 9; n++ { // digests signed more than CanaryGrace after it
			f.run(enabled("u-1", lm), n, true)
		}
		f.named(ledger.KindCanaryMissing, key, "canary 4")
	})
	t.Run("a canary that arrived late is no problem", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		f.run(enabled("u-1", lm), 4, true)
		// Canary 4 is not in the ledger at digest 5, 5 minutes later (a
		// shard held by a retried batch): late, within CanaryGrace.
		f.run(enabled("u-1", lm), 5, false)
		if res := ledger.Verify(f.input()); !res.OK() {
			t.Fatalf("a canary 5 minutes late named: %v", res.Problems)
		}
		f.canary("shard-1", 4)
		for n := int64(6); n <= 9; n++ {
			f.run(enabled("u-1", lm), n, true)
		}
		if res := ledger.Verify(f.input()); !res.OK() {
			t.Fatalf("a late canary named: %v", res.Problems)
		}
	})
	t.Run("a mapping re-created across a digest that could not read it", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		unread := f.run(&ledger.MappingSeen{Error: "ThrottlingException"}, 4, true)
		key := f.run(enabled("u-2", lm), 5, true)
		f.named(ledger.KindMappingUnread, unread, "could not read")
		f.named(ledger.KindMappingRecreated, key, "replaced u-1")
	})
	t.Run("a canary no digest records, between two that do", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		// Canary 4 was written by a run that signed no digest (its digest
		// failed); canary 5's run records 5, and neither 4 nor 5 arrives
		// before 6.
		f.write("shard-1", "src#a", 4)
		f.flush("shard-1")
		f.now = f.now.Add(10 * time.Minute)
		f.pipelineDigest(enabled("u-1", lm), &ledger.CanaryRef{N: 5, At: f.now.Format(time.RFC3339Nano)})
		f.canary("shard-1", 5)
		for n := int64(6); n <= 9; n++ { // digests signed more than CanaryGrace after it
			f.run(enabled("u-1", lm), n, true)
		}
		f.named(ledger.KindCanaryMissing, ledger.CanaryPrefix+"4", "canary 4")
	})
	t.Run("the newest canary is not due yet", func(t *testing.T) {
		t.Parallel()
		f := healthy(t)
		f.canary("shard-1", 3)
		f.flush("shard-1")
		f.now = f.now.Add(time.Minute) // a digest a minute after canary 4: not due
		f.pipelineDigest(enabled("u-1", lm), &ledger.CanaryRef{N: 4, At: f.now.Format(time.RFC3339Nano)})
		f.now = f.now.Add(30 * time.Second)
		f.pipelineDigest(enabled("u-1", lm), nil)
		if res := ledger.Verify(f.input()); !res.OK() {
			t.Fatalf("%v", res.Problems)
		}
	})
}
