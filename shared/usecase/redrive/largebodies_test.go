package redrive_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// claimTally is a store that counts the payload of the records claimed and
// not yet marked, released or parked, and the most at once.
type claimTally struct {
	quarantine.Store
	mu          sync.Mutex
	outstanding map[string]int
	now, most   int
}

func (c *claimTally) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	err := c.Store.Replace(ctx, prev, r)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if size, ok := c.outstanding[r.DLQID]; ok && r.Status != quarantine.StatusRedriving {
		c.now -= size
		delete(c.outstanding, r.DLQID)
	}
	if r.Status == quarantine.StatusRedriving && prev.Status != quarantine.StatusRedriving {
		size := len(r.Body)
		if r.BodyRef != nil {
			size = int(r.BodyRef.Size)
		}
		c.outstanding[r.DLQID] = size
		c.now += size
		c.most = max(c.most, c.now)
	}
	return nil
}

// A run holds at most MaxBatchBytes of bodies claimed and not yet sent:
// a batch of large bodies is cut short and the rest go in the next one,
// each record replayed once, a FIFO group in order.
func TestLargeBodiesAreClaimedWithinTheBatchBytes(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			e := newEnv(t, fifo)
			e.src.Schema, e.src.SchemaVersion = nil, "" // any JSON: bodies of 600 KiB
			const n = 40
			if redrive.MaxBatchBytes >= n*600<<10 {
				t.Fatalf("%d bodies of 600 KiB fit in MaxBatchBytes: the test proves nothing", n)
			}
			var ids []string
			for i := range n {
				b := fmt.Sprintf(`{"event_id":"big-%03d","pad":%q}`, i, strings.Repeat("x", 600<<10))
				m := ingest.Message{MessageID: fmt.Sprint("big-", i), Body: []byte(b), SourceARN: e.src.ARN, ReceiveCount: 2}
				if fifo {
					m.MessageGroupID = "one"
				}
				out, err := e.q.Quarantine(context.Background(), m)
				if err != nil {
					t.Fatal(err)
				}
				if out.Record.BodyRef == nil {
					t.Fatal("a 600 KiB body kept in the item")
				}
				ids = append(ids, out.Record.DLQID)
				e.clock.Advance(time.Millisecond)
			}
			e.clock.Advance(time.Second + redrive.IndexSettleGuard)
			tally := &claimTally{Store: e.store, outstanding: map[string]int{}}
			sender := newEntrySender(nil, false)
			rep, err := e.service(sender, tally, redrive.Config{}).Run(context.Background(), e.request(n))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Redriven.Count != n {
				t.Fatalf("redriven %d of %d (failed %d, deferred %d, parked %d, stopped %q)", rep.Redriven.Count, n, rep.Failed.Count, rep.Deferred.Count, rep.Parked.Count, rep.Stopped)
			}
			if tally.most > redrive.MaxBatchBytes+(1<<20) || tally.most < 600<<10 {
				t.Fatalf("%d bytes of bodies claimed and unsent at once, above %d", tally.most, redrive.MaxBatchBytes)
			}
			got := e.drain(t, none)
			if len(got) != n {
				t.Fatalf("%d messages in the source queue for %d records", len(got), n)
			}
			if fifo && strings.Join(sender.order["one"], ",") != strings.Join(ids, ",") {
				t.Fatalf("group order %v, want %v", sender.order["one"], ids)
			}
		})
	}
}

// A FIFO group cut across two batches by MaxBatchBytes keeps its order
// when the first part's last send fails for good: nothing of the group
// after it leaves, in the second batch or later.
func TestAGroupCutByTheBatchBytesWaitsForItsFailedSend(t *testing.T) {
	e := newEnv(t, true)
	e.src.Schema, e.src.SchemaVersion = nil, ""
	const n = 40
	var ids []string
	var versions []int64
	for i := range n {
		b := fmt.Sprintf(`{"event_id":"big-%03d","pad":%q}`, i, strings.Repeat("x", 600<<10))
		out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: fmt.Sprint("big-", i), Body: []byte(b), SourceARN: e.src.ARN, ReceiveCount: 2, MessageGroupID: "one"})
		if err != nil {
			t.Fatal(err)
		}
		ids, versions = append(ids, out.Record.DLQID), append(versions, out.Record.Version)
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(time.Second + redrive.IndexSettleGuard)
	// The first batch is cut where the bodies pass MaxBatchBytes.
	first := 0
	for total := 0; first < n; first++ {
		rec := e.get(t, ids[first])
		if total += int(rec.BodyRef.Size); total > redrive.MaxBatchBytes {
			break
		}
	}
	if first >= n || first >= redrive.DefaultBatchSize {
		t.Fatalf("the first batch is not cut by its bytes (%d records)", first)
	}
	last := ids[first-1] // the first part's last record
	sender := newEntrySender(map[string]bool{last: true}, false)
	rep, err := e.service(sender, e.store, redrive.Config{}).Run(context.Background(), e.request(n))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(sender.order["one"], ","), strings.Join(ids[:first-1], ","); got != want {
		t.Fatalf("group sent %d records, want the %d before the failed one", len(sender.order["one"]), first-1)
	}
	if rep.Redriven.Count != first-1 || rep.Failed.Count != 1 {
		t.Fatalf("redriven %d, failed %d; want %d and 1", rep.Redriven.Count, rep.Failed.Count, first-1)
	}
	// Past the cut nothing was claimed at all (a claim given back would
	// leave the status as it was, a version later): the rest of the ids
	// were the next batch's, which the failed send's block held back.
	for i, id := range ids[first:] {
		if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.Version != versions[first+i] {
			t.Fatalf("%s after the failed send: %s, version %d (was %d)", id, r.Status, r.Version, versions[first+i])
		}
	}
}
