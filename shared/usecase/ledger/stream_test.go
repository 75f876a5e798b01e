package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func TestBatchesChainPerShard(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.many("shard-1", 10)
	s.many("shard-2", 4)
	r := newRig(t, "shard-1", "shard-2")
	for i := 0; i < 10; i += 3 {
		r.handle(batch("shard-1", s.recs["shard-1"][i:min(i+3, 10)]))
	}
	r.handle(batch("shard-2", s.recs["shard-2"]))
	r.exact(s)
	if h := r.state.heads["shard-1"]; h.Segments != 4 || h.PendingSince.IsZero() {
		t.Fatalf("head %+v, want 4 segments, pending", h)
	}
}

func TestARepeatedOrOverlappingBatchLedgersEachChangeOnce(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 8)
	r.handle(batch("shard-1", recs[:5]))
	r.handle(batch("shard-1", recs[:5]))
	r.handle(batch("shard-1", append(recs[3:8:8], recs[4]))) // overlapping, out of order, one twice
	r.exact(s)
	if n := len(r.objects.under(dl.SegmentPrefix)); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
}

func TestABatchOfNothingLedgeredWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.write("shard-1", "#ctr#src#state#OPEN#x#1", 1)
	s.write("shard-1", "#led#head#shard-1", 1)
	r := newRig(t, "shard-1")
	counts := &countsFake{}
	r.svc.Counts = counts
	r.handle(batch("shard-1", s.recs["shard-1"]))
	r.handle(batch("shard-1", nil)) // a window's final invoke
	if r.objects.puts != 0 || r.state.writes != 0 || counts.calls != 0 {
		t.Fatalf("%d puts, %d state writes, %d count calls; want none", r.objects.puts, r.state.writes, counts.calls)
	}
}

// The answer of a write was lost although the write was applied.
func TestAppliedButAnswerLost(t *testing.T) {
	t.Parallel()
	t.Run("segment PUT", func(t *testing.T) {
		t.Parallel()
		s, r, recs := oneShard(t, 6)
		once := true
		r.objects.afterPut = func(string) error {
			if once {
				once = false
				return errLost
			}
			return nil
		}
		resp := r.handle(batch("shard-1", recs[:4]))
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != recs[0].Change.SequenceNumber {
			t.Fatalf("failures %+v, want from the first record", resp.BatchItemFailures)
		}
		r.handle(batch("shard-1", recs[:4])) // Lambda delivers it again
		r.handle(batch("shard-1", recs[4:]))
		r.exact(s)
	})
	t.Run("head update", func(t *testing.T) {
		t.Parallel()
		s, r, recs := oneShard(t, 6)
		once := true
		r.state.afterAdvance = func() error {
			if once {
				once = false
				return errLost
			}
			return nil
		}
		if resp := r.handle(batch("shard-1", recs[:4])); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %+v: the head read back is the update's", resp.BatchItemFailures)
		}
		r.handle(batch("shard-1", recs[4:]))
		r.exact(s)
	})
}

// A crash after the segment PUT and before the head update, then the
// deliveries Lambda can make next.
func TestCrashBetweenSegmentAndHead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		after func(r *rig, recs []events.DynamoDBEventRecord)
	}{
		{"the same batch retried", func(r *rig, recs []events.DynamoDBEventRecord) {
			r.handle(batch("shard-1", recs[2:8]))
		}},
		{"the batch bisected", func(r *rig, recs []events.DynamoDBEventRecord) {
			r.handle(batch("shard-1", recs[2:5]))
			r.handle(batch("shard-1", recs[5:8]))
		}},
		{"a batch starting in the middle", func(r *rig, recs []events.DynamoDBEventRecord) {
			r.handle(batch("shard-1", recs[5:10]))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, r, recs := oneShard(t, 10)
			r.handle(batch("shard-1", recs[:2]))
			crash := true
			r.state.failAdvance = func() error {
				if crash {
					crash = false
					return errors.New("the process died")
				}
				return nil
			}
			if resp := r.handle(batch("shard-1", recs[2:8])); len(resp.BatchItemFailures) == 0 {
				t.Fatal("the crashed batch was acknowledged")
			}
			c.after(r, recs)
			r.handle(batch("shard-1", recs[8:]))
			r.exact(s)
		})
	}
}

func TestASegmentThatDoesNotChainIsAnError(t *testing.T) {
	t.Parallel()
	_, r, recs := oneShard(t, 4)
	r.handle(batch("shard-1", recs[:2]))
	// Someone else's segment after the head, chained to nothing.
	e, err := r.svc.entry(change{rec: recs[2], padded: ""})
	if err != nil {
		t.Fatal(err)
	}
	seg, _ := dl.NewSegment(streamARN, "shard-1", nil, []dl.Entry{e})
	raw, _ := seg.Encode()
	r.objects.objs[dl.SegmentKey("shard-1", seg.FirstSeq)] = raw
	_, err = r.svc.HandleStream(context.Background(), batch("shard-1", recs[2:]))
	if !errors.Is(err, dl.ErrChainBroken) {
		t.Fatalf("err = %v, want ErrChainBroken", err)
	}
}

