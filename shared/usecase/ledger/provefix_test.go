package ledger

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

var errSlowDown = errors.New("api error SlowDown: Please reduce your request rate (503)")

// Two processes taking turns on one shard with no digest in between: each
// proves the other's segment from the one it proved itself, so the GETs a
// batch costs stay the same however long the chain grows (a walk back to
// the signed digest cost one GET per segment since it).
func TestProofCostStaysFlatAsTheShardGrows(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 80)
	svcs := []*Service{r.svc, r.service("shard-1")}
	var costs []int
	for i := 0; i < len(recs); i += 2 {
		r.objects.mu.Lock()
		before := r.objects.gets
		r.objects.mu.Unlock()
		if _, err := svcs[(i/2)%2].HandleStream(context.Background(), batch("shard-1", recs[i:i+2])); err != nil {
			t.Fatalf("batch %d: %v", i/2, err)
		}
		r.objects.mu.Lock()
		costs = append(costs, r.objects.gets-before)
		r.objects.mu.Unlock()
	}
	t.Logf("GETs per batch: %v", costs)
	for i, c := range costs[2:] {
		if c > costs[1] {
			t.Fatalf("batch %d cost %d GETs, batch 1 %d: the proof grows with the chain (%v)", i+2, c, costs[1], costs)
		}
	}
	r.exact(s)
}

// countingObjects counts the Gets in flight at once.
type countingObjects struct {
	*memObjects
	mu             sync.Mutex
	inFlight, peak int
	gate           chan struct{}
}

func (c *countingObjects) Get(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.mu.Unlock()
	if strings.HasPrefix(key, dl.SegmentPrefix) {
		select { // hold the first GETs until several shards are walking
		case <-c.gate:
		case <-ctx.Done():
		}
	}
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.memObjects.Get(ctx, key)
}

// The digest run proves the shards concurrently: with four shards to
// walk, their first GETs are in flight at once.
func TestDigestProvesShardsConcurrently(t *testing.T) {
	t.Parallel()
	shards := []string{"shard-1", "shard-2", "shard-3", "shard-4"}
	s := newStream()
	r := newRig(t, shards...)
	for _, sh := range shards {
		s.many(sh, 2)
		r.handle(batch(sh, s.recs[sh]))
	}
	c := &countingObjects{memObjects: r.objects, gate: make(chan struct{})}
	svc := r.service(shards...) // cold: every head is walked
	svc.Objects = c
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a sequential walk never opens the gate
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			c.mu.Lock()
			n := c.inFlight
			c.mu.Unlock()
			if n >= len(shards) {
				close(c.gate)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	rep, err := svc.Digest(ctx)
	if err != nil || !rep.Written || rep.Unproven != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if c.peak < len(shards) {
		t.Fatalf("at most %d GETs in flight, want the %d shards walked at once", c.peak, len(shards))
	}
}

// A GET that fails (503 SlowDown) proves nothing: the digest run fails
// (it is retried) without recording an unproven head or publishing one,
// and signs nothing; the stream handler fails the batch without
// rebuilding the head. Once the bucket answers, both go on as before.
func TestAReadErrorIsNoUnprovenHead(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"the head's segment", "the signed head's segment"} {
		t.Run("digest: "+which, func(t *testing.T) {
			t.Parallel()
			_, r, heads := fiveSegments(t)
			key := heads[4].SegmentKey
			if which == "the signed head's segment" {
				key = heads[2].SegmentKey
			}
			r.svc = r.service("shard-1") // cold
			var emf, logs bytes.Buffer
			r.svc.Metrics = &emf
			r.svc.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			r.objects.getErr = func(k string) error {
				if k == key {
					return errSlowDown
				}
				return nil
			}
			r.now = r.now.Add(time.Minute)
			rep, err := r.svc.Digest(context.Background())
			if err == nil || errors.Is(err, dl.ErrChainBroken) || rep.Unproven != 0 {
				t.Fatalf("Digest: %+v, %v; want a read error, nothing unproven", rep, err)
			}
			if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != nil && m[MetricHeadsUnproven] != 0.0 {
				t.Fatalf("emf %s, want %s 0 or none", emf.String(), MetricHeadsUnproven)
			}
			if strings.Contains(logs.String(), "unproven") || strings.Contains(logs.String(), "not in the bucket as signed") {
				t.Fatalf("a read error logged as tampering: %s", logs.String())
			}
			if _, ok := r.objects.under(dl.DigestKey(2))[dl.DigestKey(2)]; ok {
				t.Fatal("digest 2 signed over a head that was not read")
			}
			r.objects.mu.Lock()
			r.objects.getErr = nil
			r.objects.mu.Unlock()
			if rep := r.digest(); !rep.Written || rep.Unproven != 0 || r.parsedDigest(2).Shards[0].SegmentKey != heads[4].SegmentKey {
				t.Fatalf("report %+v, want the head signed once the bucket answers", rep)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		s, r, heads := fiveSegments(t)
		r.svc = r.service("shard-1") // cold: the head is walked
		var emf bytes.Buffer
		r.svc.Metrics = &emf
		failed := false // one 503, then the bucket answers
		r.objects.getErr = func(k string) error {
			if k == heads[3].SegmentKey && !failed {
				failed = true
				return errSlowDown
			}
			return nil
		}
		s.write("shard-1", "src#after", 1)
		puts := r.objects.puts
		if resp, err := r.svc.HandleStream(context.Background(), batch("shard-1", s.recs["shard-1"][10:])); err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("HandleStream: %+v, %v; want the batch failed (retried)", resp, err)
		}
		if h := r.state.heads["shard-1"]; !sameHead(h, heads[4]) || r.objects.puts != puts {
			t.Fatalf("head %+v after a read error, want %+v untouched and nothing written", h, heads[4])
		}
		if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != nil {
			t.Fatalf("emf %s: a read error published as an unproven head", emf.String())
		}
		r.objects.mu.Lock()
		r.objects.getErr = nil
		r.objects.mu.Unlock()
		r.handle(batch("shard-1", s.recs["shard-1"][10:]))
		r.exact(s)
	})
}

// A process's remembered tip is not trusted when the shard moved on: here
// another process wrote a late segment after it (whose key sorts below the
// head's), and the head was rolled back to exactly the remembered value.
// The process finds the successor and writes after it, not beside it.
func TestARememberedTipIsCheckedForASuccessor(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[4:8]))
	first := r.state.heads["shard-1"] // r.svc remembers it
	other := r.service("shard-1")
	if resp, err := other.HandleStream(context.Background(), batch("shard-1", recs[0:4])); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleStream: %+v, %v", resp, err)
	}
	r.afterTheLateSegment(t, s, first)
}

