package ingest

import (
	"io"
	"log/slog"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// Clients are the AWS clients ingest needs; nothing else is linked into its
// binary.
type Clients struct {
	DynamoDB dynamostore.API
	S3       s3store.API
}

// New builds the ingest handler on real AWS clients.
func New(cfg Config, clients Clients, log *slog.Logger, metrics io.Writer, now func() time.Time) (*Handler, error) {
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	var payloads quarantine.PayloadStore
	if cfg.PayloadBucket != "" {
		payloads = s3store.New(clients.S3, cfg.PayloadBucket, cfg.PayloadKMSKeyID)
	}
	q := NewQuarantiner(dynamostore.New(clients.DynamoDB, cfg.TableName), payloads, now, QuarantinerConfig{
		Sources:      srcs,
		KeyAttribute: cfg.IdempotencyAttribute,
	})
	return NewHandler(q, log, metrics, now, cfg.Concurrency), nil
}
