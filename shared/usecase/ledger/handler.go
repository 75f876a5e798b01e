package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/runtime/emf"
)

// Config is the ledger's configuration (design §5).
type Config struct {
	// StreamARN is the table's stream (STREAM_ARN, required): digests name
	// it, and a batch is taken only when the event and each of its records
	// name it (an empty StreamARN refuses every batch).
	StreamARN string
	// Retention is how long objects are locked (LEDGER_RETENTION_DAYS).
	Retention time.Duration
	// DigestMaxAge: a digest is written at least this often (DIGEST_MAX_AGE,
	// default 55m).
	DigestMaxAge time.Duration
	// Namespace of the metrics (METRICS_NAMESPACE, default DLQQuarantine).
	Namespace string
	// WriterProofs (WRITER_PROOFS=true) marks each digest as the
	// writer-proof cut-off: every change after its heads carries a writer
	// proof (docs/ledger.md). Turn it on once every writing function runs
	// with its WRITER_KEY_ID.
	WriterProofs bool
	// WriterKeys are the writer keys' ARNs by role (INGEST_WRITER_KEY_ARN,
	// REDRIVE_WRITER_KEY_ARN, SWEEPER_WRITER_KEY_ARN: all three or none),
	// recorded in each digest (writerkeys.go).
	WriterKeys map[string]string
}

// FunctionConfig is the ledger function's configuration from the
// environment.
type FunctionConfig struct {
	TableName  string
	Bucket     string
	SigningKey string
	Ledger     Config
	// FunctionName is the function's own name (AWS_LAMBDA_FUNCTION_NAME,
	// which Lambda sets): with it each digest run checks the pipeline
	// (pipeline.go: its stream mapping and the canary); without it (a
	// test's or a tool's Service) it does not.
	FunctionName string
}

// DefaultDigestMaxAge is DIGEST_MAX_AGE's default.
const DefaultDigestMaxAge = 55 * time.Minute

// ConfigFromEnv reads the configuration with getenv, reporting every
// problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), Bucket: getenv("LEDGER_BUCKET"), SigningKey: getenv("SIGNING_KEY_ID"),
		Ledger:       Config{StreamARN: getenv("STREAM_ARN"), DigestMaxAge: DefaultDigestMaxAge, Namespace: getenv("METRICS_NAMESPACE")},
		FunctionName: getenv("AWS_LAMBDA_FUNCTION_NAME")}
	for name, v := range map[string]string{"TABLE_NAME": cfg.TableName, "LEDGER_BUCKET": cfg.Bucket, "SIGNING_KEY_ID": cfg.SigningKey, "STREAM_ARN": cfg.Ledger.StreamARN} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	days, err := strconv.Atoi(getenv("LEDGER_RETENTION_DAYS"))
	if err != nil || days < 1 {
		errs = append(errs, fmt.Errorf("LEDGER_RETENTION_DAYS=%q is not a number of days ≥ 1", getenv("LEDGER_RETENTION_DAYS")))
	}
	cfg.Ledger.Retention = time.Duration(days) * 24 * time.Hour
	if v := getenv("DIGEST_MAX_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("DIGEST_MAX_AGE=%q is not a positive Go duration", v))
		}
		cfg.Ledger.DigestMaxAge = d
	}
	if cfg.Ledger.Namespace == "" {
		cfg.Ledger.Namespace = emf.Namespace
	}
	switch v := getenv("WRITER_PROOFS"); v {
	case "", "false":
	case "true":
		cfg.Ledger.WriterProofs = true
	default:
		errs = append(errs, fmt.Errorf("WRITER_PROOFS=%q is not true or false", v))
	}
	if cfg.Ledger.WriterKeys, err = writerKeysFromEnv(getenv); err != nil { // writerkeys.go
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// LambdaHandler serves both entry points (design §5): a stream batch
// (Records or shardId present) and the schedule's {"action":"digest"}.
func (s *Service) LambdaHandler(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Action  *string          `json:"action"`
		Records *json.RawMessage `json:"Records"`
		ShardID *string          `json:"shardId"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("ledger event is not a JSON object: %w", err)
	}
	switch {
	case probe.Action != nil && *probe.Action == "digest" && probe.Records == nil && probe.ShardID == nil:
		rep, err := s.Digest(ctx)
		if err != nil {
			return rep, fmt.Errorf("digest failed: %w", err)
		}
		return rep, nil
	case probe.Action != nil && *probe.Action == "baseline" && probe.Records == nil && probe.ShardID == nil:
		return s.Baseline(ctx) // baseline.go
	case probe.Action != nil:
		return nil, fmt.Errorf("ledger event with action %q: only \"digest\" and \"baseline\" are known", *probe.Action)
	case probe.Records != nil || probe.ShardID != nil:
		var ev events.DynamoDBTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("malformed stream event: %w", err)
		}
		return s.HandleStream(ctx, ev)
	}
	return nil, errors.New("ledger event is neither a stream batch nor {\"action\":\"digest\"}")
}

// emitLag writes the anchoring lag as an EMF document in Seconds (a
// failure is logged: the digest stands).
func (s *Service) emitLag(at time.Time, seconds float64) {
	if s.Metrics == nil {
		return
	}
	if err := writeEMF(s.Metrics, s.Config.Namespace, at, MetricAnchoringLag, seconds, "Seconds"); err != nil {
		s.log().Warn("ledger metric not written", "error", err.Error())
	}
}

// writeEMF writes one EMF document of one dimensionless metric (package
// emf writes counts only).
func writeEMF(w io.Writer, namespace string, at time.Time, name string, v float64, unit string) error {
	if namespace == "" {
		namespace = emf.Namespace
	}
	doc := map[string]any{name: v, "_aws": map[string]any{"Timestamp": at.UnixMilli(), "CloudWatchMetrics": []any{map[string]any{
		"Namespace": namespace, "Dimensions": [][]string{{}}, "Metrics": []any{map[string]string{"Name": name, "Unit": unit}}}}}}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("marshal emf: %w", err)
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
