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
		next := arrival(t, r, "m2", r.FirstSeen.Add(time.Second))
		// A write conditioned on a version the store does not hold (here
		// v2, which was never stored) conflicts.
		ahead := arrival(t, next, "m4", r.FirstSeen.Add(3*time.Second))
		if err := s.Replace(ctx, next, ahead); !errors.Is(err, quarantine.ErrVersionConflict) {
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
		other := arrival(t, r, "m3", r.FirstSeen.Add(2*time.Second))
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
		// prev and next swapped: refused before anything is written, never
		// read back as "applied" (the store holds the very record passed
		// as next).
		if err := s.Replace(ctx, next, r); err == nil {
			t.Fatal("Replace(next, prev) succeeded")
		}
		if got, err := s.Get(ctx, r.DLQID); err != nil || !quarantine.SameVersion(got, next) {
			t.Fatalf("after a swapped replace the store holds %v (%v), want v%d as written", got, err, next.Version)
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
		ref := mustPut(t, p, "bodies/src/"+UniqueID("p"), data)
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
		ref := mustPut(t, p, "bodies/src/"+UniqueID("t"), []byte("original"))
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
		first := mustPut(t, p, key, data)
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
		ref := mustPut(t, p, key, []byte("original"))
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
			ref := mustPut(t, p, key, []byte("data"))
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
		r := editedIn(t, source, "l", func(r *quarantine.Record) {
			// Deliberately out of order, and sub-second, to test the sort key.
			r.FirstSeen = quarantine.At(base.Add(time.Duration((i*5)%7) * 1500 * time.Millisecond))
			switch i {
			case 5:
				r.Status = quarantine.StatusParked
			case 6:
				r.FailureClass = quarantine.ClassValidation
			}
		})
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

	q := quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Classes: []quarantine.Class{quarantine.ClassExhausted}, Limit: 2}
	if got := listIDs(t, l, q); !slices.Equal(got, want) {
		t.Fatalf("List = %v\nwant %v", got, want)
	}
	q.FirstSeenFrom, q.FirstSeenTo = byID[want[1]], byID[want[3]]
	if got := listIDs(t, l, q); !slices.Equal(got, want[1:4]) {
		t.Fatalf("List in window = %v\nwant %v", got, want[1:4])
	}
	q = quarantine.ListQuery{Status: quarantine.StatusParked, Source: source}
	if got := listIDs(t, l, q); len(got) != 1 {
		t.Fatalf("parked = %v", got)
	}
	q = quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: source, Signatures: []string{"nope|x|"}}
	if got := listIDs(t, l, q); len(got) != 0 {
		t.Fatalf("signature filter = %v", got)
	}
}

// listIDs is every id q selects through l, page after page.
// arrival is prev after one more exhausted arrival of message messageID
// at at.
func arrival(t *testing.T, prev *quarantine.Record, messageID string, at time.Time) *quarantine.Record {
	t.Helper()
	next, err := prev.Arrive(quarantine.Attempt{At: quarantine.At(at), Stage: "s", Reason: "r", MessageID: messageID, Actor: "ingest"},
		quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "s", Reason: "r", Signature: "s|r|"}, 20, at)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func listIDs(t *testing.T, l quarantine.Lister, q quarantine.ListQuery) []string {
	t.Helper()
	ids, err := quarantine.ListIDs(context.Background(), l, q)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// mustPut stores data under key through p.
func mustPut(t *testing.T, p quarantine.PayloadStore, key string, data []byte) quarantine.ObjectRef {
	t.Helper()
	ref, err := p.PutPayload(context.Background(), key, data)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
