package quarantine

import (
	"cmp"
	"strings"
)

// CompareSequence orders two SQS sequence numbers: decimal strings of up to
// 128 bits, too large for an int64. It compares by length (after leading
// zeros) and then lexically, and returns -1, 0 or +1. An empty sequence
// number (a record from a standard queue, or stored before sequence numbers
// were kept) sorts before every other.
func CompareSequence(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// CompareFIFO orders records the way a FIFO source queue must receive their
// replays: by message group, then by the SQS sequence number of their
// first arrival, then by first_seen and id (ties, and records without a
// sequence number).
func CompareFIFO(a, b *Record) int {
	if c := strings.Compare(a.MessageGroupID, b.MessageGroupID); c != 0 {
		return c
	}
	if c := CompareSequence(a.SequenceNumber, b.SequenceNumber); c != 0 {
		return c
	}
	if c := a.FirstSeen.Compare(b.FirstSeen.Time); c != 0 {
		return c
	}
	return strings.Compare(a.DLQID, b.DLQID)
}
