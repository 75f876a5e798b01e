package quarantine

import "context"

// Store persists quarantine records. Every write is conditional: Create only
// when the dlq_id is new, Replace only when the stored version still equals
// the expected one. Implementations: dynamostore (DynamoDB) and memstore.
type Store interface {
	// Create stores a new record, or returns ErrExists.
	Create(ctx context.Context, r *Record) error
	// Get reads a record with a strongly consistent read, or returns ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)
	// Replace stores r when the stored version equals expectedVersion, or
	// returns ErrVersionConflict (ErrNotFound if the record is gone).
	Replace(ctx context.Context, r *Record, expectedVersion int64) error
}

// PayloadStore keeps bodies and attribute sets too large for a store item
// (the claim check). Implementations: s3payload and memstore.
type PayloadStore interface {
	// PutPayload stores data under key and returns a reference with its hash.
	PutPayload(ctx context.Context, key string, data []byte) (ObjectRef, error)
	// GetPayload reads the object back and returns ErrPayloadMismatch when
	// its bytes do not hash to ref.SHA256.
	GetPayload(ctx context.Context, ref ObjectRef) ([]byte, error)
}
