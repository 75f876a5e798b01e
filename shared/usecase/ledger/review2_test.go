package ledger

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// An Invoke that is not the mapping (no eventSourceARN, a sequence number
// far above the stream's) is ledgered like a stream batch; the genuine
// changes that follow are then refused.
func TestReview2ForgedInvokeIsLedgeredAndHaltsTheShard(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 2)
	r.handle(batch("shard-1", recs[:1]))

	forged := newStream()
	forged.seq = 9000000000000000000 // far above the stream's
	forged.write("shard-1", "src#victim", 1)
	ev := batch("shard-1", forged.recs["shard-1"])
	ev.EventSourceARN = ""
	for i := range ev.Records {
		ev.Records[i].EventSourceArn = ""
	}
	resp, err := r.svc.HandleStream(context.Background(), ev)
	if err == nil && len(resp.BatchItemFailures) == 0 {
		t.Errorf("a batch with no eventSourceARN (not the mapping's) was accepted and ledgered")
	}
	resp, err = r.svc.HandleStream(context.Background(), batch("shard-1", recs[1:]))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the genuine next batch: failures %v, err %v", resp.BatchItemFailures, err)
	}
	r.exact(s)
}

// Every way a batch can fail to be the mapping's is a function error that
// names why, and writes nothing.
func TestForgedBatchesAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	const other = "arn:aws:dynamodb:us-east-1:000000000000:table/other/stream/x"
	cases := map[string]struct {
		shard string
		edit  func(ev *eventEdit)
		want  string
	}{
		"no event arn":        {"shard-1", func(e *eventEdit) { e.arn = "" }, "eventSourceARN"},
		"other event arn":     {"shard-1", func(e *eventEdit) { e.arn = other }, "not the ledger's stream"},
		"a record without":    {"shard-1", func(e *eventEdit) { e.recARN[1] = "" }, "record 1"},
		"a record of another": {"shard-1", func(e *eventEdit) { e.recARN[0] = other }, "record 0"},
		"unknown shard":       {"shard-9", func(*eventEdit) {}, "not a shard of the stream"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, r, recs := oneShard(t, 2)
			ev := batch(c.shard, recs)
			e := &eventEdit{arn: ev.EventSourceARN, recARN: map[int]string{}}
			for i := range ev.Records {
				e.recARN[i] = ev.Records[i].EventSourceArn
			}
			c.edit(e)
			ev.EventSourceARN = e.arn
			for i := range ev.Records {
				ev.Records[i].EventSourceArn = e.recARN[i]
			}
			resp, err := r.svc.HandleStream(context.Background(), ev)
			if err == nil || !strings.Contains(err.Error(), c.want) || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("err %v (want one naming %q), failures %v", err, c.want, resp.BatchItemFailures)
			}
			if r.objects.puts != 0 || r.state.writes != 0 {
				t.Fatalf("a refused batch wrote %d objects, %d items", r.objects.puts, r.state.writes)
			}
		})
	}
}

type eventEdit struct {
	arn    string
	recARN map[int]string
}

// growingShards is a stream whose shard listing grows (a split) and that
// counts its DescribeStream listings.
type growingShards struct {
	mu     sync.Mutex
	shards map[string]string
	calls  int
}

func (g *growingShards) Shards(context.Context) (map[string]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	out := map[string]string{}
	for k, v := range g.shards {
		out[k] = v
	}
	return out, nil
}

func (g *growingShards) add(id, parent string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shards[id] = parent
}

// The listing is cached: batches of known shards do not list again; a new
// shard is found by listing once more.
func TestShardListingIsCachedAndRelistedOnAMiss(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.many("shard-1", 4)
	s.many("shard-2", 2)
	r := newRig(t, "shard-1")
	g := &growingShards{shards: map[string]string{"shard-1": ""}}
	r.svc.Shards = g
	r.handle(batch("shard-1", s.recs["shard-1"][:2]))
	r.handle(batch("shard-1", s.recs["shard-1"][2:]))
	if g.calls != 1 {
		t.Fatalf("two batches of a known shard listed the stream %d times, want 1", g.calls)
	}
	g.add("shard-2", "shard-1")
	r.handle(batch("shard-2", s.recs["shard-2"]))
	if g.calls != 2 {
		t.Fatalf("a new shard listed the stream %d times in all, want 2", g.calls)
	}
	if _, err := r.svc.HandleStream(context.Background(), batch("shard-3", s.recs["shard-2"])); err == nil {
		t.Fatal("an unlisted shard was accepted")
	}
	if g.calls != 3 {
		t.Fatalf("an unknown shard listed the stream %d times in all, want 3 (once more)", g.calls)
	}
	r.exact(s)
}

// The final invoke of a tumbling window may carry no record (and the
// event's window fields only): it writes nothing and succeeds, with a
// state, so that Lambda does not hold the shard.
func TestAnEmptyFinalInvokeSucceedsAndWritesNothing(t *testing.T) {
	r := newRig(t, "shard-1")
	for _, ev := range []events.DynamoDBTimeWindowEvent{
		{TimeWindowProperties: events.TimeWindowProperties{ShardID: "shard-1", IsFinalInvokeForWindow: true}},
		{TimeWindowProperties: events.TimeWindowProperties{IsFinalInvokeForWindow: true}},
	} {
		resp, err := r.svc.HandleStream(context.Background(), ev)
		if err != nil || resp.State == nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("empty final invoke: %+v %v", resp, err)
		}
	}
	if n := len(r.objects.objs); n != 0 {
		t.Fatalf("an empty invoke wrote %d objects", n)
	}
}
