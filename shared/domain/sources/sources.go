// Package sources reads the SOURCES configuration shared by the functions:
// for each source queue, its ARN, its DLQ, where its idempotency key lives,
// the schema its payloads must pass and its redrive cap.
package sources

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
)

// Config is one source queue's settings, as written in SOURCES.
type Config struct {
	ARN                string `json:"arn"`
	DLQ                string `json:"dlq"`
	IdempotencyPointer string `json:"idempotency_pointer,omitempty"`
	// Schema names an embedded schema or a schema file (a relative path is
	// read from SchemaDir: ResolveSchemas); empty accepts any JSON.
	Schema     string `json:"schema,omitempty"`
	Opaque     bool   `json:"opaque,omitempty"`
	RedriveCap int    `json:"redrive_cap,omitempty"`
	// SettleWindowSeconds, when set, is this source's settle window: a
	// replay into its queue settles after the longest of it, the redrive
	// function's SETTLE_WINDOW_SECONDS and the window the queue's
	// attributes require (a consumer that takes hours to fail a message).
	SettleWindowSeconds int `json:"settle_window_seconds,omitempty"`
	// FourEyes lists the high-risk actions on this source that need a
	// second, different verified principal's approval (quarantine.Risks:
	// parked, large, correction, policy, resume). Absent: all of them; an
	// empty list: none (each then runs on one verified request). retarget
	// is accepted in the list and changes nothing: a replay into another
	// queue always needs a second person (Risk.AlwaysFourEyes).
	FourEyes *[]string `json:"four_eyes,omitempty"`
}

