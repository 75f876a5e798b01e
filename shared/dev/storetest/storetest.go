// Package storetest is the contract every quarantine.Store and
// quarantine.PayloadStore must meet. The same tests run against the
// in-memory twins and against the real adapters on the embedded stack.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Record returns a sealed, valid first-version record with a unique id.
func Record(t testing.TB, id string) *quarantine.Record {
	t.Helper()
	now := quarantine.At(time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC))
	r := &quarantine.Record{
		DLQID: "src#" + id, Source: "src", SourceARN: "arn:aws:sqs:us-east-1:000000000000:src",
		IdempotencyKey: id, KeyOrigin: quarantine.KeyFromAttribute,
		Status: quarantine.StatusQuarantined, StatusSince: now,
		FailureClass: quarantine.ClassExhausted, FailureSignature: "consumer|retries exhausted|v#",
		FailureStage: "consumer", FailureReason: "retries exhausted",
		Body: `{"a":"é"}`, BodyEncoding: quarantine.EncodingUTF8, BodySHA256: quarantine.BodySHA256([]byte(`{"a":"é"}`)), BodySize: 10,
		Attributes: map[string]quarantine.Attribute{
			"s": {DataType: "String", StringValue: "v"},
			"b": {DataType: "Binary", BinaryValue: []byte{0, 1, 255}},
			"n": {DataType: "Number", StringValue: "12345678901234567890"},
		},
		SentTimestamp: 1764400000123, ReceiveCount: 5, TraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793",
		Attempts:     []quarantine.Attempt{{At: now, Stage: "consumer", Reason: "retries exhausted", MessageID: "m-" + id, Actor: "ingest", ReceiveCount: 5}},
		AttemptCount: 1, FirstSeen: now, LastSeen: now, RedriveCap: 3, Version: 1,
	}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

var seq atomic.Int64

// UniqueID returns an id unique in this process, since emulator state is shared.
func UniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), seq.Add(1))
}

// RunStore runs the Store contract against s.
func RunStore(t *testing.T, s quarantine.Store) {
	ctx := context.Background()

	t.Run("create then get round-trips and verifies", func(t *testing.T) {
		t.Parallel()
		r := Record(t, UniqueID("rt"))
		lease := quarantine.At(r.FirstSeen.Add(time.Minute))
		r.LeaseUntil = &lease
		r.BodyRef = &quarantine.ObjectRef{Bucket: "b", Key: "k", VersionID: "v1", SHA256: r.BodySHA256, Size: r.BodySize}
		r.Body = ""
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, r.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		if err := quarantine.Verify(got); err != nil {
			t.Fatalf("stored record does not verify: %v", err)
		}
		if got.Seal != r.Seal {
			t.Fatalf("seal changed in the store")
		}
	})

	t.Run("create twice is ErrExists", func(t *testing.T) {
		t.Parallel()
		r := Record(t, UniqueID("dup"))
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, r); !errors.Is(err, quarantine.ErrExists) {
			t.Fatalf("second create = %v", err)
		}
	})

	t.Run("get missing is ErrNotFound", func(t *testing.T) {
		t.Parallel()
		if _, err := s.Get(ctx, "src#"+UniqueID("missing")); !errors.Is(err, quarantine.ErrNotFound) {
			t.Fatalf("get = %v", err)
		}
	})

	t.Run("replace needs the expected version", func(t *testing.T) {
		t.Parallel()
		r := Record(t, UniqueID("ver"))
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		next, err := r.Arrive(quarantine.Attempt{At: quarantine.At(r.FirstSeen.Add(time.Second)), Stage: "s", Reason: "r", MessageID: "m2", Actor: "ingest"},
			quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "s", Reason: "r", Signature: "s|r|"}, 20, r.FirstSeen.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stale := r.Clone()
		stale.Version += 5
		if err := s.Replace(ctx, stale, next); !errors.Is(err, quarantine.ErrVersionConflict) {
			t.Fatalf("stale replace = %v", err)
		}
		if err := s.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, r.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		if err := quarantine.VerifyChain(r, got); err != nil {
			t.Fatal(err)
		}
		// A replay of the very write already stored is that write, applied
		// (a retried request whose answer was lost), not a conflict; any
		// other successor of the same version is.
		if err := s.Replace(ctx, r, next); err != nil {
			t.Fatalf("replay of the same replace = %v, want nil: the store holds exactly this write", err)
		}
		other, err := r.Arrive(quarantine.Attempt{At: quarantine.At(r.FirstSeen.Add(2 * time.Second)), Stage: "s", Reason: "r", MessageID: "m3", Actor: "ingest"},
			quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "s", Reason: "r", Signature: "s|r|"}, 20, r.FirstSeen.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Replace(ctx, r, other); !errors.Is(err, quarantine.ErrVersionConflict) {
			t.Fatalf("another successor of the same version = %v, want ErrVersionConflict", err)
		}
		same := next.Clone()
		same.WriteID = quarantine.NewWriteID()
		if err := quarantine.SealRecord(same); err != nil {
			t.Fatal(err)
		}
		if err := s.Replace(ctx, r, same); !errors.Is(err, quarantine.ErrVersionConflict) {
			t.Fatalf("the same content by another writer = %v, want ErrVersionConflict", err)
		}
	})

	t.Run("get many", func(t *testing.T) {
		t.Parallel()
		var ids []string
		for range 130 {
			r := Record(t, UniqueID("many"))
			if err := s.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.DLQID)
		}
		got, err := s.GetMany(ctx, append(ids, "src#"+UniqueID("absent")))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ids) {
			t.Fatalf("got %d records, want %d", len(got), len(ids))
		}
		for _, id := range ids {
			if err := quarantine.Verify(got[id]); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("concurrent creates have one winner", func(t *testing.T) {
		t.Parallel()
		id := UniqueID("race")
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Create(ctx, Record(t, id))
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, quarantine.ErrExists) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d winners", wins.Load())
		}
	})
}

