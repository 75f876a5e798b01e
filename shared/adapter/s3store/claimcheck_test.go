package s3store_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

type claimEnv struct {
	f     *s3fake.S3
	p     *s3store.Store
	store *memstore.Store
	q     *ingest.Quarantiner
	k     quarantine.Corrector
	src   *quarantine.Source
}

func newClaimEnv(t *testing.T) *claimEnv {
	t.Helper()
	// No schema: any JSON passes the gate, so large notes can be corrections.
	src := &quarantine.Source{
		Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", DLQName: "inventory-dlq",
		IdempotencyPointer: "/event_id", RedriveCap: 3,
	}
	e := &claimEnv{f: s3fake.New(t0, 7), store: memstore.New(), src: src}
	e.p = s3store.New(e.f, bucket, "")
	e.q = ingest.NewQuarantiner(e.store, e.p, e.f.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
	e.k = quarantine.Corrector{Store: e.store, Payloads: e.p, Now: e.f.Now, Sources: map[string]*quarantine.Source{src.Name: src}}
	return e
}

func inv(id, note string) []byte {
	return []byte(`{"event_id":"` + id + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-01T10:00:00Z","note":"` + note + `"}`)
}

func (e *claimEnv) arrive(t *testing.T, msgID string, body []byte, attrs map[string]quarantine.Attribute) ingest.Outcome {
	t.Helper()
	out, err := e.q.Quarantine(context.Background(), ingest.Message{
		MessageID: msgID, Body: body, Attributes: attrs, SourceARN: e.src.ARN,
		DLQARN: "arn:aws:sqs:us-east-1:000000000000:inventory-dlq", ReceiveCount: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every claim-check object holds one version, so none is noncurrent.
func (e *claimEnv) onlyCurrentVersions(t *testing.T) {
	t.Helper()
	keys := e.f.Keys(bucket)
	if len(keys) == 0 {
		t.Fatal("nothing was claim-checked")
	}
	for _, k := range keys {
		if vs := e.f.Versions(bucket, k); len(vs) != 1 {
			t.Errorf("%s has %d versions: a pinned one can become noncurrent and expire", k, len(vs))
		}
	}
}

// Issue 14 item 1: a body over 128 KiB and an oversized attribute set,
// delivered again (a duplicate delivery under another message id, a replay
// that comes back) and corrected with large bodies (one correction body
// repeated), are all still readable and verified after the payload
// bucket's lifecycle rule ran 8 days later. Before the fix every arrival
// uploaded again, the version the record pins became noncurrent and the
// rule expired it.
func TestClaimCheckSurvivesRedeliveryAndLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newClaimEnv(t)
	body := inv("ev-big", strings.Repeat("b", 200<<10))
	attrs := map[string]quarantine.Attribute{"blob": {DataType: "String", StringValue: strings.Repeat("a", 40<<10)}}
	first := e.arrive(t, "m1", body, attrs)
	if first.Result != ingest.ResultCreated || first.Record.BodyRef == nil || first.Record.AttributesRef == nil {
		t.Fatalf("first arrival: %s, body ref %v, attributes ref %v", first.Result, first.Record.BodyRef, first.Record.AttributesRef)
	}
	id := first.Record.DLQID
	e.f.Advance(day)
	if out := e.arrive(t, "m2", body, attrs); out.Result != ingest.ResultAppended {
		t.Fatalf("duplicate delivery under another id: %s", out.Result)
	}
	e.f.Advance(day)
	comeback := map[string]quarantine.Attribute{
		"blob":                      attrs["blob"],
		quarantine.AttrRecordID:     {DataType: "String", StringValue: id},
		quarantine.AttrRedriveCount: {DataType: "Number", StringValue: "1"},
	}
	if out := e.arrive(t, "m3", body, comeback); out.Result != ingest.ResultAppended {
		t.Fatalf("comeback: %s", out.Result)
	}
	e.f.Advance(day)
	c1, c2 := inv("ev-big", strings.Repeat("c", 350<<10)), inv("ev-big", strings.Repeat("d", 350<<10))
	for i, c := range [][]byte{c1, c2, c1} {
		r, err := e.k.Correct(ctx, id, quarantine.CorrectionRequest{Actor: "fixer@ops", Reason: "restore the note", Body: c})
		if err != nil {
			t.Fatalf("correction %d: %v", i+1, err)
		}
		if r.Latest().BodyRef == nil {
			t.Fatalf("correction %d was not claim-checked", i+1)
		}
	}
	if out := e.arrive(t, "m4", body, attrs); out.Result != ingest.ResultAppended {
		t.Fatalf("arrival after the corrections: %s", out.Result)
	}
	e.onlyCurrentVersions(t)

	e.f.Advance(8 * day)
	e.f.ApplyLifecycle()
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := quarantine.LoadBody(ctx, e.p, rec); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("body after lifecycle: %v", err)
	}
	if got, err := quarantine.LoadAttributes(ctx, e.p, rec); err != nil || got["blob"].StringValue != attrs["blob"].StringValue {
		t.Fatalf("attributes after lifecycle: %v", err)
	}
	want := [][]byte{c1, c2, c1}
	if len(rec.Corrections) != len(want) {
		t.Fatalf("%d corrections", len(rec.Corrections))
	}
	for i := range rec.Corrections {
		if got, err := quarantine.CorrectionBody(ctx, e.p, rec, &rec.Corrections[i]); err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("correction %d after lifecycle: %v", i+1, err)
		}
	}
	if got, err := quarantine.ReplayBody(ctx, e.p, rec); err != nil || !bytes.Equal(got, c1) {
		t.Fatalf("replay body after lifecycle: %v", err)
	}
}

// After the sweeper archived a record and deleted its claim-check objects
// (delete markers), a comeback of the same event is recorded in the stub's
// history only: it must not upload the body again, which would leave a
// current object no record points at and no rule ever expires.
func TestArchivedStubGetsNoNewClaimCheckObject(t *testing.T) {
	ctx := context.Background()
	e := newClaimEnv(t)
	body := inv("ev-arch", strings.Repeat("b", 200<<10))
	rec := e.arrive(t, "m1", body, nil).Record
	parked, err := rec.ParkManual("ops", "audit", e.f.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(ctx, rec, parked); err != nil {
		t.Fatal(err)
	}
	stub, err := parked.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "archive", Key: "a", Seal: parked.Seal, SHA256: strings.Repeat("0", 64)}, e.f.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(ctx, parked, stub); err != nil {
		t.Fatal(err)
	}
	if err := e.p.DeletePayload(ctx, *rec.BodyRef); err != nil {
		t.Fatal(err)
	}
	// The comeback opens a successor record with its own claim-check
	// object; nothing is uploaded over the stub's delete marker.
	out := e.arrive(t, "m2", body, nil)
	if out.Result != ingest.ResultCreated || out.Record.Status != quarantine.StatusQuarantined || out.Record.Predecessor == nil {
		t.Fatalf("comeback to a stub: %s %s", out.Result, out.Record.Status)
	}
	if out.Record.BodyRef == nil || out.Record.BodyRef.Key == rec.BodyRef.Key {
		t.Fatalf("the successor's body went to %+v, the stub's key is %s", out.Record.BodyRef, rec.BodyRef.Key)
	}
	vs := e.f.Versions(bucket, rec.BodyRef.Key)
	if len(vs) != 2 || !vs[1].DeleteMarker {
		t.Fatalf("versions after the comeback: %+v", vs)
	}
}
