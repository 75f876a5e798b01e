package quarantine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

func inventorySource(t testing.TB) *quarantine.Source {
	t.Helper()
	sch, version, err := schemas.Compile("inventory-movement.v1")
	if err != nil {
		t.Fatal(err)
	}
	return &quarantine.Source{
		Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", DLQName: "inventory-dlq",
		IdempotencyPointer: "/event_id", Schema: sch, SchemaVersion: version, RedriveCap: 3,
	}
}

const validBody = `{"event_id":"evt-1","ndc":"12345-678-90","lot":"L1","quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`

// quarantiner is ingest's use case with corrections beside it, on the
// same store, payloads, clock and sources.
type quarantiner struct {
	*ingest.Quarantiner
	quarantine.Corrector
}

func newQ(t testing.TB) (*quarantiner, *memstore.Store, *memstore.Payloads, *clock.Fake) {
	t.Helper()
	store, payloads := memstore.New(), memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	src := inventorySource(t)
	srcs := map[string]*quarantine.Source{src.Name: src}
	q := &quarantiner{
		ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: srcs}),
		quarantine.Corrector{Store: store, Payloads: payloads, Now: clk.Now, Sources: srcs},
	}
	return q, store, payloads, clk
}

func msg(id, body string) ingest.Message {
	return ingest.Message{
		MessageID: id, Body: []byte(body), DLQARN: "arn:aws:sqs:us-east-1:000000000000:inventory-dlq",
		SentTimestamp: 1764400000000, ReceiveCount: 1,
	}
}

func TestSealVerifiesAndDetectsEveryFieldChange(t *testing.T) {
	t.Parallel()
	q, _, _, _ := newQ(t)
	m := msg("m1", validBody)
	m.Attributes = map[string]quarantine.Attribute{"a": {DataType: "String", StringValue: "v"}, "b": {DataType: "Binary", BinaryValue: []byte{1, 2}}}
	m.TraceHeader = "Root=1-abc"
	out, err := q.Quarantine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	rec := out.Record
	lease := rec.FirstSeen
	rec.LeaseUntil = &lease
	rec.AttributesRef = &quarantine.ObjectRef{Bucket: "b", Key: "k2", SHA256: "s2", Size: 2}
	rec.PrevSeal = "p"
	rec.FailureDetail = "d"
	rec.Reads, rec.ReadCount = []quarantine.Read{{At: rec.FirstSeen, Actor: "a"}}, 1
	rec.Corrections = []quarantine.Correction{{N: 1, Actor: "a", Reason: "r", BodyRef: &quarantine.ObjectRef{Bucket: "b", Key: "c1", SHA256: "s3", Size: 3}, BodySHA256: "s3", BodySize: 3}}
	if err := quarantine.SealRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(rec); err != nil {
		t.Fatalf("untouched record: %v", err)
	}
	// Re-sealing an untouched record reproduces its seal.
	again, err := quarantine.ComputeSeal(rec)
	if err != nil || again != rec.Seal {
		t.Fatalf("reseal = %q, %v; want %q", again, err, rec.Seal)
	}
	v := reflect.ValueOf(rec).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if name == "Seal" || !v.Type().Field(i).IsExported() {
			continue
		}
		t.Run(name, func(t *testing.T) {
			c := rec.Clone()
			mutate(t, reflect.ValueOf(c).Elem().Field(i))
			var se *quarantine.SealError
			if err := quarantine.Verify(c); !errors.As(err, &se) {
				t.Fatalf("changing %s: Verify = %v, want a SealError", name, err)
			}
		})
	}
}

// mutate changes a field's value in place, whatever its type.
func mutate(t *testing.T, f reflect.Value) {
	t.Helper()
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int, reflect.Int64:
		f.SetInt(f.Int() + 1)
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Struct {
			e := f.Index(0)
			text := e.FieldByName("Reason")
			if !text.IsValid() {
				text = e.FieldByName("Actor") // a Read
			}
			text.SetString(text.String() + "x")
			return
		}
		f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
	case reflect.Map:
		a := f.MapIndex(reflect.ValueOf("a")).Interface().(quarantine.Attribute)
		a.StringValue += "x"
		f.SetMapIndex(reflect.ValueOf("a"), reflect.ValueOf(a))
	case reflect.Struct:
		tm := f.Interface().(quarantine.Time)
		f.Set(reflect.ValueOf(quarantine.At(tm.Add(time.Nanosecond))))
	case reflect.Pointer:
		switch p := f.Interface().(type) {
		case *quarantine.Time:
			*p = quarantine.At(p.Add(time.Second))
		case *quarantine.ObjectRef:
			if p == nil {
				f.Set(reflect.ValueOf(&quarantine.ObjectRef{Bucket: "b", Key: "k", SHA256: "s", Size: 1}))
				return
			}
			p.SHA256 += "x"
		case *quarantine.RecordLink:
			if p == nil {
				f.Set(reflect.ValueOf(&quarantine.RecordLink{ID: "i", Seal: "s", Reason: "r"}))
				return
			}
			p.Seal += "x"
		case *quarantine.ArchiveRef:
			if p == nil {
				f.Set(reflect.ValueOf(&quarantine.ArchiveRef{Bucket: "b", Key: "k", SHA256: "s"}))
				return
			}
			p.SHA256 += "x"
		default:
			t.Fatalf("no mutation for %T", p)
		}
	default:
		t.Fatalf("no mutation for kind %s", f.Kind())
	}
}