// RunPayloads runs the PayloadStore contract against p. tamper overwrites
// the object behind a reference, to prove reads check the hash.
func RunPayloads(t *testing.T, p quarantine.PayloadStore, tamper func(t *testing.T, ref quarantine.ObjectRef, data []byte)) {
	ctx := context.Background()
	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		data := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<16)
		ref, err := p.PutPayload(ctx, "bodies/src/"+UniqueID("p"), data)
		if err != nil {
			t.Fatal(err)
		}
		if ref.SHA256 != quarantine.BodySHA256(data) || ref.Size != int64(len(data)) {
			t.Fatalf("ref = %+v", ref)
		}
		got, err := p.GetPayload(ctx, ref)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %v", err)
		}
	})
	t.Run("tampered object is rejected", func(t *testing.T) {
		t.Parallel()
		ref, err := p.PutPayload(ctx, "bodies/src/"+UniqueID("t"), []byte("original"))
		if err != nil {
			t.Fatal(err)
		}
		tamper(t, ref, []byte("tampered"))
		if _, err := p.GetPayload(ctx, quarantine.ObjectRef{Bucket: ref.Bucket, Key: ref.Key, SHA256: ref.SHA256}); !errors.Is(err, quarantine.ErrPayloadMismatch) {
			t.Fatalf("get tampered = %v", err)
		}
	})
	// A key is written once: the same bytes again (a redelivery) reuse the
	// stored object and its version, so a version a record pins is never
	// made noncurrent (the payload bucket expires noncurrent versions).
	t.Run("same bytes again reuse the object", func(t *testing.T) {
		t.Parallel()
		key, data := "bodies/src/"+UniqueID("w"), bytes.Repeat([]byte("once"), 1<<14)
		first, err := p.PutPayload(ctx, key, data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := p.PutPayload(ctx, key, data)
		if err != nil || again != first {
			t.Fatalf("second put = %+v %v, want %+v", again, err, first)
		}
		if got, err := p.GetPayload(ctx, first); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %v", err)
		}
	})
	t.Run("a key holding other bytes is refused", func(t *testing.T) {
		t.Parallel()
		key := "bodies/src/" + UniqueID("o")
		ref, err := p.PutPayload(ctx, key, []byte("original"))
		if err != nil {
			t.Fatal(err)
		}
		tamper(t, ref, []byte("tampered"))
		if got, err := p.PutPayload(ctx, key, []byte("original")); !errors.Is(err, quarantine.ErrPayloadMismatch) {
			t.Fatalf("put over other bytes = %+v %v", got, err)
		}
	})
	{
		// The sweeper deletes a record's objects once it is archived
		// (ingest then uploads nothing for the record). A put of the key
		// after the delete may store the bytes again (S3 over a delete
		// marker; the in-memory twin) or fail (versitygw answers 412 over
		// a delete marker and HeadObject 404): it never returns a
		// reference that does not read back.
		t.Run("put after delete", func(t *testing.T) {
			t.Parallel()
			key := "bodies/src/" + UniqueID("d")
			ref, err := p.PutPayload(ctx, key, []byte("data"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.DeletePayload(ctx, ref); err != nil {
				t.Fatal(err)
			}
			again, err := p.PutPayload(ctx, key, []byte("data"))
			if err != nil {
				t.Logf("put after delete refused: %v", err)
				return
			}
			if got, err := p.GetPayload(ctx, again); err != nil || string(got) != "data" {
				t.Fatalf("get after delete and put: %q %v", got, err)
			}
		})
	}
}

// RunLister runs the Lister contract: l must list what s stores.
func RunLister(t *testing.T, s quarantine.Store, l quarantine.Lister) {
	ctx := context.Background()
	source := UniqueID("lsrc")
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 7 {
		r := Record(t, UniqueID("l"))
		r.Source = source
		r.DLQID = source + "#" + r.IdempotencyKey
		// Deliberately out of order, and sub-second, to test the sort key.
		r.FirstSeen = quarantine.At(base.Add(time.Duration((i*5)%7) * 1500 * time.Millisecond))
		switch i {
		case 5:
			r.Status = quarantine.StatusParked
		case 6:
			r.FailureClass = quarantine.ClassValidation
		}
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			want = append(want, r.DLQID)
		}
	}
	// Expected order: by first_seen.
	byID := map[string]time.Time{}
	for _, id := range want {
		r, _ := s.Get(ctx, id)
		byID[id] = r.FirstSeen.Time
	}
	slices.SortFunc(want, func(a, b string) int { return byID[a].Compare(byID[b]) })

	list := func(q quarantine.ListQuery) []string {
		var got []string
		for {
			page, err := l.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.IDs...)
			if page.Cursor == "" {
				return got
			}
			q.Cursor = page.Cursor
		}
	}
	q := quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Classes: []quarantine.Class{quarantine.ClassExhausted}, Limit: 2}
	if got := list(q); !slices.Equal(got, want) {
		t.Fatalf("List = %v\nwant %v", got, want)
	}
	q.FirstSeenFrom, q.FirstSeenTo = byID[want[1]], byID[want[3]]
	if got := list(q); !slices.Equal(got, want[1:4]) {
		t.Fatalf("List in window = %v\nwant %v", got, want[1:4])
	}
	q = quarantine.ListQuery{Status: quarantine.StatusParked, Source: source}
	if got := list(q); len(got) != 1 {
		t.Fatalf("parked = %v", got)
	}
	q = quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Signatures: []string{"nope|x|"}}
	if got := list(q); len(got) != 0 {
		t.Fatalf("signature filter = %v", got)
	}
}

