package ledger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// randomValue is a value of one member, at random, nested up to depth.
func randomValue(r *rand.Rand, depth int) Value {
	str := func() string { return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(4)) + "é\x00\"" }
	raw := func() []byte {
		if r.IntN(4) == 0 {
			return []byte{}
		}
		return []byte(str())
	}
	strs := func() []string {
		ss := []string{}
		for range r.IntN(3) {
			ss = append(ss, str())
		}
		return ss
	}
	kinds := 10
	if depth <= 0 {
		kinds = 5 // no map or list
	}
	switch r.IntN(kinds) {
	case 0:
		s := str()
		return Value{S: &s}
	case 1:
		n := "-12.5e3"
		return Value{N: &n}
	case 2:
		return Value{B: raw()}
	case 3:
		b := r.IntN(2) == 0
		return Value{BOOL: &b}
	case 4:
		return Value{NULL: true}
	case 5:
		m := map[string]Value{}
		for range r.IntN(3) {
			m[str()] = randomValue(r, depth-1)
		}
		return Value{M: m}
	case 6:
		l := []Value{}
		for range r.IntN(3) {
			l = append(l, randomValue(r, depth-1))
		}
		return Value{L: l}
	case 7:
		return Value{SS: strs()}
	case 8:
		return Value{NS: []string{"1", "-2", "3.5"}[:r.IntN(4)]}
	default:
		bs := [][]byte{}
		for range r.IntN(3) {
			if r.IntN(4) == 0 {
				bs = append(bs, nil)
			} else {
				bs = append(bs, raw())
			}
		}
		return Value{BS: bs}
	}
}

func randomItem(r *rand.Rand) Item {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return Item{}
	}
	it := Item{}
	for i := range 1 + r.IntN(6) {
		it[string(rune('a'+i))] = randomValue(r, 3)
	}
	return it
}

// What the key stage's spill files hold reads back as it was written,
// field for field: nil apart from empty, set members in their order; a
// value without exactly one member is refused, as its JSON encoding
// refuses it; a record cut short is an error, never a record.
func TestSpillCodecRoundTrips(t *testing.T) {
	// Every field of a spilled change is written: one added to these
	// types must be added to the codec (spillcodec.go) and to this test.
	for typ, fields := range map[reflect.Type]int{reflect.TypeFor[Entry](): 10, reflect.TypeFor[Old](): 2, reflect.TypeFor[Value](): 10, reflect.TypeFor[spilled](): 5} {
		if typ.NumField() != fields {
			t.Fatalf("%s has %d fields, the spill codec knows %d", typ, typ.NumField(), fields)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	var records []spilled
	for i := range 2000 {
		if i%3 == 0 {
			it := randomItem(r)
			if it == nil {
				it = Item{}
			}
			records = append(records, spilled{Item: it})
			continue
		}
		e := &Entry{Seq: "0001", Event: []string{EventInsert, EventModify, EventRemove}[r.IntN(3)], At: "2026-12-01T10:00:00Z", Key: "src#k" + string(rune('a'+r.IntN(26))),
			Item: randomItem(r), Removed: randomItem(r), OldItem: randomItem(r), Late: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			e.Old = &Old{Version: r.Int64N(1<<40) - 5, Seal: "s"}
		}
		records = append(records, spilled{Seg: r.IntN(1 << 20), Index: r.IntN(200), OldSHA: []string{"", "abc"}[r.IntN(2)], Entry: e})
	}
	var file []byte
	for _, sp := range records {
		var err error
		if file, err = appendSpilled(file, sp); err != nil {
			t.Fatal(err)
		}
	}
	rd := spillReader{bufio.NewReader(bytes.NewReader(file))}
	for i, want := range records {
		got, err := rd.next()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: %v\n got %#v\nwant %#v", i, err, got, want)
		}
	}
	if _, err := rd.next(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}

	for _, bad := range []Value{{}, {S: new(string), NULL: true}} {
		if _, err := appendSpilled(nil, spilled{Item: Item{"a": bad}}); err == nil {
			t.Errorf("a value of %d members written", bad.members())
		}
	}
	one, err := appendSpilled(nil, records[1])
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(one); n++ {
		if sp, err := (spillReader{bufio.NewReader(bytes.NewReader(one[:n]))}).next(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("a record cut to %d of %d bytes: %+v, %v", n, len(one), sp, err)
		}
	}

	// Values nested as deep as the segments' decoder takes them read
	// back; deeper is an error, not a stack overflow.
	nested := func(depth int) Item {
		v := Str("x")
		for range depth - 1 {
			v = Value{L: []Value{v}}
		}
		return Item{"a": v}
	}
	for depth, ok := range map[int]bool{MaxValueDepth: true, MaxValueDepth + 1: false, 100000: false} {
		raw, err := appendSpilled(nil, spilled{Item: nested(depth)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (spillReader{bufio.NewReader(bytes.NewReader(raw))}).next(); (err == nil) != ok {
			t.Errorf("values nested %d deep: %v", depth, err)
		}
	}
	// A damaged length allocates no more than the file holds.
	huge := binary.AppendUvarint([]byte{spillItem, 1, 1}, spillMax) // an item of one attribute, its name 1 GiB long
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = (spillReader{bufio.NewReader(bytes.NewReader(huge))}).next()
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; !errors.Is(err, io.ErrUnexpectedEOF) || alloc > 16<<20 {
		t.Errorf("a key of %d bytes in a file of %d: %v, %d bytes allocated", spillMax, len(huge), err, alloc)
	}
}

// A partition's spill file damaged or cut short is an error of the read,
// never the records before it taken for the whole file.
func TestReadSpillFailsOnADamagedFile(t *testing.T) {
	var file []byte
	for _, it := range []Item{{"a": Str("1")}, {"b": Str("2")}} {
		var err error
		if file, err = appendSpilled(file, spilled{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	for name, damaged := range map[string][]byte{"cut short": file[:len(file)-2], "a record of no kind": append(bytes.Clone(file), 9)} {
		f, err := os.CreateTemp(t.TempDir(), "spill")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(damaged); err != nil {
			t.Fatal(err)
		}
		var read int
		if err := readSpill(f, func(spilled) error { read++; return nil }); err == nil {
			t.Errorf("%s: no error (%d records read)", name, read)
		}
		f.Close()
	}
}