func TestMalformedEventsAreRefused(t *testing.T) {
	t.Parallel()
	_, r, recs := oneShard(t, 2)
	noShard := batch("", recs)
	if _, err := r.svc.HandleStream(context.Background(), noShard); err == nil || !strings.Contains(err.Error(), "shard id") {
		t.Fatalf("no shard id: %v", err)
	}
	other := batch("shard-1", recs)
	other.EventSourceARN = "arn:aws:dynamodb:us-east-1:000000000000:table/other/stream/x"
	if _, err := r.svc.HandleStream(context.Background(), other); err == nil {
		t.Fatal("a batch of another stream was ledgered")
	}
	bad := batch("shard-1", recs)
	bad.Records[1].Change.SequenceNumber = "12x"
	if _, err := r.svc.HandleStream(context.Background(), bad); err == nil {
		t.Fatal("a bad sequence number was accepted")
	}
	noImage := batch("shard-1", recs)
	noImage.Records[0].Change.NewImage = nil
	resp, err := r.svc.HandleStream(context.Background(), noImage)
	if err == nil && len(resp.BatchItemFailures) == 0 {
		t.Fatal("an INSERT without its image was ledgered")
	}
	if r.objects.puts != 0 {
		t.Fatalf("%d objects written from bad events", r.objects.puts)
	}
}

// countsFake counts segments as dynamostore.Counts does: in chain order,
// each once (a segment out of order is an error).
type countsFake struct {
	calls   int
	fail    error
	seqs    []string
	counted map[string]int64
}

func (c *countsFake) Counted(_ context.Context, shard string) (int64, error) {
	c.calls++
	if c.fail != nil {
		return 0, c.fail
	}
	return c.counted[shard], nil
}

func (c *countsFake) Count(_ context.Context, shard string, n int64, seg dl.Segment) error {
	c.calls++
	if c.fail != nil {
		return c.fail
	}
	if c.counted == nil {
		c.counted = map[string]int64{}
	}
	switch {
	case n <= c.counted[shard]:
		return nil
	case n != c.counted[shard]+1:
		return fmt.Errorf("segment %d counted after %d", n, c.counted[shard])
	}
	for _, e := range seg.Entries {
		if dynamostore.IsRecordKey(e.Key) {
			c.seqs = append(c.seqs, e.Seq)
		}
	}
	c.counted[shard] = n
	return nil
}

func TestCountsGetTheLedgeredChangesAndTheirFailureRetriesTheBatch(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.many("shard-1", 3)
	s.write("shard-1", "#ctr#x", 1)
	r := newRig(t, "shard-1")
	counts := &countsFake{fail: errors.New("throttled")}
	r.svc.Counts = counts
	recs := s.recs["shard-1"]
	resp := r.handle(batch("shard-1", recs))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != recs[0].Change.SequenceNumber {
		t.Fatalf("failures %+v, want the whole batch again", resp.BatchItemFailures)
	}
	counts.fail = nil
	if resp := r.handle(batch("shard-1", recs)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if len(counts.seqs) != 3 {
		t.Fatalf("counts got %v, want the 3 record changes", counts.seqs)
	}
	s.recs["shard-1"] = recs[:3]
	r.exact(s)
}

// Late changes are counted once they are ledgered, and a crash between a
// segment's PUT and its counting is caught up by the next batch, which
// counts the segments after the checkpoint (read back from the bucket).
func TestCountsFollowTheChainIncludingLateChanges(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 10)
	counts := &countsFake{}
	r.svc.Counts = counts
	r.handle(batch("shard-1", recs[4:8]))
	r.handle(batch("shard-1", recs[0:4])) // late
	counts.fail = errors.New("the process died before counting")
	if resp := r.handle(batch("shard-1", recs[8:9])); len(resp.BatchItemFailures) == 0 {
		t.Fatal("a counting failure reported as done")
	}
	counts.fail = nil
	// A fresh instance (no cached segments) gets the next batch.
	r.svc = r.service("shard-1")
	r.svc.Counts = counts
	r.handle(batch("shard-1", recs[9:10]))
	r.handle(batch("shard-1", recs))
	got := slices.Clone(counts.seqs)
	slices.SortFunc(got, dl.SeqCompare)
	var want []string
	for _, rec := range recs {
		want = append(want, rec.Change.SequenceNumber)
	}
	if !slices.Equal(got, want) || counts.counted["shard-1"] != 4 {
		t.Fatalf("counted %v (%d segments),\nwant each of %v once", counts.seqs, counts.counted["shard-1"], want)
	}
	r.exact(s)
}
