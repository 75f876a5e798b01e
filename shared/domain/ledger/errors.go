package ledger

import "errors"

// Sentinels of the ledger's ports (the adapters return them).
var (
	// ErrExists: an object was not written because its key holds one
	// (S3's 412 to If-None-Match: *).
	ErrExists = errors.New("ledger object exists")
	// ErrNotFound: no such object or item.
	ErrNotFound = errors.New("ledger object not found")
	// ErrConflict: a conditional update of a ledger item failed.
	ErrConflict = errors.New("ledger item changed")
	// ErrChainBroken: the ledger found an object of its own chain that
	// does not chain to what it holds (alarmed; never papered over).
	ErrChainBroken = errors.New("ledger chain broken")
)
