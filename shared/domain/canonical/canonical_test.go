package canonical_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/dlqquarantine/dlqq/shared/domain/canonical"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// reference is what the seals were computed over before: encoding/json,
// then gowebpki/jcs.
func reference(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// same checks that canonical.Marshal(v) is exactly the reference, or that
// both refuse v.
func same(t *testing.T, what string, v any) {
	t.Helper()
	want, werr := reference(v)
	got, gerr := canonical.Marshal(v)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%s: reference error %v, canonical error %v\nreference %s\ncanonical %s", what, werr, gerr, want, got)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("%s:\nreference %s\ncanonical %s", what, want, got)
	}
}

type ptrMarshaler struct{ N int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"z":1,"a":"\u00e9<"}`), nil }

type textKey struct{ s string }

func (k textKey) MarshalText() ([]byte, error) { return []byte("t:" + k.s), nil }

type ptrText struct{ s string }

func (k *ptrText) MarshalText() ([]byte, error) { return []byte("p\n" + k.s), nil }

type Inner struct {
	B string `json:"b"`
	A int    `json:"a,omitempty"`
}

type tricky struct {
	Embedded
	Name      string `json:"name"`
	Skip      string `json:"-"`
	Untagged  int
	Omit      *Inner            `json:"omit,omitempty"`
	Ptr       *Inner            `json:"ptr"`
	Any       any               `json:"any"`
	Num       json.Number       `json:"num,omitempty"`
	Str       int               `json:"str,string"`
	Bytes     []byte            `json:"bytes"`
	NilBytes  []byte            `json:"nil_bytes"`
	Arr       [3]uint8          `json:"arr"`
	F32       float32           `json:"f32"`
	F64       float64           `json:"f64"`
	Big       int64             `json:"big"`
	UBig      uint64            `json:"ubig"`
	ByPtr     ptrMarshaler      `json:"by_ptr"`
	ByPtrText ptrText           `json:"by_ptr_text"`
	Text      textKey           `json:"text"`
	TextKeys  map[textKey]int   `json:"text_keys"`
	IntKeys   map[int]string    `json:"int_keys"`
	Keys      map[string]*Inner `json:"keys"`
	NilMap    map[string]int    `json:"nil_map"`
	Empty     []Inner           `json:"empty"`
	Nil       []Inner           `json:"nil"`
	unexp     int
}

type Embedded struct {
	E string `json:"e"`
}

// Values that meet every rule the package follows or hands on.
func TestTrickyValues(t *testing.T) {
	tr := tricky{Embedded: Embedded{E: "e"}, Name: "n\u2028<>&\x00\x1f\x7f\"\\/\b\f\n\r\t\xff\xfe é 😀", Skip: "x", Untagged: 7,
		Ptr: &Inner{B: "b"}, Any: map[string]any{"y": 1.5, "x": []any{"a", nil, true}}, Num: "12.50", Str: 42,
		Bytes: []byte{0, 1, 255}, Arr: [3]uint8{1, 2, 3}, F32: 0.1, F64: 1e21, Big: 1<<60 + 1, UBig: math.MaxUint64,
		ByPtr: ptrMarshaler{1}, ByPtrText: ptrText{"q"}, Text: textKey{"k"}, TextKeys: map[textKey]int{{"b"}: 1, {"a"}: 2},
		IntKeys: map[int]string{10: "x", 9: "y"}, Keys: map[string]*Inner{"\uE000": {B: "pua"}, "\U0001F600": nil, "a": {A: -1}, "": {}},
		Empty: []Inner{}, unexp: 3}
	same(t, "a struct value", tr)
	same(t, "a pointer to it (its fields addressable)", &tr)
	same(t, "a slice of pointers", []*tricky{&tr, nil})
	for name, v := range map[string]any{
		"nil":                     nil,
		"a string":                "\xed\xa0\x80 lone surrogate bytes, \xc3 cut, \U0010FFFF",
		"floats":                  []float64{0, math.Copysign(0, -1), 1e-7, 123456789012345680000, 5e-324, math.MaxFloat64, 0.1 + 0.2},
		"float32s":                []float32{0.1, 1e10, math.MaxFloat32, 3.4e-45},
		"ints at 2^53":            []int64{1 << 53, 1<<53 + 1, -(1 << 53) - 1, math.MinInt64, math.MaxInt64},
		"keys by UTF-16":          map[string]int{"\uFFFF": 1, "\U00010000": 2, "\uE000": 3, "~": 4, "é": 5},
		"time":                    quarantine.At(time.Date(2026, 12, 6, 1, 2, 3, 4, time.UTC)),
		"nil time pointer":        (*quarantine.Time)(nil),
		"a map of times":          map[string]quarantine.Time{"b": quarantine.At(time.Unix(0, 0)), "a": {}},
		"interface holding a ptr": []any{&Inner{B: "x"}, Inner{A: 2}},
	} {
		same(t, name, v)
	}
	// Refused by both: NaN, and two keys that read the same once invalid
	// UTF-8 is replaced.
	for name, v := range map[string]any{
		"NaN":                          math.NaN(),
		"keys equal after replacement": map[string]int{"a\xff": 1, "a\xfe": 2},
		"a channel":                    struct{ C chan int }{make(chan int)},
	} {
		if _, err := canonical.Marshal(v); err == nil {
			t.Errorf("%s: no error", name)
		}
		same(t, name, v)
	}
}

// randomRecords fills every field of a record, nested ones included,
// from rng and a pool of strings meant to break an encoder.
type filler struct {
	rng  *rand.Rand
	pool []string
}

var timeType = reflect.TypeFor[quarantine.Time]()

func (f *filler) fill(v reflect.Value, depth int) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(quarantine.At(time.Unix(f.rng.Int64N(4e9), f.rng.Int64N(1e9)))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.pool[f.rng.IntN(len(f.pool))])
	case reflect.Bool:
		v.SetBool(f.rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch f.rng.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(f.rng.Int64N(1000))
		case 2:
			if v.Type().Bits() == 64 {
				v.SetInt(int64(f.rng.Uint64()))
			}
		default:
			v.SetInt(-f.rng.Int64N(1 << 20))
		}
	case reflect.Uint8:
		v.SetUint(uint64(f.rng.IntN(256)))
	case reflect.Pointer:
		if depth > 4 || f.rng.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if f.rng.IntN(4) == 0 {
			return // nil
		}
		n := f.rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if f.rng.IntN(4) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range f.rng.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	}
}

var breakers = []string{"", "a", "orders#ev-1", "\x00", "\x1f\x7f", `"\`, "\u2028\u2029", "<>&", "é", "😀", "\uE000", "\uFFFF",
	"\xff", "\xc3", "\xed\xa0\x80", "line\nbreak\ttab", strings.Repeat("z", 300), "arn:aws:sqs:us-east-1:000000000000:q.fifo"}

func randomRecord(seed uint64, extra string) *quarantine.Record {
	f := &filler{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), pool: append([]string{extra}, breakers...)}
	var r quarantine.Record
	f.fill(reflect.ValueOf(&r).Elem(), 0)
	return &r
}

// Random records, every field filled, encode exactly as the reference.
func TestRandomRecordsEqualJCS(t *testing.T) {
	for seed := range uint64(3000) {
		same(t, "record of seed "+string(rune('0'+seed%10)), randomRecord(seed, ""))
	}
}

// FuzzEqualsJCS: any record the fuzzer makes (a seed, and a string it
// puts in every string field's pool) encodes exactly as the reference.
func FuzzEqualsJCS(f *testing.F) {
	for _, s := range breakers {
		f.Add(uint64(len(s)), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, s string) {
		same(t, "fuzzed record", randomRecord(seed, s))
	})
}

// The errors of a MarshalJSON pass through.
type failing struct{}

func (failing) MarshalJSON() ([]byte, error) { return nil, errors.New("boom") }

func TestMarshalerErrors(t *testing.T) {
	if _, err := canonical.Marshal(struct{ F failing }{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v", err)
	}
}
