package ledger

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The key stage's spill files (verify_partition.go) hold each change and
// item in a binary form of their own, not JSON: it is written and read
// back once per run, and JSON's encoding and decoding of every item took
// about a quarter of a streamed verify's CPU time (a profile of
// BenchmarkVerify, 30,000 versions). It keeps every field of a spilled
// change as it was decoded (a nil item, member or binary set member apart
// from an empty one, set members in their order), so that the key stage sees what it would
// in memory (TestSpillCodecRoundTrips; TestEveryTestAgainPartitioned runs
// every test through it). A value without exactly one member is refused,
// as its JSON encoding refuses it.

// spillMax bounds a length the spill codec reads (a string, a list, a
// map): a damaged file is an error, not an allocation of its garbage.
const spillMax = 1 << 30

// The spill records' kinds, and the values' members.
const (
	spillEntry byte = 1 + iota
	spillItem
)

const (
	memberS byte = 1 + iota
	memberN
	memberB
	memberBOOL
	memberNULL
	memberM
	memberL
	memberSS
	memberNS
	memberBS
)

// appendSpilled appends sp's record to b.
func appendSpilled(b []byte, sp spilled) ([]byte, error) {
	if sp.Seg < 0 || sp.Index < 0 {
		return nil, fmt.Errorf("spill: segment %d, place %d", sp.Seg, sp.Index)
	}
	var err error
	switch {
	case sp.Entry != nil:
		b = append(b, spillEntry)
		b = binary.AppendUvarint(b, uint64(sp.Seg))
		b = binary.AppendUvarint(b, uint64(sp.Index))
		b = appendSpillString(b, sp.OldSHA)
		e := sp.Entry
		for _, s := range []string{e.Seq, e.Event, e.At, e.Key} {
			b = appendSpillString(b, s)
		}
		for _, it := range []Item{e.Item, e.Removed, e.OldItem} {
			if b, err = appendSpillItem(b, it); err != nil {
				return nil, err
			}
		}
		if e.Old == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = binary.AppendVarint(b, e.Old.Version)
			b = appendSpillString(b, e.Old.Seal)
		}
		b = appendSpillBool(b, e.Late)
	case sp.Item != nil:
		b = append(b, spillItem)
		if b, err = appendSpillItem(b, sp.Item); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("spill: neither a change nor an item")
	}
	return b, nil
}

func appendSpillString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendSpillBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendSpillBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendSpillItem appends an item: absent (nil) apart from empty.
func appendSpillItem(b []byte, it Item) ([]byte, error) {
	if it == nil {
		return append(b, 0), nil
	}
	return appendSpillMap(append(b, 1), it)
}

// appendSpillMap appends an item's or a map value's members.
func appendSpillMap(b []byte, m map[string]Value) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(m)))
	var err error
	for k, v := range m {
		b = appendSpillString(b, k)
		if b, err = appendSpillValue(b, v); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendSpillStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendSpillString(b, s)
	}
	return b
}

// appendSpillValue appends a value of exactly one member.
func appendSpillValue(b []byte, v Value) ([]byte, error) {
	if n := v.members(); n != 1 {
		return nil, fmt.Errorf("attribute value has %d members, want 1", n)
	}
	var err error
	switch {
	case v.S != nil:
		b = appendSpillString(append(b, memberS), *v.S)
	case v.N != nil:
		b = appendSpillString(append(b, memberN), *v.N)
	case v.B != nil:
		b = appendSpillBytes(append(b, memberB), v.B)
	case v.BOOL != nil:
		b = appendSpillBool(append(b, memberBOOL), *v.BOOL)
	case v.NULL:
		b = append(b, memberNULL)
	case v.M != nil:
		if b, err = appendSpillMap(append(b, memberM), v.M); err != nil {
			return nil, err
		}
	case v.L != nil:
		b = binary.AppendUvarint(append(b, memberL), uint64(len(v.L)))
		for _, m := range v.L {
			if b, err = appendSpillValue(b, m); err != nil {
				return nil, err
			}
		}
	case v.SS != nil:
		b = appendSpillStrings(append(b, memberSS), v.SS)
	case v.NS != nil:
		b = appendSpillStrings(append(b, memberNS), v.NS)
	case v.BS != nil:
		b = binary.AppendUvarint(append(b, memberBS), uint64(len(v.BS)))
		for _, s := range v.BS {
			b = appendSpillBool(b, s != nil) // a nil member apart from an empty one
			b = appendSpillBytes(b, s)
		}
	}
	return b, nil
}

// spillReader reads spill records back.
type spillReader struct {
	r *bufio.Reader
}

