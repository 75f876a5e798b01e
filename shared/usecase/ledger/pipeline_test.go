package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// memMappings is the function's mappings as ListEventSourceMappings would
// list them (err: the call fails).
type memMappings struct {
	mu  sync.Mutex
	ms  []dl.Mapping
	err error
}

func (m *memMappings) Mappings(context.Context) ([]dl.Mapping, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]dl.Mapping(nil), m.ms...), m.err
}

func (m *memMappings) set(state, uuid, modified string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ms = []dl.Mapping{{UUID: uuid, State: state, LastModified: modified, EventSourceARN: streamARN, StartingPosition: "TRIM_HORIZON"}}
}

// memCanaries is the canary item, with the DynamoDB adapter's condition;
// each applied write becomes a stream record of shard-1 in s. lose makes
// the next applied write's answer an error; refuse refuses the next write.
type memCanaries struct {
	mu     sync.Mutex
	item   *dl.CanaryItem
	s      *stream
	lose   bool
	refuse error
}

func (m *memCanaries) Canary(context.Context) (dl.CanaryItem, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.item == nil {
		return dl.CanaryItem{}, false, nil
	}
	return *m.item, true, nil
}

func (m *memCanaries) WriteCanary(_ context.Context, c dl.CanaryItem, prevN int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuse; err != nil {
		m.refuse = nil
		return err
	}
	if (m.item == nil) != (prevN == 0) || (m.item != nil && m.item.N != prevN) {
		return dl.ErrConflict
	}
	m.s.canary(c, m.item)
	m.item = &c
	if m.lose {
		m.lose = false
		return errLost
	}
	return nil
}

func canaryImage(c dl.CanaryItem) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{"dlq_id": events.NewStringAttribute(dl.CanaryKey),
		dl.CanaryNAttr: events.NewNumberAttribute(strconv.FormatInt(c.N, 10)), dl.CanaryAtAttr: events.NewStringAttribute(c.At.Format(time.RFC3339Nano)),
		dynamostore.CanarySinceAttr: events.NewStringAttribute(c.Since.Format(time.RFC3339Nano))}
}

// canary appends the canary's change on shard-1.
func (s *stream) canary(c dl.CanaryItem, old *dl.CanaryItem) {
	s.seq += 13
	s.at = c.At
	r := events.DynamoDBEventRecord{EventName: dl.EventInsert, EventSourceArn: streamARN, Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"dlq_id": events.NewStringAttribute(dl.CanaryKey)}, SequenceNumber: strconv.FormatInt(s.seq, 10) + "00",
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: s.at}, NewImage: canaryImage(c), StreamViewType: "NEW_AND_OLD_IMAGES"}}
	if old != nil {
		r.EventName, r.Change.OldImage = dl.EventModify, canaryImage(*old)
	}
	s.recs["shard-1"] = append(s.recs["shard-1"], r)
}

// pipelineRig is a rig whose digest runs check the pipeline. delivered
// counts the stream records of shard-1 handed to the ledger so far.
type pipelineRig struct {
	*rig
	s         *stream
	mappings  *memMappings
	canaries  *memCanaries
	emf       *bytes.Buffer
	delivered int
}

func newPipelineRig(t *testing.T) *pipelineRig {
	t.Helper()
	s := newStream()
	p := &pipelineRig{rig: newRig(t, "shard-1"), s: s, mappings: &memMappings{}, canaries: &memCanaries{s: s}, emf: &bytes.Buffer{}}
	p.mappings.set(dl.MappingEnabled, "u-1", "2026-12-01T09:00:00Z")
	s.at = p.now.Add(-time.Minute) // the changes happen as the rig's clock runs
	p.svc.Mappings, p.svc.Canaries, p.svc.Metrics = p.mappings, p.canaries, p.emf
	return p
}

// deliver hands the ledger what shard-1's stream holds since the last
// delivery (the mapping polling it).
func (p *pipelineRig) deliver() {
	p.t.Helper()
	recs := p.s.recs["shard-1"][p.delivered:]
	if len(recs) > 0 {
		p.handle(batch("shard-1", recs))
	}
	p.delivered = len(p.s.recs["shard-1"])
}

// skip drops what shard-1's stream holds since the last delivery: a
// mapping that does not read it (or a new one starting at LATEST).
func (p *pipelineRig) skip() { p.delivered = len(p.s.recs["shard-1"]) }

func (p *pipelineRig) newestDigest() dl.Digest {
	p.t.Helper()
	h, ok, err := p.state.DigestHead(context.Background())
	if err != nil || !ok {
		p.t.Fatalf("no digest head: %v", err)
	}
	d, err := dl.ParseDigest(p.objects.under(dl.DigestPrefix)[h.Key])
	if err != nil {
		p.t.Fatal(err)
	}
	return d
}