func TestDuplicateDeliveryIsANoOp(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	ctx := context.Background()
	first, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil || first.Result != ingest.ResultCreated {
		t.Fatalf("first = %v, %v", first.Result, err)
	}
	dup, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil || dup.Result != ingest.ResultDuplicate {
		t.Fatalf("dup = %v, %v", dup.Result, err)
	}
	all := store.All()
	if len(all) != 1 || all[0].Version != 1 || all[0].AttemptCount != 1 {
		t.Fatalf("records = %+v", all)
	}
}

func TestRefailureAppendsAndChains(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	first, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	second, err := q.Quarantine(ctx, msg("m2", validBody))
	if err != nil || second.Result != ingest.ResultAppended {
		t.Fatalf("second = %v, %v", second.Result, err)
	}
	got, err := store.Get(ctx, first.Record.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AttemptCount != 2 || len(got.Attempts) != 2 || !got.FirstSeen.Equal(first.Record.FirstSeen.Time) || !got.LastSeen.Equal(clk.Now()) {
		t.Fatalf("after re-failure: count %d, attempts %d, first %v, last %v", got.AttemptCount, len(got.Attempts), got.FirstSeen, got.LastSeen)
	}
	if err := quarantine.VerifyChain(first.Record, got); err != nil {
		t.Fatal(err)
	}
}

func TestAttemptHistoryIsBounded(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	ctx := context.Background()
	for i := range quarantine.DefaultMaxAttempts + 5 {
		if _, err := q.Quarantine(ctx, msg(fmt.Sprintf("m%d", i), validBody)); err != nil {
			t.Fatal(err)
		}
	}
	r := store.All()[0]
	if r.AttemptCount != quarantine.DefaultMaxAttempts+5 || len(r.Attempts) != quarantine.DefaultMaxAttempts {
		t.Fatalf("count %d, kept %d", r.AttemptCount, len(r.Attempts))
	}
	if last := r.Attempts[len(r.Attempts)-1].MessageID; last != fmt.Sprintf("m%d", quarantine.DefaultMaxAttempts+4) {
		t.Fatalf("newest kept attempt is %s", last)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := q.Quarantine(context.Background(), msg(fmt.Sprintf("m%d", i), validBody))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := store.All()
	if len(all) != 1 || all[0].AttemptCount != 32 {
		t.Fatalf("records %d, attempts %d", len(all), all[0].AttemptCount)
	}
}

func TestKeyReusedWithDifferentBodyKeepsBoth(t *testing.T) {
	t.Parallel()
	q, store, _, _ := newQ(t)
	ctx := context.Background()
	if _, err := q.Quarantine(ctx, msg("m1", validBody)); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(validBody, `"lot":"L1"`, `"lot":"L2"`, 1)
	out, err := q.Quarantine(ctx, msg("m2", other))
	if err != nil {
		t.Fatal(err)
	}
	if out.Record.Body != other || out.Record.FailureClass != quarantine.ClassValidation || !strings.Contains(out.Record.DLQID, "#body-") {
		t.Fatalf("conflict record = %+v", out.Record)
	}
	if n := len(store.All()); n != 2 {
		t.Fatalf("records = %d, want 2", n)
	}
}

func TestKeyDerivationOrder(t *testing.T) {
	t.Parallel()
	src := inventorySource(t)
	doc := map[string]any{"event_id": "evt-9"}
	attrs := map[string]quarantine.Attribute{"idempotency-key": {DataType: "String", StringValue: " k-1 "}}
	tests := []struct {
		name   string
		attrs  map[string]quarantine.Attribute
		doc    any
		want   string
		origin quarantine.KeyOrigin
	}{
		{"attribute wins", attrs, doc, "k-1", quarantine.KeyFromAttribute},
		{"pointer next", nil, doc, "evt-9", quarantine.KeyFromPointer},
		{"binary attribute ignored", map[string]quarantine.Attribute{"idempotency-key": {DataType: "Binary", BinaryValue: []byte("x")}}, doc, "evt-9", quarantine.KeyFromPointer},
		{"number pointer", nil, map[string]any{"event_id": json.Number("42")}, "42", quarantine.KeyFromPointer},
		{"hash last", nil, map[string]any{"other": 1}, quarantine.BodyHashKey(src.ARN, []byte("b")), quarantine.KeyFromBodyHash},
		{"empty attribute falls through", map[string]quarantine.Attribute{"idempotency-key": {DataType: "String", StringValue: "  "}}, nil, quarantine.BodyHashKey(src.ARN, []byte("b")), quarantine.KeyFromBodyHash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, origin := quarantine.DeriveKey(src, "idempotency-key", tt.attrs, tt.doc, src.ARN, []byte("b"))
			if key != tt.want || origin != tt.origin {
				t.Fatalf("got %q (%s), want %q (%s)", key, origin, tt.want, tt.origin)
			}
		})
	}
}

func TestSignatureNormalization(t *testing.T) {
	t.Parallel()
	tests := []struct{ stage, reason, version, want string }{
		{"  Consumer ", "Timeout after 30s", "V1", "consumer|timeout after #s|v#"},
		{"db", "deadlock\tid 123 and 456", "", "db|deadlock id # and #|"},
		{"x|y", "a|b", "v", "x y|a b|v"},
		{"s", strings.Repeat("a", 100), "v", "s|" + strings.Repeat("a", 64) + "|v"},
	}
	for _, tt := range tests {
		if got := quarantine.Signature(tt.stage, tt.reason, tt.version); got != tt.want {
			t.Errorf("Signature(%q, %q, %q) = %q, want %q", tt.stage, tt.reason, tt.version, got, tt.want)
		}
	}
}

func TestGate(t *testing.T) {
	t.Parallel()
	src := inventorySource(t)
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	tests := []struct {
		name   string
		body   []byte
		valid  bool
		reason string
	}{
		{"valid", []byte(validBody), true, ""},
		{"empty", nil, false, quarantine.ReasonEmpty},
		{"not utf-8", []byte{0xff, 0xfe, '{'}, false, quarantine.ReasonNotUTF8},
		{"not json", []byte("hello"), false, quarantine.ReasonNotJSON},
		{"truncated", []byte(`{"a":`), false, quarantine.ReasonNotJSON},
		{"two values", []byte(`{} {}`), false, quarantine.ReasonNotJSON},
		{"deep", []byte(deep), false, quarantine.ReasonTooDeep},
		{"duplicate key", []byte(`{"a":1,"b":{"c":1,"c":2}}`), false, quarantine.ReasonDuplicateKey},
		{"same key in sibling objects", []byte(`[{"a":1},{"a":2}]`), false, "schema / type"},
		{"bad ndc", []byte(strings.Replace(validBody, "12345-678-90", "1-2-3", 1)), false, "schema /ndc pattern"},
		{"zero delta", []byte(strings.Replace(validBody, "-5", "0", 1)), false, "schema /quantity_delta not"},
		{"missing lot", []byte(strings.Replace(validBody, `"lot":"L1",`, "", 1)), false, "schema / required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := src.Check(tt.body)
			if v.Valid != tt.valid || v.Reason != tt.reason {
				t.Fatalf("Check = valid %v reason %q (%s), want %v %q", v.Valid, v.Reason, v.Detail, tt.valid, tt.reason)
			}
		})
	}
}

