// Package capacity measures what a storm of dead-lettered messages writes
// to the quarantine table and projects how many messages per second one
// table takes on real DynamoDB (`make capacity`, docs/operations.md
// "Storm capacity").
//
// A Recorder, a middleware on the functions' DynamoDB client, records
// every item write the real ingest and ledger code makes, with the
// partition key it lands on in the table and in each global secondary
// index the template declares, priced by DynamoDB's rules (Price). Run
// plays a storm through the real handlers on the embedded stack under a
// per-call latency model; Project turns the measurements into a sustained
// rate per limit.
package capacity

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
)

// Item is a DynamoDB item.
type Item = map[string]ddbtypes.AttributeValue

// TableTarget is Write.Target for a write to the table itself.
const TableTarget = "table"

// IndexEntryOverhead is what DynamoDB adds to an index entry's size: "the
// size of the index key attributes, the projected attributes and 100
// bytes of overhead" (GSI.html, "Storage considerations for global
// secondary indexes"; the same size prices the index write).
const IndexEntryOverhead = 100

// Index is one global secondary index: its key and what it projects.
type Index struct {
	Name string
	// Hash and Range are its key attributes (Range empty: none).
	Hash, Range string
	// Projection is ALL, KEYS_ONLY or INCLUDE; NonKey are INCLUDE's
	// attributes.
	Projection string
	NonKey     []string
}

// Layout is the table's key and its indexes.
type Layout struct {
	// Hash and Range are the table's key attributes.
	Hash, Range string
	Indexes     []Index
}

// Has reports whether the layout has the index named name.
func (l Layout) Has(name string) bool {
	return slices.ContainsFunc(l.Indexes, func(ix Index) bool { return ix.Name == name })
}

// LayoutFromTemplate reads the key schema and the global secondary
// indexes of the table with logicalID from the template, so the tool
// prices whatever index layout the template declares.
func LayoutFromTemplate(t *cloudformation.Template, logicalID string) (Layout, error) {
	tbl, err := t.GetDynamoDBTableWithName(logicalID)
	if err != nil {
		return Layout{}, err
	}
	var l Layout
	for _, k := range tbl.KeySchema {
		if k.KeyType == "HASH" {
			l.Hash = k.AttributeName
		} else {
			l.Range = k.AttributeName
		}
	}
	if l.Hash == "" {
		return Layout{}, fmt.Errorf("table %s has no HASH key", logicalID)
	}
	for _, g := range tbl.GlobalSecondaryIndexes {
		ix := Index{Name: g.IndexName, Projection: "ALL"}
		for _, k := range g.KeySchema {
			if k.KeyType == "HASH" {
				ix.Hash = k.AttributeName
			} else {
				ix.Range = k.AttributeName
			}
		}
		if g.Projection != nil {
			ix.Projection = aws.ToString(g.Projection.ProjectionType)
			ix.NonKey = slices.Clone(g.Projection.NonKeyAttributes)
		}
		if ix.Hash == "" {
			return Layout{}, fmt.Errorf("index %s has no HASH key", ix.Name)
		}
		l.Indexes = append(l.Indexes, ix)
	}
	return l, nil
}

// Write is one write DynamoDB bills: to the table or to one index, on one
// partition key value, in write units.
type Write struct {
	// Target is TableTarget or an index's name.
	Target string
	// Key is the partition key value the write lands on (the table's
	// hash key, or the index's).
	Key string
	// Units are the write units it consumes.
	Units int
	// Kind is put, update or delete (an index entry), write (the table),
	// or failed (a conditional write whose condition failed).
	Kind string
	// Transactional is set for an item of a TransactWriteItems.
	Transactional bool
	// Changed says the table's item changed (a stream record follows).
	Changed bool
}

// WriteUnits is one standard write of an item of size bytes: one unit per
// 1 KB, rounded up, at least one (read-write-operations.html, "Capacity
// unit consumption for write operations").
func WriteUnits(size int) int { return max(1, (size+1023)/1024) }

