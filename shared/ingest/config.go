// Package ingest is the ingest function: it turns an SQS event from a
// dead-letter queue into sealed quarantine records and reports exactly the
// messages it could not store durably as batch item failures.
package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/quarantine"
	"github.com/dlqquarantine/dlqq/shared/schemas"
)

// Config configures the ingest function. main fills it from the environment
// and calls Validate before building anything.
type Config struct {
	// TableName is the quarantine table (TABLE_NAME). Required.
	TableName string
	// PayloadBucket holds bodies too large for an item (PAYLOAD_BUCKET).
	// Without it, oversized messages are reported as failures and redelivered.
	PayloadBucket string
	// PayloadKMSKeyID encrypts claim-check objects (PAYLOAD_KMS_KEY_ID).
	PayloadKMSKeyID string
	// IdempotencyAttribute names the producer-supplied key attribute
	// (IDEMPOTENCY_ATTRIBUTE, default "idempotency-key").
	IdempotencyAttribute string
	// Sources maps source queue names to their settings (SOURCES, JSON).
	Sources map[string]SourceConfig
	// Concurrency bounds messages stored at once per batch (default 10).
	Concurrency int
}

// SourceConfig is one source queue's settings, as written in SOURCES.
type SourceConfig struct {
	ARN                string `json:"arn"`
	DLQ                string `json:"dlq"`
	IdempotencyPointer string `json:"idempotency_pointer,omitempty"`
	// Schema names an embedded schema or a schema file; empty accepts any JSON.
	Schema     string `json:"schema,omitempty"`
	Opaque     bool   `json:"opaque,omitempty"`
	RedriveCap int    `json:"redrive_cap,omitempty"`
}

// ParseSources decodes the SOURCES JSON object, rejecting unknown fields.
func ParseSources(raw string) (map[string]SourceConfig, error) {
	out := map[string]SourceConfig{}
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("SOURCES: %w", err)
	}
	return out, nil
}

// Validate reports every configuration problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	if c.Concurrency < 0 || c.Concurrency > 100 {
		errs = append(errs, fmt.Errorf("concurrency %d is outside 0..100", c.Concurrency))
	}
	dlqs := map[string]string{}
	for name, s := range c.Sources {
		if name == "" || strings.ContainsAny(name, "#:/") {
			errs = append(errs, fmt.Errorf("source %q: not a queue name", name))
		}
		if s.DLQ == "" {
			errs = append(errs, fmt.Errorf("source %q: dlq is required", name))
		} else if other, dup := dlqs[s.DLQ]; dup {
			errs = append(errs, fmt.Errorf("sources %q and %q share dlq %q", other, name, s.DLQ))
		}
		dlqs[s.DLQ] = name
		if s.IdempotencyPointer != "" && !strings.HasPrefix(s.IdempotencyPointer, "/") {
			errs = append(errs, fmt.Errorf("source %q: idempotency_pointer %q must start with /", name, s.IdempotencyPointer))
		}
		if s.RedriveCap < 0 {
			errs = append(errs, fmt.Errorf("source %q: redrive_cap must not be negative", name))
		}
		if s.Schema != "" && s.Opaque {
			errs = append(errs, fmt.Errorf("source %q: an opaque source cannot have a schema", name))
		}
		if s.Schema != "" {
			if _, _, err := schemas.Compile(s.Schema); err != nil {
				errs = append(errs, fmt.Errorf("source %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// BuildSources compiles each source's schema into quarantine.Sources.
func BuildSources(cfg map[string]SourceConfig) (map[string]*quarantine.Source, error) {
	out := make(map[string]*quarantine.Source, len(cfg))
	for name, s := range cfg {
		src := &quarantine.Source{
			Name: name, ARN: s.ARN, DLQName: s.DLQ, IdempotencyPointer: s.IdempotencyPointer,
			Opaque: s.Opaque, RedriveCap: s.RedriveCap,
		}
		if s.Schema != "" {
			sch, version, err := schemas.Compile(s.Schema)
			if err != nil {
				return nil, fmt.Errorf("source %q: %w", name, err)
			}
			src.Schema, src.SchemaVersion = sch, version
		}
		out[name] = src
	}
	return out, nil
}

// ConfigFromEnv builds a Config from environment variables looked up with
// getenv: os.Getenv in main, the template's variables in the local runner.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	sources, err := ParseSources(getenv("SOURCES"))
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		TableName:            getenv("TABLE_NAME"),
		PayloadBucket:        getenv("PAYLOAD_BUCKET"),
		PayloadKMSKeyID:      getenv("PAYLOAD_KMS_KEY_ID"),
		IdempotencyAttribute: getenv("IDEMPOTENCY_ATTRIBUTE"),
		Sources:              sources,
	}
	return cfg, cfg.Validate()
}
