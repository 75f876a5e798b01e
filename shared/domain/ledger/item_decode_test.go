package ledger_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// refValue reads a DynamoDB JSON value as Value did before it read its
// bytes in one pass: through encoding/json, value by value (the
// reference FuzzValueDecodeIsEncodingJSONs holds it to).
type refValue struct{ v ledger.Value }

func (r *refValue) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("attribute value: %w", err)
	}
	if len(m) != 1 {
		return fmt.Errorf("attribute value has %d members, want 1", len(m))
	}
	v := ledger.Value{}
	for k, raw := range m {
		var err error
		switch k {
		case "S":
			err = json.Unmarshal(raw, &v.S)
		case "N":
			err = json.Unmarshal(raw, &v.N)
			if err == nil && v.N != nil {
				if _, perr := strconv.ParseFloat(*v.N, 64); perr != nil {
					err = fmt.Errorf("number %q does not parse", *v.N)
				}
			}
		case "B":
			v.B = []byte{}
			err = json.Unmarshal(raw, &v.B)
		case "BOOL":
			err = json.Unmarshal(raw, &v.BOOL)
		case "NULL":
			var t bool
			err = json.Unmarshal(raw, &t)
			if err == nil && !t {
				err = errors.New("a NULL value must be true")
			}
			v.NULL = t
		case "M":
			rm := map[string]refValue{}
			if err = json.Unmarshal(raw, &rm); err == nil && rm != nil {
				v.M = map[string]ledger.Value{}
				for k, e := range rm {
					v.M[k] = e.v
				}
			}
		case "L":
			rl := []refValue{}
			if err = json.Unmarshal(raw, &rl); err == nil && rl != nil {
				v.L = []ledger.Value{}
				for _, e := range rl {
					v.L = append(v.L, e.v)
				}
			}
		case "SS":
			v.SS = []string{}
			err = json.Unmarshal(raw, &v.SS)
		case "NS":
			v.NS = []string{}
			err = json.Unmarshal(raw, &v.NS)
		case "BS":
			v.BS = [][]byte{}
			err = json.Unmarshal(raw, &v.BS)
		default:
			err = fmt.Errorf("unknown attribute type %q", k)
		}
		if err != nil {
			return fmt.Errorf("attribute value %s: %w", k, err)
		}
		n := 0
		for _, set := range []bool{v.S != nil, v.N != nil, v.B != nil, v.BOOL != nil, v.NULL, v.M != nil, v.L != nil, v.SS != nil, v.NS != nil, v.BS != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("attribute value %s: null member", k)
		}
	}
	r.v = v
	return nil
}