// Parse decodes the SOURCES JSON object, rejecting unknown fields.
func Parse(raw string) (map[string]Config, error) {
	out := map[string]Config{}
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	if err := duplicateName(raw); err != nil {
		return nil, fmt.Errorf("SOURCES: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("SOURCES: %w", err)
	}
	return out, nil
}

// duplicateName reports a source name that the JSON object raw defines
// twice: encoding/json keeps the last silently, so a second entry of one
// name (a lower cap, no schema) would replace the first unseen. Anything
// that is not an object is left to the decoder's own error.
func duplicateName(raw string) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		if seen[name] {
			return fmt.Errorf("source %q is defined twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// Validate reports every problem with the sources. What SQS refuses is
// refused here: a name that is no queue name (1 to 80 of A-Z, a-z, 0-9, -
// and _, a FIFO queue's ending in ".fifo"), an arn that is not the ARN of
// the queue its name says, a DLQ of another type than its source (SQS: "a
// dead-letter queue must be the same type of queue, FIFO or standard, as
// the source queue"). Several sources may share one DLQ: ingest routes
// each message by its DeadLetterQueueSourceArn.
func Validate(cfg map[string]Config) error {
	var errs []error
	names := slices.Sorted(maps.Keys(cfg))
	dlqs := dlqIndex(cfg, names)
	for _, name := range names {
		s := cfg[name]
		if !ValidQueueName(name) {
			errs = append(errs, fmt.Errorf("source %q: not a queue name (1 to 80 of A-Z, a-z, 0-9, - and _; a FIFO queue's ends in .fifo)", name))
		}
		switch {
		case s.ARN == "":
			errs = append(errs, fmt.Errorf("source %q: arn is required (ingest routes by it)", name))
		case !QueueARN(s.ARN) || QueueName(s.ARN) != name:
			errs = append(errs, fmt.Errorf("source %q: arn %q is not the ARN of queue %q", name, s.ARN, name))
		}
		switch {
		case s.DLQ == "":
			errs = append(errs, fmt.Errorf("source %q: dlq is required", name))
		case !ValidQueueName(s.DLQ):
			errs = append(errs, fmt.Errorf("source %q: dlq %q is not a queue name", name, s.DLQ))
		case FIFO(s.DLQ) != FIFO(name):
			errs = append(errs, fmt.Errorf("source %q: dlq %q is not of its type (a FIFO source needs a FIFO dlq, a standard source a standard one)", name, s.DLQ))
		}
		if of := dlqs[s.ARN]; of != "" && cfg[of].DLQ == name {
			errs = append(errs, fmt.Errorf("source %q is the dlq of source %q: a DLQ is no source (the redrive role would send into it, and every replay would come back as a dead letter)", name, of))
		}
		if s.IdempotencyPointer != "" && !strings.HasPrefix(s.IdempotencyPointer, "/") {
			errs = append(errs, fmt.Errorf("source %q: idempotency_pointer %q must start with /", name, s.IdempotencyPointer))
		}
		if s.RedriveCap < 0 {
			errs = append(errs, fmt.Errorf("source %q: redrive_cap must not be negative", name))
		}
		if s.SettleWindowSeconds < 0 || s.SettleWindowSeconds > MaxSettleWindowSeconds {
			errs = append(errs, fmt.Errorf("source %q: settle_window_seconds must be 0 to %d (14 days, the longest SQS keeps a message)", name, MaxSettleWindowSeconds))
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

// MaxSettleWindowSeconds bounds a source's settle window: 14 days, SQS's
// longest message retention (a replay that has not come back by then
// never will).
const MaxSettleWindowSeconds = 14 * 24 * 3600

// dlqIndex maps the ARN of each source's dlq (in its source's account
// and Region) to the first source, by name, that names it: a source whose
// own ARN is there is another's DLQ. One pass over names (sorted), so that
// a deployment of tens of thousands of sources validates in linear time.
func dlqIndex(srcs map[string]Config, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, other := range names {
		o := srcs[other]
		if o.DLQ == "" || !QueueARN(o.ARN) {
			continue
		}
		arn := strings.TrimSuffix(o.ARN, QueueName(o.ARN)) + o.DLQ
		if _, ok := out[arn]; !ok {
			out[arn] = other
		}
	}
	return out
}

// ValidQueueName reports whether name is a name SQS gives a queue: 1 to 80
// characters of A-Z, a-z, 0-9, - and _, a FIFO queue's ending in ".fifo"
// (counted in the 80).
func ValidQueueName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if len(name) > 80 || base == "" {
		return false
	}
	for _, c := range base {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// FIFO reports whether the queue called name is a FIFO queue.
func FIFO(name string) bool { return strings.HasSuffix(name, ".fifo") }

// QueueARN reports whether arn has the shape
// arn:<partition>:sqs:<region>:<12-digit account>:<queue name>.
func QueueARN(arn string) bool {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[1] == "" || p[2] != "sqs" || p[3] == "" || len(p[4]) != 12 || !ValidQueueName(p[5]) {
		return false
	}
	for _, c := range p[4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// SchemaDir is the directory a schema file named by a relative path is
// read from: SCHEMA_DIR when set, else the Lambda task root
// (LAMBDA_TASK_ROOT, where the deployment package is unpacked), else ""
// (the working directory).
func SchemaDir(getenv func(string) string) string {
	return cmp.Or(getenv("SCHEMA_DIR"), getenv("LAMBDA_TASK_ROOT"))
}

// ResolveSchemas returns cfg with each schema that is a relative file path
// (not the name of a schema embedded in the binary) made relative to dir
// (SchemaDir): a source may bring its schema as a file shipped with the
// deployment, no code change. cfg itself is not changed.
func ResolveSchemas(cfg map[string]Config, dir string) map[string]Config {
	if dir == "" {
		return cfg
	}
	out := make(map[string]Config, len(cfg))
	for name, s := range cfg {
		if s.Schema != "" && !schemas.IsEmbedded(s.Schema) && !filepath.IsAbs(s.Schema) {
			s.Schema = filepath.Join(dir, s.Schema)
		}
		out[name] = s
	}
	return out
}

// Build compiles each source's schema into quarantine.Sources.
func Build(cfg map[string]Config) (map[string]*quarantine.Source, error) {
	out := make(map[string]*quarantine.Source, len(cfg))
	for name, s := range cfg {
		src := &quarantine.Source{
			Name: name, ARN: s.ARN, DLQName: s.DLQ, IdempotencyPointer: s.IdempotencyPointer,
			Opaque: s.Opaque, RedriveCap: s.RedriveCap, // FourEyes nil: every risk
			SettleWindow: time.Duration(s.SettleWindowSeconds) * time.Second,
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
func ParseRequired(raw string) (map[string]Config, error) { return ParseRequiredIn(raw, "") }

// ParseRequiredIn is ParseRequired with schema files read from schemaDir
// (SchemaDir; ResolveSchemas).
func ParseRequiredIn(raw, schemaDir string) (map[string]Config, error) {
	srcs, err := Parse(raw)
	if err != nil {
		return srcs, err
	}
	srcs = ResolveSchemas(srcs, schemaDir)
	if len(srcs) == 0 {
		return srcs, errors.New("SOURCES names no source queue")
	}
	return srcs, Validate(srcs)
}
