package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The ledger's two functions run this code with one entry point each
// (issue 26): the stream function (StreamEntry) takes only its mapping's
// batches, the digest function (DigestEntry) only {"action":"digest"} and
// {"action":"baseline"}. Whoever may change the digest schedule's target
// (events:PutTargets) can hand the digest function any input; it must
// never ledger a change.

// entryRig is a ledger on which every kind of event, dispatched, would
// read and write: a stream batch (segments, heads), a digest (a digest
// object and head, the mapping read, a canary, metrics), a baseline (a
// table to scan, baseline objects).
type entryRig struct {
	*pipelineRig
	scan *scanState
}

func newEntryRig(t *testing.T) *entryRig {
	t.Helper()
	p := newPipelineRig(t)
	scan := &scanState{memState: p.state, pageSize: 2, items: []dl.Item{{dl.KeyAttr: dl.Str("src#k0"), dl.VersionAttr: dl.Num("1"), dl.SealAttr: dl.Str("s0")}}}
	p.svc.State = scan
	p.svc.OwnMappings = &memMappings{}
	p.s.many("shard-1", 2)
	return &entryRig{pipelineRig: p, scan: scan}
}

// untouched fails unless the refused event made no read and no write of
// any kind: no object read, listed or put, no state written, no table
// scanned, no mapping read, no canary, no metric.
func (e *entryRig) untouched(what string) {
	e.t.Helper()
	e.objects.mu.Lock()
	objs, puts, gets := len(e.objects.objs), e.objects.puts, e.objects.gets
	e.objects.mu.Unlock()
	e.state.mu.Lock()
	writes, heads, digest := e.state.writes, len(e.state.heads), e.state.digest
	e.state.mu.Unlock()
	if objs != 0 || puts != 0 || gets != 0 || writes != 0 || heads != 0 || digest != nil || e.scan.pages != 0 || e.canaries.item != nil || e.emf.Len() != 0 {
		e.t.Fatalf("%s: objects %d (puts %d, gets %d), state writes %d, heads %d, digest head %v, scan pages %d, canary %v, metrics %q: want nothing read or written",
			what, objs, puts, gets, writes, heads, digest, e.scan.pages, e.canaries.item, e.emf.String())
	}
}

// The stream function refuses the digest's and the baseline's events, and
// any other action, before it reads or writes anything.
func TestTheStreamEntryRefusesEveryAction(t *testing.T) {
	t.Parallel()
	realBatch := func(e *entryRig) string {
		raw, err := json.Marshal(batch("shard-1", e.s.recs["shard-1"]))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for name, ev := range map[string]func(*entryRig) string{
		"the schedule's digest":   func(*entryRig) string { return `{"action":"digest"}` },
		"the operator's baseline": func(*entryRig) string { return `{"action":"baseline"}` },
		"another action":          func(*entryRig) string { return `{"action":"sweep"}` },
		"an empty action":         func(*entryRig) string { return `{"action":""}` },
		"a null action":           func(*entryRig) string { return `{"action":null}` },
		"a non-string action":     func(*entryRig) string { return `{"action":{"digest":true}}` },
		// A real batch with an action beside it: the action decides.
		"an action beside a real batch": func(e *entryRig) string {
			return `{"action":"digest",` + strings.TrimPrefix(realBatch(e), "{")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEntryRig(t)
			_, err := e.svc.StreamEntry(context.Background(), json.RawMessage(ev(e)))
			if !errors.Is(err, ErrNotThisEntry) || !strings.Contains(err.Error(), "digest function") {
				t.Fatalf("err = %v, want ErrNotThisEntry pointing at the digest function", err)
			}
			e.untouched(name)
		})
	}
	// The same rig takes a batch of its stream.
	e := newEntryRig(t)
	if resp, err := e.svc.StreamEntry(context.Background(), json.RawMessage(realBatch(e))); err != nil || resp.State == nil || len(e.objects.under(dl.SegmentPrefix)) != 1 {
		t.Fatalf("the stream's batch: %+v %v", resp, err)
	}
}