func TestLargeBodyGoesToPayloadStore(t *testing.T) {
	t.Parallel()
	q, store, payloads, _ := newQ(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("a"), 900<<10)
	out, err := q.Quarantine(ctx, msg("m1", string(body)))
	if err != nil {
		t.Fatal(err)
	}
	r := store.All()[0]
	if r.BodyRef == nil || r.Body != "" || out.Record.BodyRef == nil {
		t.Fatalf("body not offloaded: ref %v, inline %d bytes", r.BodyRef, len(r.Body))
	}
	got, err := quarantine.LoadBody(ctx, payloads, r)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("LoadBody: %v", err)
	}
	payloads.Overwrite(r.BodyRef.Key, []byte("tampered"))
	if _, err := quarantine.LoadBody(ctx, payloads, r); !errors.Is(err, quarantine.ErrPayloadMismatch) {
		t.Fatalf("tampered payload: %v", err)
	}
}

func TestConsumerAttributesWin(t *testing.T) {
	t.Parallel()
	src := inventorySource(t)
	attrs := map[string]quarantine.Attribute{
		quarantine.AttrFailureReason: {DataType: "String", StringValue: "Lot 77 recalled"},
		quarantine.AttrFailureStage:  {DataType: "String", StringValue: "Allocation"},
		quarantine.AttrFailureType:   {DataType: "String", StringValue: "permanent"},
	}
	c := quarantine.Classify(src, attrs, src.Check([]byte(validBody)))
	if c.Class != quarantine.ClassValidation || c.Signature != "allocation|lot # recalled|v#" {
		t.Fatalf("got %+v", c)
	}
	c = quarantine.Classify(src, nil, src.Check([]byte(validBody)))
	if c.Class != quarantine.ClassExhausted || c.Signature != "consumer|retries exhausted|v#" {
		t.Fatalf("got %+v", c)
	}
	c = quarantine.Classify(src, nil, src.Check([]byte("nope")))
	if c.Class != quarantine.ClassValidation || c.Signature != "gate|body is not json|v#" {
		t.Fatalf("got %+v", c)
	}
}

