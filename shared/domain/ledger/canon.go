package ledger

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// appendItem appends the RFC 8785 form of an item's DynamoDB JSON without
// reflection (Verify computes it for every entry and every table item).
// DynamoDB JSON has strings, booleans, arrays and objects only, so the
// canonical form is: members sorted by their names' UTF-16 code units, no
// white space, strings escaped as ECMAScript's JSON.stringify does.
func appendItem(b []byte, m map[string]Value) ([]byte, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, compareUTF16)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v Value) ([]byte, error) {
	if n := v.members(); n != 1 {
		return nil, fmt.Errorf("attribute value has %d members, want 1", n)
	}
	member := func(name string) []byte { return append(appendString(append(b, '{'), name), ':') }
	var err error
	switch {
	case v.S != nil:
		b = appendString(member("S"), *v.S)
	case v.N != nil:
		b = appendString(member("N"), *v.N)
	case v.B != nil:
		b = appendString(member("B"), base64.StdEncoding.EncodeToString(v.B))
	case v.BOOL != nil:
		b = member("BOOL")
		if *v.BOOL {
			b = append(b, "true"...)
		} else {
			b = append(b, "false"...)
		}
	case v.NULL:
		b = append(member("NULL"), "true"...)
	case v.M != nil:
		if b, err = appendItem(member("M"), v.M); err != nil {
			return nil, err
		}
	case v.L != nil:
		b = append(member("L"), '[')
		for i, e := range v.L {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	case v.SS != nil:
		b = appendStrings(member("SS"), sortedStrings(v.SS))
	case v.NS != nil:
		b = appendStrings(member("NS"), sortedStrings(v.NS))
	default:
		bs := slices.Clone(v.BS)
		slices.SortFunc(bs, bytes.Compare)
		ss := make([]string, len(bs))
		for i, x := range bs {
			ss[i] = base64.StdEncoding.EncodeToString(x)
		}
		b = appendStrings(member("BS"), ss)
	}
	return append(b, '}'), nil
}

// sortedStrings sorts set members by their bytes (the order MarshalJSON
// uses too).
func sortedStrings(ss []string) []string { return slices.Sorted(slices.Values(ss)) }

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as RFC 8785 writes a string; invalid UTF-8 becomes
// U+FFFD, as encoding/json makes it.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 §3.2.3).
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
