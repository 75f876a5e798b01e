package quarantine_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
)

func TestSealVerifiesAndDetectsEveryFieldChange(t *testing.T) {
	t.Parallel()
	rec := sealedRecord(t, "k-1", validBody, fixtureTime)
	rec.Attributes = map[string]quarantine.Attribute{"a": {DataType: "String", StringValue: "v"}, "b": {DataType: "Binary", BinaryValue: []byte{1, 2}}}
	rec.TraceHeader = "Root=1-abc"
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

func TestCompareSequence(t *testing.T) {
	t.Parallel()
	// SQS sequence numbers: up to 128-bit decimals (beyond int64 and float64).
	ordered := []string{"", "7", "18", "99", "100", "9223372036854775807", "9223372036854775808",
		"18446744073709551616", "18446744073709551617", "340282366920938463463374607431768211455"}
	for i := range ordered {
		for j := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := quarantine.CompareSequence(ordered[i], ordered[j]); got != want {
				t.Errorf("CompareSequence(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if quarantine.CompareSequence("0018", "18") != 0 {
		t.Error("leading zeros change the order")
	}
	shuffled := slices.Clone(ordered)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, quarantine.CompareSequence)
	if !slices.Equal(shuffled, ordered) {
		t.Fatalf("sorted %v", shuffled)
	}
	recs := []*quarantine.Record{
		{DLQID: "s#c", MessageGroupID: "g1", SequenceNumber: "18446744073709551617"},
		{DLQID: "s#a", MessageGroupID: "g2", SequenceNumber: "5"},
		{DLQID: "s#b", MessageGroupID: "g1", SequenceNumber: "99"},
	}
	slices.SortFunc(recs, quarantine.CompareFIFO)
	if recs[0].DLQID != "s#b" || recs[1].DLQID != "s#c" || recs[2].DLQID != "s#a" {
		t.Fatalf("FIFO order %s %s %s", recs[0].DLQID, recs[1].DLQID, recs[2].DLQID)
	}
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	sch, err := schemas.Parse("s.json", []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// A schema reason names only what the schema declares: map keys (under
// additionalProperties or patternProperties) are "*", whatever they hold;
// array indices and declared properties stay, through $ref and recursion.
func TestSchemaReasonMasksUndeclaredKeys(t *testing.T) {
	t.Parallel()
	items := compileSchema(t, `{
		"type":"object",
		"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},
		"$defs":{"item":{"type":"object","properties":{
			"ndc":{"type":"string","pattern":"^x"},
			"attrs":{"type":"object","patternProperties":{"^a":{"type":"integer"}},"additionalProperties":{"type":"string"}}}}}}`)
	tree := compileSchema(t, `{
		"$ref":"#/$defs/node",
		"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":{"type":"integer"}}}}`)
	secret := "SECRET" + strings.Repeat("k", 1000)
	for _, c := range []struct {
		name   string
		sch    *jsonschema.Schema
		body   string
		reason string
	}{
		{"declared path", items, `{"items":[{"ndc":"y"}]}`, "schema /items/0/ndc pattern"},
		{"digits as a map key", items, `{"items":[{"ndc":"x","attrs":{"98765":5}}]}`, "schema /items/0/attrs/* type"},
		{"pattern property", items, `{"items":[{"ndc":"x","attrs":{"a` + secret + `":"s"}}]}`, "schema /items/0/attrs/* type"},
		{"additional property", items, `{"items":[{"ndc":"x","attrs":{"` + secret + `":5}}]}`, "schema /items/0/attrs/* type"},
		{"recursive schema", tree, `{"kids":[{"kids":[{"` + secret + `":"s"}]}]}`, "schema /kids/0/kids/0/* type"},
	} {
		src := &quarantine.Source{Name: "s", Schema: c.sch, SchemaVersion: "s.v1"}
		v := src.Check([]byte(c.body))
		cl := quarantine.Classify(src, nil, v)
		if v.Valid || v.Reason != c.reason || strings.Contains(cl.Signature, "secret") || strings.Contains(cl.Signature, "98765") {
			t.Errorf("%s: reason %q, signature %q; want %q", c.name, v.Reason, cl.Signature, c.reason)
		}
	}
}
