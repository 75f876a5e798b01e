package ledger

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// UnmarshalJSON reads one DynamoDB JSON value, in one pass over its bytes.
// encoding/json hands it syntactically valid JSON (it checked the whole
// document first), so decodeValue only walks it; it reads exactly what
// reading it through encoding/json value by value reads (a duplicate
// member: the last; a null element of a string or binary set: the zero
// value), as FuzzValueDecodeIsEncodingJSONs proves, without validating
// each nested value again.
func (v *Value) UnmarshalJSON(b []byte) error {
	if !json.Valid(b) { // encoding/json's callers checked it; any other caller too
		return errSyntax
	}
	d := valueDecoder{b: b}
	d.ws()
	val, err := d.value()
	if err != nil {
		return err
	}
	if d.ws(); d.i != len(d.b) {
		return errors.New("attribute value: trailing data")
	}
	*v = val
	return nil
}

// valueDecoder walks valid JSON; depth is the value's nesting.
type valueDecoder struct {
	b     []byte
	i     int
	depth int
}

// MaxValueDepth bounds how deep values nest: twice DynamoDB's 32 levels
// of nested attributes. Each level walks the bytes below it again, so the
// bound keeps reading linear in the bytes whatever a writer of the bucket
// nests.
const MaxValueDepth = 64

var errSyntax = errors.New("attribute value: malformed JSON")

func (d *valueDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space (0 at the end).
func (d *valueDecoder) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// skip passes over one JSON value and returns its bytes.
func (d *valueDecoder) skip() ([]byte, error) {
	d.ws()
	start := d.i
	if d.i >= len(d.b) {
		return nil, errSyntax
	}
	switch d.b[d.i] {
	case '"':
		return d.rawString()
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if _, err := d.rawString(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					d.i++
					return d.b[start:d.i], nil
				}
			}
			d.i++
		}
		return nil, errSyntax
	}
	for d.i < len(d.b) { // a number, true, false or null
		switch d.b[d.i] {
		case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
			return d.b[start:d.i], nil
		}
		d.i++
	}
	return d.b[start:d.i], nil
}

// rawString passes over a string and returns its bytes, quotes included.
func (d *valueDecoder) rawString() ([]byte, error) {
	start := d.i
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, errSyntax
	}
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			d.i++
		case '"':
			d.i++
			return d.b[start:d.i], nil
		}
	}
	return nil, errSyntax
}