// Only a message that fails again counts as a replay that came back; a
// claim given back (the gate held the payload) does not.
func TestCameBackCountsArrivalsOnly(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
	bucket := func(kind string) int64 {
		var keys []quarantine.CounterKey
		for s := range quarantine.CounterShards {
			keys = append(keys, quarantine.BucketCounterKey("inventory", kind, clk.Now().Truncate(time.Hour), s))
		}
		got, _ := store.ReadCounters(ctx, keys)
		var n int64
		for _, v := range got {
			n += v
		}
		return n
	}
	step := func(f func(r *quarantine.Record) (*quarantine.Record, error)) {
		t.Helper()
		r, err := store.Get(ctx, out.Record.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		next, err := f(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
	}
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("op", clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Release("op", "held", clk.Now(), nil) })
	if n := bucket(quarantine.CounterCameBack); n != 0 {
		t.Fatalf("a released claim counted as came back: %d", n)
	}
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim("op", clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven("op", "sent-1", clk.Now())
	})
	if _, err := q.Quarantine(ctx, msg("sent-1", validBody)); err != nil {
		t.Fatal(err)
	}
	if n := bucket(quarantine.CounterCameBack); n != 1 {
		t.Fatalf("came back = %d, want 1", n)
	}
}

// A replay that settled and then comes back is taken out of the resolved
// counter of the hour it settled in (not the hour it came back in) and is
// counted as came back, for the source and for the standing policy that
// sent it.
func TestComebackAfterResolvedUndoesTheSuccess(t *testing.T) {
	t.Parallel()
	q, store, _, clk := newQ(t)
	ctx := context.Background()
	out, err := q.Quarantine(ctx, msg("m1", validBody))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(key func(shard int) quarantine.CounterKey) int64 {
		var keys []quarantine.CounterKey
		for s := range quarantine.CounterShards {
			keys = append(keys, key(s))
		}
		got, _ := store.ReadCounters(ctx, keys)
		var n int64
		for _, v := range got {
			n += v
		}
		return n
	}
	bucket := func(kind string, hour time.Time) int64 {
		return sum(func(s int) quarantine.CounterKey { return quarantine.BucketCounterKey("inventory", kind, hour, s) })
	}
	step := func(f func(r *quarantine.Record) (*quarantine.Record, error)) {
		t.Helper()
		r, err := store.Get(ctx, out.Record.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		next, err := f(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Replace(ctx, r, next); err != nil {
			t.Fatal(err)
		}
	}
	const actor = quarantine.PolicyActorPrefix + "p1"
	noon := clk.Now().Truncate(time.Hour)
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Claim(actor, clk.Now(), time.Minute) })
	step(func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven(actor, "sent-1", clk.Now())
	})
	clk.Advance(20 * time.Minute)
	step(func(r *quarantine.Record) (*quarantine.Record, error) { return r.Settle(clk.Now(), 15*time.Minute) })
	if n := bucket(quarantine.CounterResolved, noon); n != 1 {
		t.Fatalf("resolved = %d, want 1", n)
	}
	clk.Advance(time.Hour) // it comes back in the next hour
	if _, err := q.Quarantine(ctx, msg("sent-1", validBody)); err != nil {
		t.Fatal(err)
	}
	if r, _ := store.Get(ctx, out.Record.DLQID); r.Status != quarantine.StatusQuarantined {
		t.Fatalf("status %s after the comeback", r.Status)
	}
	if n := bucket(quarantine.CounterResolved, noon); n != 0 {
		t.Errorf("resolved of the settle hour = %d after the comeback, want 0", n)
	}
	if n := bucket(quarantine.CounterResolved, noon.Add(time.Hour)); n != 0 {
		t.Errorf("resolved of the comeback hour = %d, want 0", n)
	}
	if n := bucket(quarantine.CounterCameBack, noon.Add(time.Hour)); n != 1 {
		t.Errorf("came back = %d, want 1", n)
	}
	if n := sum(func(s int) quarantine.CounterKey {
		return quarantine.PolicyCounterKey("inventory", "p1", quarantine.CounterPolicyCameBack, s)
	}); n != 1 {
		t.Errorf("policy came back = %d, want 1: its breaker must see a comeback after RESOLVED", n)
	}
}