func (p *pipelineRig) verify() dl.Result {
	in := dl.Input{Segments: p.objects.under(dl.SegmentPrefix), Digests: p.objects.under(dl.DigestPrefix), PublicKeyDER: p.signer.der, Now: p.now}
	for _, img := range p.s.table {
		it, err := dynamostore.LedgerItemFromStream(img)
		if err != nil {
			p.t.Fatal(err)
		}
		in.Items = append(in.Items, it)
	}
	return dl.Verify(in)
}

// lastMetric is the newest value of a metric in the EMF lines.
func (p *pipelineRig) lastMetric(name string) (float64, bool) {
	var v float64
	found := false
	for _, line := range strings.Split(strings.TrimSpace(p.emf.String()), "\n") {
		var doc map[string]any
		if json.Unmarshal([]byte(line), &doc) == nil {
			if x, ok := doc[name].(float64); ok {
				v, found = x, true
			}
		}
	}
	return v, found
}

func TestDigestRecordsTheMappingAndItsCanaryArrives(t *testing.T) {
	t.Parallel()
	p := newPipelineRig(t)
	p.s.many("shard-1", 4)
	p.deliver()
	rep := p.digest()
	if !rep.Written || rep.Canary != 1 {
		t.Fatalf("report %+v, want digest 1 with canary 1", rep)
	}
	d := p.newestDigest()
	if d.Mapping == nil || len(d.Mapping.Mappings) != 1 || d.Mapping.Mappings[0].UUID != "u-1" || d.Mapping.Mappings[0].State != dl.MappingEnabled ||
		d.Mapping.Mappings[0].EventSourceARN != streamARN || d.Mapping.Error != "" {
		t.Fatalf("digest 1 records the mapping %+v", d.Mapping)
	}
	if d.Canary == nil || d.Canary.N != 1 || d.Canary.At != p.now.Format(time.RFC3339Nano) {
		t.Fatalf("digest 1 records the canary %+v", d.Canary)
	}
	// The canary reaches the ledger: the head records it, and the next
	// runs' lag is only the canary's own wait for its digest (5 minutes).
	for i := range 3 {
		p.deliver()
		if h := p.state.heads["shard-1"]; h.Canary != int64(i+1) {
			t.Fatalf("the head records canary %d, want %d", h.Canary, i+1)
		}
		p.now = p.now.Add(5 * time.Minute)
		if rep := p.digest(); !rep.Written || rep.LagSeconds != 300 || rep.Canary != int64(i+2) {
			t.Fatalf("run %d: report %+v, want a digest, a lag of 300 s, canary %d", i+2, rep, i+2)
		}
		if v, ok := p.lastMetric(MetricPipelineProblems); !ok || v != 0 {
			t.Fatalf("problems metric %v %v, want 0", v, ok)
		}
	}
	p.deliver()
	p.now = p.now.Add(5 * time.Minute)
	p.digest()
	if res := p.verify(); !res.OK() {
		t.Fatalf("verify: %v", res.Problems)
	}
}