// str reads a string: plain ASCII without escapes directly, anything else
// as encoding/json reads it (escapes, invalid UTF-8).
func (d *valueDecoder) str() (string, error) {
	raw, err := d.rawString()
	if err != nil {
		return "", err
	}
	body := raw[1 : len(raw)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c >= utf8.RuneSelf || c < 0x20 {
			plain = false
			break
		}
	}
	if plain {
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// object walks an object's members, calling member with each name, the
// decoder positioned at its value (which member must read).
func (d *valueDecoder) object(member func(name string) error) error {
	if d.peek() != '{' {
		return errSyntax
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		if d.peek() != '"' {
			return errSyntax
		}
		name, err := d.str()
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return errSyntax
		}
		d.i++
		d.ws()
		if err := member(name); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// array walks an array's elements; null says the array is JSON null.
func (d *valueDecoder) array(elem func() error) (null bool, err error) {
	switch d.peek() {
	case 'n':
		_, err := d.skip()
		return true, err
	case '[':
	default:
		return false, errSyntax
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return false, nil
	}
	for {
		d.ws()
		if err := elem(); err != nil {
			return false, err
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return false, nil
		default:
			return false, errSyntax
		}
	}
}

// isNull reports whether the next value is JSON null, and passes it.
func (d *valueDecoder) isNull() bool {
	if d.peek() == 'n' {
		_, _ = d.skip()
		return true
	}
	return false
}

// value reads one attribute value: an object of one member (the last of
// a repeated member counts), whose name is its type.
func (d *valueDecoder) value() (Value, error) {
	if d.depth >= MaxValueDepth {
		return Value{}, fmt.Errorf("attribute value nested deeper than %d levels", MaxValueDepth)
	}
	if d.peek() == 'n' { // JSON null: an object of no member
		_, _ = d.skip()
		return Value{}, errors.New("attribute value has 0 members, want 1")
	}
	// One member, repeated or not (the last counts): a second name is an
	// error at once, whatever follows.
	var name string
	var raw []byte
	n := 0
	err := d.object(func(member string) error {
		if n > 0 && member != name {
			return errors.New("attribute value has more than one member, want 1")
		}
		var err error
		name, n = member, n+1
		raw, err = d.skip()
		return err
	})
	if err != nil {
		return Value{}, fmt.Errorf("attribute value: %w", err)
	}
	if n == 0 {
		return Value{}, errors.New("attribute value has 0 members, want 1")
	}
	v, err := typed(name, raw, d.depth+1)
	if err != nil {
		return Value{}, fmt.Errorf("attribute value %s: %w", name, err)
	}
	if v.members() != 1 {
		return Value{}, fmt.Errorf("attribute value %s: null member", name)
	}
	return v, nil
}

// typed reads a value's member of type name from raw, at depth.
func typed(name string, raw []byte, depth int) (Value, error) {
	d := &valueDecoder{b: raw, depth: depth}
	var v Value
	switch name {
	case "S", "N":
		if d.isNull() {
			return v, nil
		}
		if d.peek() != '"' {
			return v, errNotA("string", raw)
		}
		s, err := d.str()
		if err != nil {
			return v, err
		}
		if name == "S" {
			v.S = &s
			return v, nil
		}
		if _, perr := strconv.ParseFloat(s, 64); perr != nil {
			return v, fmt.Errorf("number %q does not parse", s)
		}
		v.N = &s
	case "B":
		if d.isNull() {
			return v, nil
		}
		b, err := d.bytes()
		if err != nil {
			return v, err
		}
		v.B = b
	case "BOOL":
		switch {
		case d.isNull():
		case string(raw) == "true" || string(raw) == "false":
			t := string(raw) == "true"
			v.BOOL = &t
		default:
			return v, errNotA("bool", raw)
		}
	case "NULL":
		switch {
		case string(raw) == "true":
			v.NULL = true
		case string(raw) == "false" || string(raw) == "null":
			return v, errors.New("a NULL value must be true")
		default:
			return v, errNotA("bool", raw)
		}
	case "M":
		if d.isNull() {
			return v, nil
		}
		if d.peek() != '{' {
			return v, errNotA("object", raw)
		}
		m := map[string]Value{}
		err := d.object(func(key string) error {
			val, err := d.value()
			if err != nil {
				return err
			}
			m[key] = val
			return nil
		})
		if err != nil {
			return v, err
		}
		v.M = m
	case "L":
		l := []Value{}
		null, err := d.array(func() error {
			val, err := d.value()
			l = append(l, val)
			return err
		})
		if err != nil {
			return v, err
		}
		if !null {
			v.L = l
		}
	case "SS", "NS":
		ss := []string{}
		null, err := d.array(func() error {
			if d.isNull() {
				ss = append(ss, "")
				return nil
			}
			if d.peek() != '"' {
				return errNotA("string", raw)
			}
			s, err := d.str()
			ss = append(ss, s)
			return err
		})
		if err != nil || null {
			return v, err
		}
		if name == "SS" {
			v.SS = ss
		} else {
			v.NS = ss
		}
	case "BS":
		bs := [][]byte{}
		null, err := d.array(func() error {
			if d.isNull() {
				bs = append(bs, nil)
				return nil
			}
			b, err := d.bytes()
			bs = append(bs, b)
			return err
		})
		if err != nil || null {
			return v, err
		}
		v.BS = bs
	default:
		return v, fmt.Errorf("unknown attribute type %q", name)
	}
	return v, nil
}

// bytes reads the next value as encoding/json reads a []byte: a base64
// string, or (rare) anything else as encoding/json itself reads it (an
// array of numbers is one).
func (d *valueDecoder) bytes() ([]byte, error) {
	if d.peek() != '"' {
		raw, err := d.skip()
		if err != nil {
			return nil, err
		}
		var b []byte
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, err
		}
		return b, nil
	}
	s, err := d.str()
	if err != nil {
		return nil, err
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, []byte(s))
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

func errNotA(what string, raw []byte) error {
	return fmt.Errorf("cannot read %.20q as a %s", raw, what)
}
