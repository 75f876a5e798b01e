package ledger

import "time"

// ChainHead is a shard chain's head item (#led#head#<shard>, design §2).
type ChainHead struct {
	Shard string
	// LastSeq is the padded sequence number of the last ledgered change.
	LastSeq       string
	SegmentKey    string
	SegmentSHA256 string
	Segments      int64
	// PendingSince is when the oldest change not yet in a signed digest
	// happened (zero: everything is anchored).
	PendingSince time.Time
	AnchoredSeq  string
	UpdatedAt    time.Time
	// Canary is the highest canary number (CanaryOf) on the chain, up to
	// its head (0: none yet); the digest run reads it to see which of its
	// canaries arrived (issue 25).
	Canary int64
}

// DigestHead is the digest chain's head item (#led#digest).
type DigestHead struct {
	N         int64
	Key       string
	SHA256    string
	Signature string
	At        time.Time
}
