// Package sources reads the SOURCES configuration shared by the functions:
// for each source queue, its ARN, its DLQ, where its idempotency key lives,
// the schema its payloads must pass and its redrive cap.
package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
)

// Config is one source queue's settings, as written in SOURCES.
type Config struct {
	ARN                string `json:"arn"`
	DLQ                string `json:"dlq"`
	IdempotencyPointer string `json:"idempotency_pointer,omitempty"`
	// Schema names an embedded schema or a schema file; empty accepts any JSON.
	Schema     string `json:"schema,omitempty"`
	Opaque     bool   `json:"opaque,omitempty"`
	RedriveCap int    `json:"redrive_cap,omitempty"`
	// FourEyes lists the high-risk actions on this source that need a
	// second, different verified principal's approval (quarantine.Risks:
	// parked, large, correction, policy, resume). Absent: all of them; an
	// empty list: none (each then runs on one verified request).
	FourEyes *[]string `json:"four_eyes,omitempty"`
}

// Parse decodes the SOURCES JSON object, rejecting unknown fields.
func Parse(raw string) (map[string]Config, error) {
	out := map[string]Config{}
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

// Validate reports every problem with the sources.
func Validate(cfg map[string]Config) error {
	var errs []error
	for name, s := range cfg {
		if name == "" || strings.ContainsAny(name, "#:/") {
			errs = append(errs, fmt.Errorf("source %q: not a queue name", name))
		}
		// Several sources may share one DLQ: ingest routes each message by
		// its DeadLetterQueueSourceArn.
		if s.DLQ == "" {
			errs = append(errs, fmt.Errorf("source %q: dlq is required", name))
		}
		if s.IdempotencyPointer != "" && !strings.HasPrefix(s.IdempotencyPointer, "/") {
			errs = append(errs, fmt.Errorf("source %q: idempotency_pointer %q must start with /", name, s.IdempotencyPointer))
		}
		if s.RedriveCap < 0 {
			errs = append(errs, fmt.Errorf("source %q: redrive_cap must not be negative", name))
		}
		if s.FourEyes != nil {
			for _, r := range *s.FourEyes {
				if !quarantine.Risk(r).Valid() {
					errs = append(errs, fmt.Errorf("source %q: four_eyes names %q, not one of %s", name, r, quarantine.RiskNames()))
				}
			}
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

// Build compiles each source's schema into quarantine.Sources.
func Build(cfg map[string]Config) (map[string]*quarantine.Source, error) {
	out := make(map[string]*quarantine.Source, len(cfg))
	for name, s := range cfg {
		src := &quarantine.Source{
			Name: name, ARN: s.ARN, DLQName: s.DLQ, IdempotencyPointer: s.IdempotencyPointer,
			Opaque: s.Opaque, RedriveCap: s.RedriveCap, // FourEyes nil: every risk
		}
		if s.FourEyes != nil {
			src.FourEyes = map[quarantine.Risk]bool{}
			for _, r := range *s.FourEyes {
				src.FourEyes[quarantine.Risk(r)] = true
			}
		}
		if src.RedriveCap == 0 {
			src.RedriveCap = quarantine.DefaultRedriveCap
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

// ParseRequired decodes and validates SOURCES for a function that needs at
// least one source (redrive, metrics), reporting every problem at once.
func ParseRequired(raw string) (map[string]Config, error) {
	srcs, err := Parse(raw)
	if err != nil {
		return srcs, err
	}
	if len(srcs) == 0 {
		return srcs, errors.New("SOURCES names no source queue")
	}
	return srcs, Validate(srcs)
}