func TestAStoppedMappingMakesTheLagGrowAndVerifyNamesIt(t *testing.T) {
	t.Parallel()
	p := newPipelineRig(t)
	p.s.many("shard-1", 2)
	p.deliver()
	p.digest()
	p.deliver()
	p.now = p.now.Add(5 * time.Minute)
	p.digest()
	p.deliver() // canary 2 arrives

	// The mapping is disabled: nothing reaches the ledger. A record is
	// written behind the functions and written back meanwhile.
	p.mappings.set("Disabled", "u-1", "2026-12-01T11:06:00Z")
	p.s.write("shard-1", "src#shard-1-0", 3)
	p.s.write("shard-1", "src#shard-1-0", 4)
	p.skip()
	var off string
	var lags []float64
	for range 5 {
		p.now = p.now.Add(5 * time.Minute)
		rep := p.digest()
		lags = append(lags, rep.LagSeconds)
		if rep.Written {
			off = dl.DigestKey(rep.N)
		}
		if v, ok := p.lastMetric(MetricPipelineProblems); !ok || v != 1 {
			t.Fatalf("problems metric %v %v, want 1 while the mapping is off", v, ok)
		}
		if v, _ := p.lastMetric(MetricAnchoringLag); v != rep.LagSeconds {
			t.Fatalf("lag metric %v, report %v", v, rep.LagSeconds)
		}
		p.skip()
	}
	// The first run's lag is canary 2's wait for its digest; canary 3,
	// written by that run, never arrives, and the lag is its age.
	want := []float64{300, 300, 600, 900, 1200}
	for i := range want {
		if lags[i] != want[i] {
			t.Fatalf("lags %v, want %v (the lag grows while the mapping is off)", lags, want)
		}
	}
	if lags[4] <= 15*60 {
		t.Fatalf("lag %v: LedgerAnchoringLagAlarm (15 minutes) would not fire", lags[4])
	}
	// Re-enabled as a new mapping at LATEST: what was written meanwhile is
	// never read.
	p.mappings.set(dl.MappingEnabled, "u-2", "2026-12-01T11:30:00Z")
	p.mappings.ms[0].StartingPosition = "LATEST"
	for range 2 {
		p.now = p.now.Add(5 * time.Minute)
		p.digest()
		p.deliver()
	}
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.LagSeconds != 300 {
		t.Fatalf("report %+v: the lag is back to a canary's wait once canaries arrive again", rep)
	}
	res := p.verify()
	if off == "" || !res.Has(dl.KindMappingOff, off) {
		t.Fatalf("verify does not name the digest during which the mapping was off (%s): %v", off, res.Problems)
	}
	for _, k := range []dl.Kind{dl.KindMappingRecreated, dl.KindCanaryMissing} {
		found := false
		for _, pr := range res.Problems {
			found = found || pr.Kind == k
		}
		if !found {
			t.Fatalf("verify names no %s: %v", k, res.Problems)
		}
	}
}

func TestADigestRunRecordsWhatItCouldNotCheck(t *testing.T) {
	t.Parallel()
	p := newPipelineRig(t)
	p.s.many("shard-1", 2)
	p.deliver()
	p.mappings.err = errors.New("AccessDeniedException: not authorized to perform lambda:ListEventSourceMappings")
	p.canaries.refuse = errors.New("ProvisionedThroughputExceededException")
	rep := p.digest()
	if !rep.Written || rep.Canary != 0 {
		t.Fatalf("report %+v, want a digest without a canary", rep)
	}
	d := p.newestDigest()
	if d.Mapping == nil || !strings.Contains(d.Mapping.Error, "AccessDenied") || d.Canary != nil {
		t.Fatalf("digest records mapping %+v canary %+v", d.Mapping, d.Canary)
	}
	if v, ok := p.lastMetric(MetricPipelineProblems); !ok || v != 2 {
		t.Fatalf("problems metric %v %v, want 2", v, ok)
	}
	if res := p.verify(); !res.Has(dl.KindMappingUnread, dl.DigestKey(1)) {
		t.Fatalf("verify: %v", res.Problems)
	}

	// A canary write whose answer was lost is recognised as written.
	p.mappings.err = nil
	p.canaries.lose = true
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.Canary != 1 {
		t.Fatalf("report %+v, want canary 1 (its write's answer was lost)", rep)
	}
	if v, _ := p.lastMetric(MetricPipelineProblems); v != 0 {
		t.Fatalf("problems metric %v, want 0", v)
	}
	// The item deleted (a table restored): numbering goes on after the
	// newest canary that arrived, so arrival is never claimed too early.
	p.deliver()
	p.canaries.item = nil
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.Canary != 2 || rep.LagSeconds != 300 {
		t.Fatalf("report %+v, want canary 2 and canary 1's wait (300 s)", rep)
	}
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.Canary != 3 || rep.LagSeconds != 300 {
		t.Fatalf("report %+v, want canary 3, canary 2 waiting 300 s", rep)
	}
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.Canary != 4 || rep.LagSeconds != 600 {
		t.Fatalf("report %+v, want canary 4, canary 2 waiting 600 s", rep)
	}
}

func TestAChangedMappingForcesADigest(t *testing.T) {
	t.Parallel()
	p := newPipelineRig(t)
	p.svc.Canaries = nil // the mapping alone
	p.s.many("shard-1", 2)
	p.deliver()
	p.digestWritten(1, "")
	p.now = p.now.Add(5 * time.Minute)
	if rep := p.digest(); rep.Written {
		t.Fatalf("report %+v: nothing changed, nothing written", rep)
	}
	p.mappings.set("Disabled", "u-1", "2026-12-01T11:04:00Z")
	p.now = p.now.Add(5 * time.Minute)
	p.digestWritten(2, ": the mapping was disabled")
	if res := p.verify(); !res.Has(dl.KindMappingOff, dl.DigestKey(2)) || !res.Has(dl.KindMappingChanged, dl.DigestKey(2)) {
		t.Fatalf("verify: %v", res.Problems)
	}
}
