// Package ledger is the pure core of the ledger (DESIGN.md invariant 14):
// the formats of its segment and digest objects and their canonical bytes,
// the canonical form of a DynamoDB item, sequence-number order, the
// builders the ledger function uses and the offline verification dlqctl
// runs. No AWS SDK here: adapters convert their types to Item.
package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Item is one DynamoDB item in DynamoDB JSON, as the AWS API writes it.
type Item map[string]Value

// Value is one attribute value; exactly one member is set. M and L may be
// empty but not nil when they are the member set (as DynamoDB allows).
type Value struct {
	S    *string
	N    *string
	B    []byte
	BOOL *bool
	NULL bool
	M    map[string]Value
	L    []Value
	SS   []string
	NS   []string
	BS   [][]byte
}

// Str, Num, Bool, Null, Bin, Map and List build values.
func Str(s string) Value           { return Value{S: &s} }
func Num(n string) Value           { return Value{N: &n} }
func Bool(b bool) Value            { return Value{BOOL: &b} }
func Null() Value                  { return Value{NULL: true} }
func Bin(b []byte) Value           { return Value{B: append([]byte{}, b...)} }
func Map(m map[string]Value) Value { return Value{M: nonNilMap(m)} }
func List(l ...Value) Value        { return Value{L: append([]Value{}, l...)} }
func StrSet(ss ...string) Value    { return Value{SS: append([]string{}, ss...)} }
func NumSet(ns ...string) Value    { return Value{NS: append([]string{}, ns...)} }
func BinSet(bs ...[]byte) Value    { return Value{BS: append([][]byte{}, bs...)} }
func nonNilMap(m map[string]Value) map[string]Value {
	if m == nil {
		return map[string]Value{}
	}
	return m
}

func (v Value) members() int {
	n := 0
	for _, set := range []bool{v.S != nil, v.N != nil, v.B != nil, v.BOOL != nil, v.NULL, v.M != nil, v.L != nil, v.SS != nil, v.NS != nil, v.BS != nil} {
		if set {
			n++
		}
	}
	return n
}

// MarshalJSON writes the value as DynamoDB JSON with set members sorted,
// so that two reads of one item give the same bytes. It writes, in one
// pass, the bytes encoding/json writes for {type: member}
// (FuzzValueEncodeIsEncodingJSONs).
func (v Value) MarshalJSON() ([]byte, error) {
	return v.appendJSON(make([]byte, 0, 64))
}

func (v Value) appendJSON(b []byte) ([]byte, error) {
	if v.members() != 1 {
		return nil, fmt.Errorf("attribute value has %d members, want 1", v.members())
	}
	var err error
	switch {
	case v.S != nil:
		b = appendJSONString(append(b, `{"S":`...), *v.S)
	case v.N != nil:
		b = appendJSONString(append(b, `{"N":`...), *v.N)
	case v.B != nil:
		b = appendBase64(append(b, `{"B":`...), v.B)
	case v.BOOL != nil:
		b = strconv.AppendBool(append(b, `{"BOOL":`...), *v.BOOL)
	case v.NULL:
		b = append(b, `{"NULL":true`...)
	case v.M != nil:
		b = append(b, `{"M":{`...)
		for i, k := range slices.Sorted(maps.Keys(v.M)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendJSONString(b, k), ':')
			if b, err = v.M[k].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	case v.L != nil:
		b = append(b, `{"L":[`...)
		for i, e := range v.L {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = e.appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	case v.SS != nil, v.NS != nil:
		set, name := v.SS, `{"SS":[`
		if v.SS == nil {
			set, name = v.NS, `{"NS":[`
		}
		if len(set) == 0 {
			b = append(b, name[:len(name)-1]+"null}"...) // as encoding/json writes an empty sorted copy (nil)
			return b, nil
		}
		b = append(b, name...)
		for i, s := range slices.Sorted(slices.Values(set)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	default:
		bs := slices.Clone(v.BS)
		slices.SortFunc(bs, bytes.Compare)
		b = append(b, `{"BS":[`...)
		for i, e := range bs {
			if i > 0 {
				b = append(b, ',')
			}
			if e == nil {
				b = append(b, "null"...)
				continue
			}
			b = appendBase64(b, e)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json quotes it: printable
// ASCII other than what it escapes directly, anything else through it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendBase64 appends p as encoding/json writes a []byte.
func appendBase64(b, p []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// Canonical returns the item's canonical bytes: RFC 8785 JSON of its
// DynamoDB JSON with set members sorted. Two items are the same version iff
// their canonical bytes are equal.
func (it Item) Canonical() ([]byte, error) {
	if it == nil {
		return nil, errors.New("no item")
	}
	return appendItem(nil, it)
}

// canonical marshals v and canonicalizes it (RFC 8785).
func canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// ParseItem reads an item in DynamoDB JSON.
func ParseItem(b []byte) (Item, error) {
	var it Item
	if err := json.Unmarshal(b, &it); err != nil {
		return nil, fmt.Errorf("parse item: %w", err)
	}
	if it == nil {
		return nil, errors.New("parse item: not an object")
	}
	return it, nil
}

// S returns the string attribute name, or "" when it is absent or not S.
func (it Item) S(name string) string {
	if v, ok := it[name]; ok && v.S != nil {
		return *v.S
	}
	return ""
}

// Int returns the number attribute name as an integer.
func (it Item) Int(name string) (int64, bool) {
	v, ok := it[name]
	if !ok || v.N == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(*v.N, 10, 64)
	return n, err == nil
}