// next reads the next record; io.EOF at the end of the file, and
// io.ErrUnexpectedEOF within a record.
func (sr spillReader) next() (spilled, error) {
	var sp spilled
	kind, err := sr.r.ReadByte()
	if err != nil {
		return sp, err // io.EOF: no record left
	}
	switch kind {
	case spillEntry:
		seg, err := sr.length()
		if err != nil {
			return sp, err
		}
		idx, err := sr.length()
		if err != nil {
			return sp, err
		}
		sp.Seg, sp.Index = seg, idx
		if sp.OldSHA, err = sr.string(); err != nil {
			return sp, err
		}
		e := &Entry{}
		for _, s := range []*string{&e.Seq, &e.Event, &e.At, &e.Key} {
			if *s, err = sr.string(); err != nil {
				return sp, err
			}
		}
		for _, it := range []*Item{&e.Item, &e.Removed, &e.OldItem} {
			if *it, err = sr.item(); err != nil {
				return sp, err
			}
		}
		has, err := sr.bool()
		if err != nil {
			return sp, err
		}
		if has {
			e.Old = &Old{}
			if e.Old.Version, err = binary.ReadVarint(sr.r); err != nil {
				return sp, noEOF(err)
			}
			if e.Old.Seal, err = sr.string(); err != nil {
				return sp, err
			}
		}
		if e.Late, err = sr.bool(); err != nil {
			return sp, err
		}
		sp.Entry = e
	case spillItem:
		it, err := sr.item()
		if err != nil {
			return sp, err
		}
		if it == nil {
			return sp, errors.New("spill: an item record without an item")
		}
		sp.Item = it
	default:
		return sp, fmt.Errorf("spill: a record of kind %d", kind)
	}
	return sp, nil
}

// noEOF is err, an end of file within a record being unexpected.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (sr spillReader) length() (int, error) {
	n, err := binary.ReadUvarint(sr.r)
	if err != nil {
		return 0, noEOF(err)
	}
	if n > spillMax {
		return 0, fmt.Errorf("spill: a length of %d", n)
	}
	return int(n), nil
}

// spillChunk is the most bytes() allocates before it has read them: a
// damaged length asks for no more than the file holds.
const spillChunk = 1 << 20

func (sr spillReader) bytes() ([]byte, error) {
	n, err := sr.length()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, min(n, spillChunk))
	for len(b) < n {
		k := min(n-len(b), spillChunk)
		b = slices.Grow(b, k)
		if _, err := io.ReadFull(sr.r, b[len(b):len(b)+k]); err != nil {
			return nil, noEOF(err)
		}
		b = b[:len(b)+k]
	}
	return b, nil
}

func (sr spillReader) string() (string, error) {
	b, err := sr.bytes()
	return string(b), err
}

func (sr spillReader) bool() (bool, error) {
	c, err := sr.r.ReadByte()
	switch {
	case err != nil:
		return false, noEOF(err)
	case c > 1:
		return false, fmt.Errorf("spill: a flag of %d", c)
	}
	return c == 1, nil
}

func (sr spillReader) item() (Item, error) {
	has, err := sr.bool()
	if err != nil || !has {
		return nil, err
	}
	return sr.members(1)
}

// members reads an item's or a map value's members, their values at
// depth.
func (sr spillReader) members(depth int) (map[string]Value, error) {
	n, err := sr.length()
	if err != nil {
		return nil, err
	}
	m := make(map[string]Value, min(n, 1024))
	for range n {
		k, err := sr.string()
		if err != nil {
			return nil, err
		}
		if m[k], err = sr.value(depth); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (sr spillReader) strings() ([]string, error) {
	n, err := sr.length()
	if err != nil {
		return nil, err
	}
	ss := make([]string, 0, min(n, 1024))
	for range n {
		s, err := sr.string()
		if err != nil {
			return nil, err
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func (sr spillReader) value(depth int) (Value, error) {
	var v Value
	if depth > MaxValueDepth { // as the segments' decoder: a damaged file is an error, not a stack overflow
		return v, fmt.Errorf("spill: values nested deeper than %d", MaxValueDepth)
	}
	tag, err := sr.r.ReadByte()
	if err != nil {
		return v, noEOF(err)
	}
	switch tag {
	case memberS, memberN:
		s, err := sr.string()
		if err != nil {
			return v, err
		}
		if tag == memberS {
			v.S = &s
		} else {
			v.N = &s
		}
	case memberB:
		if v.B, err = sr.bytes(); err != nil {
			return v, err
		}
	case memberBOOL:
		b, err := sr.bool()
		if err != nil {
			return v, err
		}
		v.BOOL = &b
	case memberNULL:
		v.NULL = true
	case memberM:
		if v.M, err = sr.members(depth + 1); err != nil {
			return v, err
		}
	case memberL:
		n, err := sr.length()
		if err != nil {
			return v, err
		}
		v.L = make([]Value, 0, min(n, 1024))
		for range n {
			m, err := sr.value(depth + 1)
			if err != nil {
				return v, err
			}
			v.L = append(v.L, m)
		}
	case memberSS:
		if v.SS, err = sr.strings(); err != nil {
			return v, err
		}
	case memberNS:
		if v.NS, err = sr.strings(); err != nil {
			return v, err
		}
	case memberBS:
		n, err := sr.length()
		if err != nil {
			return v, err
		}
		v.BS = make([][]byte, 0, min(n, 1024))
		for range n {
			has, err := sr.bool()
			if err != nil {
				return v, err
			}
			b, err := sr.bytes()
			switch {
			case err != nil:
				return v, err
			case !has && len(b) > 0:
				return v, errors.New("spill: a nil binary member with bytes")
			case !has:
				b = nil
			}
			v.BS = append(v.BS, b)
		}
	default:
		return v, fmt.Errorf("spill: a value of member %d", tag)
	}
	return v, nil
}