// forgedTargetInput is what an insider allowed events:PutTargets on the
// digest schedule would set as its target's Input (`aws events
// put-targets --rule <stack>-LedgerDigestSchedule --targets
// '[{"Id":"digest","Arn":"…","Input":"<this>"}]'`): a batch as the stream
// mapping delivers it, naming the stack's own stream and shard (both
// readable by anyone who may describe the table), with a record version
// that was never written to the table. Before the split the ledger
// function took it from any invoker and locked it into a segment.
func forgedTargetInput() string {
	return fmt.Sprintf(`{"Records":[{"eventID":"f00d","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
		`"dynamodb":{"ApproximateCreationDateTime":1796138709,"Keys":{"dlq_id":{"S":"src#forged-1"}},`+
		`"NewImage":{"dlq_id":{"S":"src#forged-1"},"version":{"N":"1"},"seal":{"S":"seal-src#forged-1-1"},"status":{"S":"RESOLVED"}},`+
		`"SequenceNumber":"4100000000000000999900","SizeBytes":120,"StreamViewType":"NEW_AND_OLD_IMAGES"},"eventSourceARN":%q}],`+
		`"shardId":"shard-1","eventSourceARN":%q,"window":{"start":"2026-12-01T10:00:00Z","end":"2026-12-01T10:01:00Z"},"state":{},`+
		`"isFinalInvokeForWindow":false,"isWindowTerminatedEarly":false}`, streamARN, streamARN)
}

// The digest function refuses every stream batch, whatever its shape, and
// reads and writes nothing for it: the forged schedule target above above
// all, which the stream entry (its mapping's batch in form) would ledger.
func TestTheDigestEntryRefusesEveryStreamBatch(t *testing.T) {
	t.Parallel()
	forged := forgedTargetInput()
	// It is a batch the stream function would take: the forgery is
	// realistic, and only the entry point stands in its way.
	e := newEntryRig(t)
	if _, err := e.svc.StreamEntry(context.Background(), json.RawMessage(forged)); err != nil {
		t.Fatalf("the forged batch is not one the stream function takes (%v): the test proves nothing", err)
	}
	segs := e.objects.under(dl.SegmentPrefix)
	if len(segs) != 1 {
		t.Fatalf("%d segments from the forged batch", len(segs))
	}
	for _, raw := range segs {
		if seg, err := dl.ParseSegment(raw); err != nil || len(seg.Entries) != 1 || seg.Entries[0].Key != "src#forged-1" {
			t.Fatalf("the stream entry ledgered %+v (%v)", seg, err)
		}
	}

	realBatch := func(e *entryRig) string {
		raw, err := json.Marshal(batch("shard-1", e.s.recs["shard-1"]))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for name, ev := range map[string]func(*entryRig) string{
		// events.DynamoDBTimeWindowEvent as the mapping delivers it.
		"a batch of the stack's stream": realBatch,
		"the forged schedule target":    func(*entryRig) string { return forged },
		"a shard id alone":              func(*entryRig) string { return `{"shardId":"shard-1"}` },
		"a window's final invoke": func(*entryRig) string {
			return `{"Records":[],"shardId":"shard-1","eventSourceARN":"` + streamARN + `","isFinalInvokeForWindow":true,"state":{}}`
		},
		"records alone":                   func(e *entryRig) string { return `{"Records":` + mustRecords(t, e) + `}` },
		"the forged batch with an action": func(*entryRig) string { return `{"action":"digest",` + strings.TrimPrefix(forged, "{") },
		"a baseline with records":         func(*entryRig) string { return `{"action":"baseline",` + strings.TrimPrefix(forged, "{") },
		"a digest with another member":    func(*entryRig) string { return `{"action":"digest","shard":"shard-1"}` },
		"another action":                  func(*entryRig) string { return `{"action":"ledger"}` },
		"an array of batches":             func(*entryRig) string { return `[` + forged + `]` },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEntryRig(t)
			out, err := e.svc.DigestEntry(context.Background(), json.RawMessage(ev(e)))
			if !errors.Is(err, ErrNotThisEntry) || out != nil {
				t.Fatalf("answer %#v, err %v: want ErrNotThisEntry", out, err)
			}
			e.untouched(name)
		})
	}
	// The same rig signs on the schedule's input and writes no segment.
	e = newEntryRig(t)
	out, err := e.svc.DigestEntry(context.Background(), json.RawMessage(`{"action":"digest"}`))
	if rep, ok := out.(DigestReport); err != nil || !ok || !rep.Written || rep.N != 1 || len(e.objects.under(dl.SegmentPrefix)) != 0 {
		t.Fatalf("the schedule's digest: %#v %v", out, err)
	}
}

func mustRecords(t *testing.T, e *entryRig) string {
	t.Helper()
	raw, err := json.Marshal(e.s.recs["shard-1"])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// A digest function with an event source mapping of its own (a stream or
// a queue attached to it) is a pipeline problem: only its schedule
// invokes it. Not being able to list them is one too.
func TestADigestFunctionWithAMappingIsAPipelineProblem(t *testing.T) {
	t.Parallel()
	p := newPipelineRig(t)
	own := &memMappings{}
	p.svc.OwnMappings = own
	p.s.many("shard-1", 2)
	p.deliver()
	p.digest()
	if v, ok := p.lastMetric(MetricPipelineProblems); !ok || v != 0 {
		t.Fatalf("problems %v %v, want 0 with no mapping on the digest function", v, ok)
	}
	own.ms = []dl.Mapping{{UUID: "u-9", State: dl.MappingEnabled, EventSourceARN: streamARN}}
	p.deliver()
	p.now = p.now.Add(5 * time.Minute)
	p.digest()
	if v, _ := p.lastMetric(MetricPipelineProblems); v != 1 {
		t.Fatalf("problems %v, want 1: the digest function has a mapping", v)
	}
	own.ms, own.err = nil, errors.New("AccessDeniedException")
	p.deliver()
	p.now = p.now.Add(5 * time.Minute)
	p.digest()
	if v, _ := p.lastMetric(MetricPipelineProblems); v != 1 {
		t.Fatalf("problems %v, want 1: the digest function's mappings were not read", v)
	}
	// The stream function's mapping, recorded in every digest, is not
	// confused with the digest function's.
	if d := p.newestDigest(); d.Mapping == nil || len(d.Mapping.Mappings) != 1 || d.Mapping.Mappings[0].UUID != "u-1" {
		t.Fatalf("the digest records %+v, want the stream function's mapping u-1", d.Mapping)
	}
}
