package quarantine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Bounds and defaults of ingest's records (package ingest applies them to
// its configuration; corrections and the stores share the budget).
const (
	DefaultKeyAttribute        = "idempotency-key"
	DefaultMaxAttempts         = 20
	DefaultRedriveCap          = 3
	DefaultBodyInlineMax       = 128 << 10
	DefaultAttributesInlineMax = 32 << 10
	DefaultMaxWriteRetries     = 64
	// MaxMaxAttempts is the largest attempt history a record may keep:
	// with every attempt's texts bounded, it keeps a record's growth within
	// its reserve under DynamoDB's 400 KB item limit.
	MaxMaxAttempts = 100
	// ItemBudget is the most a record may take in JSON when it is written
	// first, leaving room under DynamoDB's 400 KB item limit for attribute
	// names and the history growing to its bound (GrowthReserve).
	ItemBudget = 300 << 10
)

// GrowthReserve is what a record may grow by after it is created, in
// DynamoDB's size units: a full attempt history and a full list of reads,
// every entry at its bound. Failure fields are replaced, never appended,
// and are bounded too.
func GrowthReserve(maxAttempts int) int {
	return maxAttempts*maxAttemptBytes + DefaultMaxReads*maxReadBytes
}

// RecordSize is the size of r in JSON.
func RecordSize(r *Record) (int, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("marshal record: %w", err)
	}
	return len(raw), nil
}

// Bounded returns c with every text clipped to its bound in the item.
func (c Classification) Bounded() Classification { return c.bound() }

// ErrChainTooLong means a key has more successor records than ingest walks.
var ErrChainTooLong = errors.New("too many successor records for one key")

// MaxChain bounds the successor records walked for one key (one is opened
// per archive of the key's current record, so chains stay short).
const MaxChain = 256

// ChainID is the id of position pos of the chain that starts at start: the
// start itself, then its successors "<start>#r<pos>".
func ChainID(start string, pos int) string {
	if pos == 0 {
		return start
	}
	return start + "#r" + strconv.Itoa(pos)
}

// Standing is how a record on a key's chain stands towards an arrival.
type Standing int

// Standings of a record on a key's chain.
const (
	StandingOpen    Standing = iota // takes the arrival
	StandingClosed                  // archived: the arrival goes to its successor
	StandingBroken                  // fails its seal: nothing in it is trusted
	StandingForeign                 // another key's record that happens to sit at this id
)

// StandingOf says how cur, at position pos of the chain, stands towards an
// arrival for proto's key; prev is the chain's last closed or broken record.
func StandingOf(cur, prev, proto *Record, pos int) (Standing, error) {
	if err := Verify(cur); err != nil {
		var se *SealError
		if errors.As(err, &se) {
			return StandingBroken, nil
		}
		return 0, err
	}
	if cur.IdempotencyKey != proto.IdempotencyKey {
		return StandingForeign, nil
	}
	if cur.SourceARN != "" && proto.SourceARN != "" && cur.SourceARN != proto.SourceARN {
		// The same name and key from another queue (a source recorded
		// while unconfigured, then configured with another ARN): never
		// the same event.
		return StandingForeign, nil
	}
	if pos > 0 {
		// A successor names the record before it; anything else at a
		// successor's id belongs to a key that ends in "#r<n>".
		want, got := "", ""
		if prev != nil {
			want = prev.DLQID
		}
		if cur.Predecessor != nil {
			got = cur.Predecessor.ID
		}
		if got != want {
			return StandingForeign, nil
		}
	}
	if cur.Status == StatusArchived {
		return StandingClosed, nil
	}
	return StandingOpen, nil
}

// Successor returns the new record to create at id: proto itself, linked to
// prev when prev could not take the arrival (how is prev's standing,
// StandingClosed or StandingBroken). A successor of an archived record
// carries its redrive count on, so the cap holds across the chain.
// maxAttempts bounds the attempt history.
func Successor(proto *Record, id string, prev *Record, how Standing, att Attempt, maxAttempts int) *Record {
	rec := proto.Clone()
	rec.DLQID = id
	att.Kind = AttemptArrival
	if prev == nil {
		rec.Attempts = appendBounded(nil, att, maxAttempts)
		return rec
	}
	reason := LinkArchived
	if how == StandingBroken {
		reason = LinkSealMismatch
	}
	rec.Predecessor = &RecordLink{ID: prev.DLQID, Seal: prev.Seal, Reason: reason}
	// The same event: it keeps its place in its FIFO group (the order a
	// replay walks a group in), as first_seen is kept on any re-failure.
	if !prev.FirstSeen.IsZero() && prev.FirstSeen.Before(rec.FirstSeen.Time) {
		rec.FirstSeen = prev.FirstSeen
	}
	if prev.SequenceNumber != "" {
		rec.SequenceNumber = prev.SequenceNumber
	}
	if how == StandingClosed {
		rec.RedriveCount = prev.RedriveCount
		rec.RedriveCap = max(rec.RedriveCap, prev.RedriveCap)
		att.Note = JoinNote(att.Note, fmt.Sprintf("successor of an archived record; redrive count %d of cap %d carried on", rec.RedriveCount, rec.RedriveCap))
	} else {
		// Nothing in the broken record can be trusted, its redrive count
		// least of all: the successor starts at its cap, so the next run
		// parks it as poison (alarmed) and no run replays it without an
		// approval, which raises the cap in the sealed history.
		att.Note = JoinNote(att.Note, "successor of a record that fails its seal (set aside, untouched); at its cap: its redrive count cannot be trusted")
		rec.RedriveCap = max(rec.RedriveCap, prev.RedriveCap)
		rec.RedriveCount = max(prev.RedriveCount, rec.RedriveCap)
	}
	rec.Attempts = appendBounded(nil, att, maxAttempts)
	return rec
}

// JoinNote joins two attempt notes with "; ", either of which may be empty.
func JoinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