// Value's one-pass reading reads what reading it through encoding/json
// value by value reads, and refuses what that refuses: items (maps of
// values) as segments and the table hold them, with nested maps and
// lists, sets, escapes, invalid UTF-8, repeated members, nulls where a
// value or an element belongs, and JSON that is no attribute value.
func FuzzValueDecodeIsEncodingJSONs(f *testing.F) {
	for _, seed := range []string{
		`{"a":{"S":"x"}}`,
		`{"a":{"N":"1.5e3"},"b":{"BOOL":true},"c":{"NULL":true},"d":{"B":"aGk="}}`,
		`{"m":{"M":{"x":{"L":[{"S":"y"},{"N":"2"},{"M":{}}]},"y":{"SS":["b","a"]}}}}`,
		`{"s":{"NS":["1","x",null]},"t":{"BS":["aGk=",null,""]},"u":{"SS":[null]}}`,
		`{"a":{"S":"\u00e9\n\"q\"\ud83d\ude00"},"b":{"S":"caf` + "\xe9" + `"}}`,
		`{"a":{"S":"x","S":"y"}}`, `{"a":{"S":"x","N":"1"}}`, `{"a":{}}`, `{"a":null}`,
		`{"a":{"L":[null]}}`, `{"a":{"M":{"k":null}}}`, `{"a":{"M":null}}`, `{"a":{"L":null}}`,
		`{"a":{"S":null}}`, `{"a":{"N":"NaN"}}`, `{"a":{"N":"0x10"}}`, `{"a":{"N":" 1"}}`,
		`{"a":{"NULL":false}}`, `{"a":{"NULL":null}}`, `{"a":{"BOOL":"true"}}`, `{"a":{"B":"!!"}}`,
		`{"a":{"B":"aG\r\nk="}}`, `{"a":{"X":1}}`, `{"a":{"s":"x"}}`, `{"a":[]}`, `{"a":"S"}`,
		`{ "a" : { "M" : { "b" : { "S" : "c" } , "b" : { "N" : "1" } } } }`,
		`{"a":{"SS":["x",1]}}`, `{"a":{"L":[{"S":"x"},{}]}}`, `{"a":{"M":{"":{"S":""}}}}`,
		`{"a":{"B":[]}}`, `{"a":{"B":[1,255]}}`, `{"a":{"B":[256]}}`, `{"a":{"BS":[[1],"aGk="]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got ledger.Item
		gotErr := json.Unmarshal(b, &got)
		if gotErr != nil && strings.Contains(gotErr.Error(), "nested deeper than") {
			if jsonDepth(b) < ledger.MaxValueDepth {
				t.Fatalf("%q: %v at JSON depth %d", b, gotErr, jsonDepth(b))
			}
			return // DynamoDB nests 32 levels; the reference reads any depth
		}
		var ref map[string]refValue
		refErr := json.Unmarshal(b, &ref)
		if (gotErr == nil) != (refErr == nil) {
			t.Fatalf("%q: one pass %v, encoding/json %v", b, gotErr, refErr)
		}
		if gotErr != nil {
			return
		}
		want := ledger.Item{}
		for k, v := range ref {
			want[k] = v.v
		}
		if ref == nil {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: one pass %#v, encoding/json %#v", b, got, want)
		}
	})
}

// jsonDepth is how deep b's objects and arrays nest.
func jsonDepth(b []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			most = max(most, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}

// A value that nests deeper than MaxValueDepth, or names two types, is
// refused: whatever a writer of the bucket nests or repeats, reading stays
// linear in the bytes.
func TestValueDecodeBounds(t *testing.T) {
	t.Parallel()
	nest := func(levels int) string {
		return strings.Repeat(`{"M":{"k":`, levels-1) + `{"S":"x"}` + strings.Repeat(`}}`, levels-1)
	}
	var it ledger.Item
	if err := json.Unmarshal([]byte(`{"a":`+nest(ledger.MaxValueDepth)+`}`), &it); err != nil {
		t.Fatalf("%d levels: %v", ledger.MaxValueDepth, err)
	}
	if err := json.Unmarshal([]byte(`{"a":`+nest(ledger.MaxValueDepth+1)+`}`), &it); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("%d levels: %v", ledger.MaxValueDepth+1, err)
	}
	var many strings.Builder
	many.WriteString(`{"a":{"S":"x"`)
	for i := range 20000 {
		fmt.Fprintf(&many, `,"m%d":1`, i)
	}
	many.WriteString(`}}`)
	if err := json.Unmarshal([]byte(many.String()), &it); err == nil || !strings.Contains(err.Error(), "more than one member") {
		t.Fatalf("20,000 members: %v", err)
	}
	var direct ledger.Value
	if err := direct.UnmarshalJSON([]byte(`{"SS":[nope]}`)); err == nil {
		t.Fatal("invalid JSON read when called directly")
	}
}

// refEnc writes a value as Value did before it wrote its bytes in one
// pass: {type: member} through encoding/json.
type refEnc struct{ v ledger.Value }

func (r refEnc) MarshalJSON() ([]byte, error) {
	v := r.v
	var key string
	var val any
	switch {
	case v.S != nil:
		key, val = "S", *v.S
	case v.N != nil:
		key, val = "N", *v.N
	case v.B != nil:
		key, val = "B", v.B
	case v.BOOL != nil:
		key, val = "BOOL", *v.BOOL
	case v.NULL:
		key, val = "NULL", true
	case v.M != nil:
		m := map[string]refEnc{}
		for k, e := range v.M {
			m[k] = refEnc{e}
		}
		key, val = "M", m
	case v.L != nil:
		l := []refEnc{}
		for _, e := range v.L {
			l = append(l, refEnc{e})
		}
		key, val = "L", l
	case v.SS != nil:
		key, val = "SS", slices.Sorted(slices.Values(v.SS))
	case v.NS != nil:
		key, val = "NS", slices.Sorted(slices.Values(v.NS))
	default:
		bs := slices.Clone(v.BS)
		slices.SortFunc(bs, bytes.Compare)
		key, val = "BS", bs
	}
	return json.Marshal(map[string]any{key: val})
}

// Value's one-pass writing writes the bytes writing {type: member}
// through encoding/json writes, for every item the reading accepts.
func FuzzValueEncodeIsEncodingJSONs(f *testing.F) {
	for _, seed := range []string{
		`{"a":{"S":"x<>&\u2028\u00e9` + "\xff" + `"},"b":{"N":"1"},"c":{"B":""},"d":{"BOOL":false},"e":{"NULL":true}}`,
		`{"m":{"M":{"z":{"L":[{"S":"y"},{"M":{}}]},"a":{"SS":["b","a"]},"":{"NS":["2","1"]}}}}`,
		`{"t":{"BS":["aGk=",null,""]},"u":{"SS":[]},"v":{"NS":[]},"w":{"BS":[]},"x":{"L":[]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var it ledger.Item
		if json.Unmarshal(b, &it) != nil {
			return
		}
		got, err := json.Marshal(it)
		ref := map[string]refEnc{}
		for k, v := range it {
			ref[k] = refEnc{v}
		}
		want, werr := json.Marshal(ref)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: one pass %s (%v), encoding/json %s (%v)", b, got, err, want, werr)
		}
	})
}