// keyString is a key attribute's value as a string (S, N or B).
func keyString(v ddbtypes.AttributeValue) (string, bool) {
	switch t := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return t.Value, true
	case *ddbtypes.AttributeValueMemberN:
		return t.Value, true
	case *ddbtypes.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(t.Value), true
	}
	return "", false
}

func (ix Index) keys() []string {
	if ix.Range == "" {
		return []string{ix.Hash}
	}
	return []string{ix.Hash, ix.Range}
}

// in says whether item has an entry in the index: it has every key
// attribute of the index (a sparse index leaves the others out).
func (ix Index) in(item Item) bool {
	if item == nil {
		return false
	}
	for _, k := range ix.keys() {
		if _, ok := keyString(item[k]); !ok {
			return false
		}
	}
	return true
}

// entry is item's entry in the index: the table's key, the index's key
// and the projected attributes.
func (l Layout) entry(ix Index, item Item) Item {
	if ix.Projection == "ALL" {
		return item
	}
	names := append([]string{l.Hash, l.Range}, ix.keys()...)
	if ix.Projection == "INCLUDE" {
		names = append(names, ix.NonKey...)
	}
	out := Item{}
	for _, n := range names {
		if v, ok := item[n]; ok && n != "" {
			out[n] = v
		}
	}
	return out
}

func entrySize(e Item) int { return dynamostore.ItemSize(e) + IndexEntryOverhead }

func sameKey(ix Index, a, b Item) bool {
	for _, k := range ix.keys() {
		x, _ := keyString(a[k])
		y, _ := keyString(b[k])
		if x != y {
			return false
		}
	}
	return true
}

// Price returns the writes DynamoDB bills for one item write. key is the
// item's table key; old and new are the item before and after (nil:
// absent); applied is false when the write's condition failed (nothing
// changed). By DynamoDB's rules:
//   - the table: one unit per 1 KB of the larger of the item before and
//     after, rounded up (a delete: the item deleted), twice that in a
//     transaction (transaction-apis.html, "Capacity management for
//     transactions");
//   - a write whose condition failed still consumes units: of the
//     existing item's size, at least one (read-write-operations.html);
//     no index is written;
//   - each index: a put of the new entry when the item enters it, a
//     delete of the old entry when it leaves, a delete and a put when a
//     key attribute of the index changes (two writes), an update when a
//     projected attribute changes, nothing otherwise (GSI.html,
//     "Provisioned throughput considerations for global secondary
//     indexes"); each is a standard write of the entry's size (index key,
//     table key, projected attributes and 100 bytes), also for a
//     transaction's item, since indexes are updated asynchronously
//     outside it.
func (l Layout) Price(key Item, old, new Item, transactional, applied bool) []Write {
	k, _ := keyString(key[l.Hash])
	mult := 1
	if transactional {
		mult = 2
	}
	if !applied {
		return []Write{{Target: TableTarget, Key: k, Units: mult * WriteUnits(dynamostore.ItemSize(old)), Kind: "failed", Transactional: transactional}}
	}
	size := max(dynamostore.ItemSize(old), dynamostore.ItemSize(new))
	out := []Write{{Target: TableTarget, Key: k, Units: mult * WriteUnits(size), Kind: "write", Transactional: transactional,
		Changed: !reflect.DeepEqual(old, new)}}
	for _, ix := range l.Indexes {
		oldIn, newIn := ix.in(old), ix.in(new)
		put := func(item Item, kind string, size int) {
			h, _ := keyString(item[ix.Hash])
			out = append(out, Write{Target: ix.Name, Key: h, Units: WriteUnits(size), Kind: kind})
		}
		switch {
		case !oldIn && newIn:
			put(new, "put", entrySize(l.entry(ix, new)))
		case oldIn && !newIn:
			put(old, "delete", entrySize(l.entry(ix, old)))
		case oldIn && newIn && !sameKey(ix, old, new):
			put(old, "delete", entrySize(l.entry(ix, old)))
			put(new, "put", entrySize(l.entry(ix, new)))
		case oldIn && newIn:
			eo, en := l.entry(ix, old), l.entry(ix, new)
			if !reflect.DeepEqual(eo, en) {
				put(new, "update", max(entrySize(eo), entrySize(en)))
			}
		}
	}
	return out
}