// A head item with oversized strings (a segment key and a last_seq of
// 10 KB, the last_seq no sequence number) goes into the signed digest's
// unproven entry capped, the invalid last_seq left out.
func TestUnprovenEntriesAreCapped(t *testing.T) {
	t.Parallel()
	_, r, heads := fiveSegments(t)
	bad := heads[4]
	bad.SegmentKey = dl.SegmentPrefix + "shard-1/" + strings.Repeat("k", 10000)
	bad.LastSeq = strings.Repeat("x", 10000)
	r.setHead(bad)
	r.now = r.now.Add(time.Minute)
	if rep := r.digest(); !rep.Written || rep.Unproven != 1 {
		t.Fatalf("report %+v, want one unproven head", rep)
	}
	u := r.parsedDigest(2).Unproven[0]
	if len(u.SegmentKey) > maxStored+32 || !strings.HasSuffix(u.SegmentKey, "(truncated)") || u.LastSeq != "" || len(u.Reason) > maxStored+32 {
		t.Fatalf("unproven entry of %d/%d/%d bytes (last_seq %.20q), want each capped and the invalid last_seq left out",
			len(u.SegmentKey), len(u.LastSeq), len(u.Reason), u.LastSeq)
	}
}

// A digest head item rewritten to name a digest the bucket does not hold,
// or with another hash: the run does not halt on it. It goes on from the
// bucket's newest signed digest (digest 1), logs the item as tampering,
// publishes LedgerHeadsUnproven, repairs the item, and signs digest 2
// after digest 1.
func TestDigestRepairsABadDigestHeadItem(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(d *DigestHead){
		"names a missing digest": func(d *DigestHead) { d.N, d.Key = 7, dl.DigestKey(7) },
		"wrong hash":             func(d *DigestHead) { d.SHA256 = strings.Repeat("0", 64) },
		"names a later number":   func(d *DigestHead) { d.N = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, r, heads := fiveSegments(t)
			r.state.mu.Lock()
			good := *r.state.digest
			bad := good
			tamper(&bad)
			r.state.digest = &bad
			r.state.mu.Unlock()
			var emf, logs bytes.Buffer
			r.svc.Metrics = &emf
			r.svc.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			r.now = r.now.Add(time.Minute)
			rep, err := r.svc.Digest(context.Background())
			if err != nil || !rep.Written || rep.N != 2 {
				t.Fatalf("Digest: %+v, %v; want digest 2 written", rep, err)
			}
			d2 := r.parsedDigest(2)
			if d2.Prev == nil || d2.Prev.Key != good.Key || d2.Prev.SHA256 != good.SHA256 || d2.Shards[0].SegmentKey != heads[4].SegmentKey {
				t.Fatalf("digest 2 %+v, want it after digest 1 signing the true head", d2)
			}
			if m := emfMetrics(t, emf.Bytes()); m[MetricHeadsUnproven] != 1.0 {
				t.Fatalf("emf %s, want %s 1", emf.String(), MetricHeadsUnproven)
			}
			if !strings.Contains(logs.String(), "digest head item does not name a digest") {
				t.Fatalf("logs %s, want the item named as tampering", logs.String())
			}
			if got := r.state.digest; got.N != 2 || got.Key != dl.DigestKey(2) {
				t.Fatalf("digest head %+v, want it repaired and moved to digest 2", got)
			}
		})
	}
}

// The stream handler's error for a head it cannot rebuild carries the
// table's strings capped (it is logged).
func TestStreamErrorsCapTableStrings(t *testing.T) {
	t.Parallel()
	s, r, _ := oneShard(t, 2)
	r.setHead(Head{Shard: "shard-1", SegmentKey: dl.SegmentPrefix + "shard-1/" + strings.Repeat("k", 10000), SegmentSHA256: "0",
		Segments: 1, LastSeq: strings.Repeat("9", 30)})
	_, err := r.service("shard-1").HandleStream(context.Background(), batch("shard-1", s.recs["shard-1"]))
	if !errors.Is(err, dl.ErrChainBroken) || len(err.Error()) > 2*maxStored {
		t.Fatalf("HandleStream: %d bytes: %.200v; want a broken chain, capped", len(err.Error()), err)
	}
}
