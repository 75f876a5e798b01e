// Package canonical writes the RFC 8785 (JCS) canonical JSON of a Go value
// directly: the bytes gowebpki/jcs makes of encoding/json's encoding of
// the same value, without the detour (a json.Marshal, then a parse, a sort
// and a second serialization of everything). Seals are computed over these
// bytes, so they must be exactly jcs's: FuzzEqualsJCS proves it over random
// records, and every seal a test binary computes is checked against jcs
// (quarantine.ComputeSeal).
//
// It follows encoding/json's rules for what is encoded (json tags, their
// omitempty and "-", unexported fields left out, nil pointers, slices and
// maps as null, []byte as base64, json.Marshaler and encoding.TextMarshaler
// values) and JCS's for how: object members sorted by their names' UTF-16
// code units, strings with only the escapes JCS keeps (\" \\ \b \f \n \r
// \t and \u00xx for other controls; invalid UTF-8 becomes U+FFFD as
// encoding/json makes it), numbers in ECMAScript form. What it does not
// handle itself (embedded structs, interface values, maps not keyed by
// strings, ",string" fields) it encodes the slow way, json.Marshal then
// jcs.Transform, so the bytes are the same whatever the type.
package canonical

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Marshal returns the canonical JSON of v.
func Marshal(v any) ([]byte, error) {
	return Append(nil, v)
}

// Append appends the canonical JSON of v to dst.
func Append(dst []byte, v any) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	rv := reflect.ValueOf(v)
	return encoderOf(rv.Type())(dst, rv)
}

// encoder appends the canonical JSON of v (of the type it was made for).
type encoder func(dst []byte, v reflect.Value) ([]byte, error)

var (
	encoders      sync.Map // reflect.Type → encoder
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
	numberType    = reflect.TypeFor[json.Number]()
)

func encoderOf(t reflect.Type) encoder {
	if e, ok := encoders.Load(t); ok {
		return e.(encoder)
	}
	// A recursive type meets itself while its encoder is made: it gets
	// an indirection that finds the finished encoder.
	var (
		wg sync.WaitGroup
		f  encoder
	)
	wg.Add(1)
	e, loaded := encoders.LoadOrStore(t, encoder(func(dst []byte, v reflect.Value) ([]byte, error) {
		wg.Wait()
		return f(dst, v)
	}))
	if loaded {
		return e.(encoder)
	}
	f = newEncoder(t, true)
	wg.Done()
	encoders.Store(t, f)
	return f
}

// newEncoder makes t's encoder; allowAddr lets a value whose pointer (and
// not the value) is a json.Marshaler use it when it is addressable, as
// encoding/json does.
func newEncoder(t reflect.Type, allowAddr bool) encoder {
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) && !t.Implements(marshalerType) {
		byPtr, plain := marshalerEncoder, newEncoder(t, false)
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.CanAddr() {
				return byPtr(dst, v.Addr())
			}
			return plain(dst, v)
		}
	}
	if t.Implements(marshalerType) {
		return marshalerEncoder
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textType) && !t.Implements(textType) {
		byPtr, plain := textEncoder, newEncoder(t, false)
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.CanAddr() {
				return byPtr(dst, v.Addr())
			}
			return plain(dst, v)
		}
	}
	if t == numberType {
		return slowEncoder // a json.Number is written as the number it holds
	}
	if t.Implements(textType) {
		return textEncoder
	}
	switch t.Kind() {
	case reflect.Bool:
		return boolEncoder
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intEncoder
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintEncoder
	case reflect.Float32:
		return float32Encoder
	case reflect.Float64:
		return float64Encoder
	case reflect.String:
		return stringEncoder
	case reflect.Pointer:
		elem := encoderOf(t.Elem())
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			return elem(dst, v.Elem())
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(marshalerType) && !reflect.PointerTo(t.Elem()).Implements(textType) {
			return bytesEncoder
		}
		return arrayEncoder(t, true)
	case reflect.Array:
		return arrayEncoder(t, false)
	case reflect.Map:
		if t.Key().Kind() == reflect.String && !t.Key().Implements(textType) && !reflect.PointerTo(t.Key()).Implements(textType) {
			return mapEncoder(t)
		}
	case reflect.Struct:
		return structEncoder(t)
	}
	return slowEncoder
}

// slowEncoder is the reference path: encoding/json, then jcs. An
// addressable value goes by its address, so that its fields' pointer
// methods are found as they are when encoding/json reaches it.
func slowEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface()
	}
	raw, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	return appendTransformed(dst, raw)
}

// appendTransformed appends jcs's form of raw, one JSON value: as it is
// when raw is a string with nothing to escape or re-encode (the common
// case of a MarshalJSON of a time or an id), else through jcs.
func appendTransformed(dst, raw []byte) ([]byte, error) {
	if plainString(raw) {
		return append(dst, raw...), nil
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append(dst, out...), nil
}

// plainString reports whether raw is a JSON string of printable ASCII
// without escapes: its own canonical form.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func marshalerEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return append(dst, "null"...), nil
	}
	m, ok := v.Interface().(json.Marshaler)
	if !ok {
		return append(dst, "null"...), nil
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		return nil, &json.MarshalerError{Type: v.Type(), Err: err}
	}
	if !json.Valid(raw) {
		return nil, &json.MarshalerError{Type: v.Type(), Err: errors.New("invalid JSON")}
	}
	return appendTransformed(dst, raw)
}

func textEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return append(dst, "null"...), nil
	}
	m, ok := v.Interface().(encoding.TextMarshaler)
	if !ok {
		return append(dst, "null"...), nil
	}
	text, err := m.MarshalText()
	if err != nil {
		return nil, &json.MarshalerError{Type: v.Type(), Err: err}
	}
	return AppendString(dst, string(text)), nil
}

func boolEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	return strconv.AppendBool(dst, v.Bool()), nil
}

// maxExact is 2^53: every integer up to it is a float64 exactly, and
// ECMAScript prints it as its digits.
const maxExact = 1 << 53

func intEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	n := v.Int()
	if n >= -maxExact && n <= maxExact {
		return strconv.AppendInt(dst, n, 10), nil
	}
	return appendNumber(dst, float64(n)) // jcs reads every number as a float64
}

func uintEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	n := v.Uint()
	if n <= maxExact {
		return strconv.AppendUint(dst, n, 10), nil
	}
	return appendNumber(dst, float64(n))
}

func float64Encoder(dst []byte, v reflect.Value) ([]byte, error) {
	return appendNumber(dst, v.Float())
}

// float32Encoder: encoding/json prints a float32 at 32-bit precision, and
// jcs reads that text as a float64.
func float32Encoder(dst []byte, v reflect.Value) ([]byte, error) {
	f := v.Float()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &json.UnsupportedValueError{Value: v, Str: strconv.FormatFloat(f, 'g', -1, 32)}
	}
	g, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
	if err != nil {
		return nil, err
	}
	return appendNumber(dst, g)
}

func appendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, err
	}
	return append(dst, s...), nil
}

func stringEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	return AppendString(dst, v.String()), nil
}

// AppendString appends s as a canonical JSON string: each byte of invalid
// UTF-8 as U+FFFD (as encoding/json writes it), the escapes JCS keeps, and
// everything else as it is.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func bytesEncoder(dst []byte, v reflect.Value) ([]byte, error) {
	if v.IsNil() {
		return append(dst, "null"...), nil
	}
	b := v.Bytes()
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"'), nil
}

func arrayEncoder(t reflect.Type, slice bool) encoder {
	elem := encoderOf(t.Elem())
	return func(dst []byte, v reflect.Value) ([]byte, error) {
		if slice && v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		var err error
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = elem(dst, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
}

// less orders member names as JCS does: by their UTF-16 code units.
func less(a, b string) int {
	// Equal to byte order unless a rune at or above U+E000 meets one
	// above U+FFFF (UTF-16 puts surrogates below U+E000).
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sanitized is s as a member name reads once encoded and parsed again:
// each byte of invalid UTF-8 a U+FFFD.
func sanitized(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func mapEncoder(t reflect.Type) encoder {
	elem := encoderOf(t.Elem())
	return func(dst []byte, v reflect.Value) ([]byte, error) {
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		type member struct {
			name string
			v    reflect.Value
		}
		members := make([]member, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			members = append(members, member{sanitized(it.Key().String()), it.Value()})
		}
		slices.SortFunc(members, func(a, b member) int { return less(a.name, b.name) })
		dst = append(dst, '{')
		var err error
		for i, m := range members {
			if i > 0 {
				if members[i-1].name == m.name {
					// Two keys that read the same once encoded: jcs
					// refuses the object.
					return nil, fmt.Errorf("canonical: duplicate key %q", m.name)
				}
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.name)
			dst = append(dst, ':')
			if dst, err = elem(dst, m.v); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
}

// field is one encoded struct field.
type field struct {
	index     int
	name      string // canonical JSON of the name, with its colon
	omitEmpty bool
	enc       encoder
}

func structEncoder(t reflect.Type) encoder {
	var fields []field
	names := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if sf.Anonymous {
			return slowEncoder // promoted fields: encoding/json's rules
		}
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validTagName(name) {
			name = ""
		}
		if name == "" {
			name = sf.Name
		}
		omit := false
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty":
				omit = true
			case "string", "omitzero":
				return slowEncoder
			}
		}
		if names[name] {
			return slowEncoder // a duplicate name: encoding/json's rules
		}
		names[name] = true
		fields = append(fields, field{index: i, name: name, omitEmpty: omit, enc: encoderOf(sf.Type)})
	}
	slices.SortFunc(fields, func(a, b field) int { return less(a.name, b.name) })
	for i := range fields {
		fields[i].name = string(AppendString(nil, fields[i].name)) + ":"
	}
	return func(dst []byte, v reflect.Value) ([]byte, error) {
		dst = append(dst, '{')
		first := true
		var err error
		for _, f := range fields {
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.name...)
			if dst, err = f.enc(dst, fv); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
}

// validTagName is encoding/json's test of a tag's name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
