// Package ingest is the ingest function: it turns an SQS event from a
// dead-letter queue into sealed quarantine records and reports exactly the
// messages it could not store durably as batch item failures.
package ingest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// Config configures the ingest function. main fills it from the environment
// and calls Validate before building anything.
type Config struct {
	// TableName is the quarantine table (TABLE_NAME). Required.
	TableName string
	// WriterKeyID is ingest's HMAC writer key (WRITER_KEY_ID: its ARN or
	// alias): every record version it writes carries a writer proof
	// (package writerproof). Empty: no proofs.
	WriterKeyID string
	// PayloadBucket holds bodies too large for an item (PAYLOAD_BUCKET).
	// Without it, oversized messages are reported as failures and redelivered.
	PayloadBucket string
	// PayloadKMSKeyID encrypts claim-check objects (PAYLOAD_KMS_KEY_ID).
	PayloadKMSKeyID string
	// IdempotencyAttribute names the producer-supplied key attribute
	// (IDEMPOTENCY_ATTRIBUTE, default "idempotency-key").
	IdempotencyAttribute string
	// Sources maps source queue names to their settings (sources.FromEnv:
	// SOURCES merged with EXTRA_SOURCES and the attached source).
	Sources map[string]SourceConfig
	// Concurrency bounds messages stored at once per batch (default 10).
	Concurrency int
	// DLQARNs are the queues ingest takes batches from (DLQ_ARNS,
	// comma-separated ARNs: the template's DLQ and the attached one): a
	// batch from any other queue is refused, nothing of it written
	// (ErrUnknownDLQ), so that an event source mapping someone points at
	// ingest from a queue of their own seals nothing. Empty: every queue
	// (the unit tests' and `sam local invoke`'s events).
	DLQARNs []string
}

// SourceConfig is one source queue's settings (see package sources).
type SourceConfig = sources.Config

// ParseSources decodes the SOURCES JSON object.
func ParseSources(raw string) (map[string]SourceConfig, error) { return sources.Parse(raw) }

// Validate reports every configuration problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	if c.Concurrency < 0 || c.Concurrency > 100 {
		errs = append(errs, fmt.Errorf("concurrency %d is outside 0..100", c.Concurrency))
	}
	if err := sources.Validate(c.Sources); err != nil {
		errs = append(errs, err)
	}
	ingested := map[string]bool{}
	for _, arn := range c.DLQARNs {
		if !isQueueARN(arn) {
			errs = append(errs, fmt.Errorf("DLQ_ARNS: %q is not an SQS queue ARN", arn))
		}
		ingested[ARNResource(arn)] = true
	}
	// A source whose DLQ ingest does not take batches from would be
	// configured and never quarantined: the stack maps no other DLQ into
	// ingest, and its messages would age out of that DLQ unseen. The init
	// fails instead, naming it (every DLQ then backs up and alarms, and
	// nothing is lost while the configuration is fixed).
	if len(c.DLQARNs) > 0 {
		for _, name := range slices.Sorted(maps.Keys(c.Sources)) {
			// A DLQ registered as a source would let the redrive role send
			// into it: a replay would come back as a dead letter of
			// whatever the sender chose.
			if ingested[name] && c.Sources[name].ARN != "" && slices.Contains(c.DLQARNs, c.Sources[name].ARN) {
				errs = append(errs, fmt.Errorf("source %q is a DLQ ingest takes batches from (DLQ_ARNS), not a source queue", name))
			}
			if dlq := c.Sources[name].DLQ; dlq != "" && !ingested[dlq] {
				errs = append(errs, fmt.Errorf("source %q: dlq %q is not one ingest takes batches from (DLQ_ARNS): its messages would never be quarantined", name, dlq))
			}
		}
	}
	return errors.Join(errs...)
}

// ConfigFromEnv builds a Config from environment variables looked up with
// getenv: os.Getenv in main, the template's variables in the local runner.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	srcs, err := sources.FromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		TableName:            getenv("TABLE_NAME"),
		PayloadBucket:        getenv("PAYLOAD_BUCKET"),
		PayloadKMSKeyID:      getenv("PAYLOAD_KMS_KEY_ID"),
		IdempotencyAttribute: getenv("IDEMPOTENCY_ATTRIBUTE"),
		Sources:              srcs,
		WriterKeyID:          getenv("WRITER_KEY_ID"),
	}
	for _, arn := range strings.Split(getenv("DLQ_ARNS"), ",") {
		if arn = strings.TrimSpace(arn); arn != "" {
			cfg.DLQARNs = append(cfg.DLQARNs, arn)
		}
	}
	return cfg, cfg.Validate()
}
