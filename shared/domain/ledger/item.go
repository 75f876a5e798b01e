// Package ledger is the pure core of the ledger (DESIGN.md invariant 14):
// the formats of its segment and digest objects and their canonical bytes,
// the canonical form of a DynamoDB item, sequence-number order, the
// builders the ledger function uses and the offline verification dlqctl
// runs. No AWS SDK here: adapters convert their types to Item.
package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

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
// so that two reads of one item give the same bytes.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.members() != 1 {
		return nil, fmt.Errorf("attribute value has %d members, want 1", v.members())
	}
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
		key, val = "M", v.M
	case v.L != nil:
		key, val = "L", v.L
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