// CounterReader reads counter shards (memstore.Store, dynamostore.Store).
type CounterReader interface {
	ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// SignatureReader lists a source's open records by signature.
type SignatureReader interface {
	OpenSignatures(ctx context.Context, source string) (map[string]int64, error)
}

// StateCount sums a status × class counter over its shards.
func StateCount(t testing.TB, cr CounterReader, source string, st quarantine.Status, c quarantine.Class) int64 {
	t.Helper()
	return sumShards(t, cr, func(shard int) quarantine.CounterKey { return quarantine.StateCounterKey(source, st, c, shard) })
}

// sumShards reads the counter whose shard keys key names and sums them.
func sumShards(t testing.TB, cr CounterReader, key func(shard int) quarantine.CounterKey) int64 {
	t.Helper()
	var keys []quarantine.CounterKey
	for shard := range quarantine.CounterShards {
		keys = append(keys, key(shard))
	}
	got, err := cr.ReadCounters(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range got {
		n += v
	}
	return n
}

// RunCounters drives concurrent arrivals, re-failures, claims, sends,
// settles and parks through s, then compares every counter with a full
// recount of the records (read back through l).
func RunCounters(t *testing.T, s quarantine.Store, l quarantine.Lister, cr CounterReader, sr SignatureReader) {
	ctx := context.Background()
	source := UniqueID("csrc")
	src := &quarantine.Source{Name: source, ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, IdempotencyPointer: "/k", RedriveCap: 2}
	q := quarantine.NewQuarantiner(s, nil, nil, quarantine.Config{Sources: map[string]*quarantine.Source{source: src}})
	reasons := []string{"timeout", "db down", "bad lot"}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				key := fmt.Sprintf("k%d", (w*7+i)%40) // keys shared between workers
				reason := reasons[(w+i)%len(reasons)]
				m := quarantine.Message{MessageID: fmt.Sprintf("m-%d-%d", w, i), SourceARN: src.ARN, Body: []byte(`{"k":"` + key + `"}`),
					Attributes: map[string]quarantine.Attribute{quarantine.AttrFailureReason: {DataType: "String", StringValue: reason}}}
				out, err := q.Quarantine(ctx, m)
				if err != nil {
					t.Error(err)
					return
				}
				// Move the record along, as redrive, settle and operators do.
				for attempt := 0; attempt < 5; attempt++ {
					r, err := s.Get(ctx, out.Record.DLQID)
					if err != nil {
						t.Error(err)
						return
					}
					now := time.Now()
					var next *quarantine.Record
					switch {
					case r.Status == quarantine.StatusQuarantined && (w+i)%3 == 0:
						next, err = r.Claim("w", now, time.Minute)
						if errors.Is(err, quarantine.ErrCapReached) {
							next, err = r.ParkPoison("w", now)
						}
					case r.Status == quarantine.StatusRedriving:
						next, err = r.MarkRedriven("w", "sent", now)
					case r.Status == quarantine.StatusRedriven && i%2 == 0:
						next, err = r.Settle(now, 0)
					default:
						attempt = 5
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					if err := s.Replace(ctx, r, next); err != nil && !errors.Is(err, quarantine.ErrVersionConflict) {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()

	// Full recount.
	type sc struct {
		st quarantine.Status
		c  quarantine.Class
	}
	want := map[sc]int64{}
	wantOpen := map[string]int64{}
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		lq := quarantine.ListQuery{Status: st, Source: source}
		for {
			page, err := l.List(ctx, lq)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range page.IDs {
				r, err := s.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				want[sc{r.Status, r.FailureClass}]++
				if r.Status == quarantine.StatusQuarantined {
					wantOpen[r.FailureSignature]++
				}
			}
			if page.Cursor == "" {
				break
			}
			lq.Cursor = page.Cursor
		}
	}
	total := int64(0)
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			got := StateCount(t, cr, source, st, c)
			total += got
			if got != want[sc{st, c}] {
				t.Errorf("counter %s/%s = %d, recount %d", st, c, got, want[sc{st, c}])
			}
		}
	}
	if total != 40 {
		t.Errorf("counters total %d records, want 40", total)
	}
	open, err := sr.OpenSignatures(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != len(wantOpen) {
		t.Errorf("open signatures %v, recount %v", open, wantOpen)
	}
	for sig, n := range wantOpen {
		if open[sig] != n {
			t.Errorf("open %q = %d, recount %d", sig, open[sig], n)
		}
	}
}

// Tamper changes a stored record's item directly, behind the store: no
// seal, no version bump, no counters (someone with write access to the
// table).
type Tamper func(t *testing.T, id string, change func(*quarantine.Record))

// HeldCount sums a source's integrity-hold counter over its shards.
func HeldCount(t testing.TB, cr CounterReader, source string) int64 {
	t.Helper()
	return sumShards(t, cr, func(shard int) quarantine.CounterKey { return quarantine.HeldCounterKey(source, shard) })
}

// RunHold runs the integrity-hold contract: a tampered record is held at
// the version found, exactly as found, counted once, left out of listings
// (but listed with Held), and never overwritten.
func RunHold(t *testing.T, s quarantine.Store, l quarantine.Lister, cr CounterReader, tamper Tamper) {
	ctx := context.Background()
	source := UniqueID("hsrc")
	base := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 3 {
		r := Record(t, UniqueID("h"))
		r.Source, r.DLQID = source, source+"#"+r.IdempotencyKey
		r.FirstSeen = quarantine.At(base.Add(time.Duration(i) * time.Second))
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.DLQID)
	}
	forged := ids[0]
	tamper(t, forged, func(r *quarantine.Record) { r.FailureClass, r.RedriveCount = quarantine.ClassValidation, 0 })
	found, err := s.Get(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(found); quarantine.HoldReason(err) != "seal_mismatch" {
		t.Fatalf("tampered record verifies: %v", err)
	}
	if _, err := found.Claim("ops", base, time.Minute); !quarantine.IsIntegrityFailure(err) {
		t.Fatalf("claim of a tampered record = %v, want a seal error", err)
	}

	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: ids[1], Version: found.Version + 7, Reason: "seal_mismatch", At: base}); !errors.Is(err, quarantine.ErrVersionConflict) {
		t.Fatalf("hold of another version = %v", err)
	}
	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: source + "#nope", Version: 1, Reason: "seal_mismatch", At: base}); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatalf("hold of a missing record = %v", err)
	}
	for range 2 { // the second is a no-op
		if err := s.Hold(ctx, quarantine.IntegrityHold{ID: forged, Version: found.Version, Reason: quarantine.HoldReason(quarantine.Verify(found)), At: base}); err != nil {
			t.Fatalf("hold: %v", err)
		}
	}
	if n := HeldCount(t, cr, source); n != 1 {
		t.Fatalf("held counter = %d, want 1", n)
	}
	after, err := s.Get(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if after.Seal != found.Seal || after.Version != found.Version || after.FailureClass != quarantine.ClassValidation || quarantine.Verify(after) == nil {
		t.Fatalf("the hold changed the evidence: %+v", after)
	}

	list := func(q quarantine.ListQuery) []string {
		var got []string
		for {
			page, err := l.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.IDs...)
			if page.Cursor == "" {
				return got
			}
			q.Cursor = page.Cursor
		}
	}
	if got := list(quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Limit: 1}); !slices.Equal(got, ids[1:]) {
		t.Fatalf("listing = %v, want %v (the held record left out)", got, ids[1:])
	}
	if got := list(quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Held: true}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("held listing = %v, want %v", got, ids[:1])
	}

	// Even a correctly sealed successor never overwrites a held record.
	succ := after.Clone()
	succ.Version, succ.PrevSeal, succ.Status = after.Version+1, after.Seal, quarantine.StatusParked
	if err := quarantine.SealRecord(succ); err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, after, succ); !errors.Is(err, quarantine.ErrHeld) {
		t.Fatalf("replace of a held record = %v, want ErrHeld", err)
	}
	if again, _ := s.Get(ctx, forged); again.Seal != found.Seal || again.Status != quarantine.StatusQuarantined {
		t.Fatalf("held record overwritten: %+v", again)
	}
	if n := HeldCount(t, cr, source); n != 1 {
		t.Fatalf("held counter = %d after the refused write, want 1", n)
	}
}
