package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// Table is the value of the metrics' Table dimension (the table's
	// name, TABLE_NAME): several stacks in one account and region publish
	// into the same namespace, and one stack's digest runs must not keep
	// another's alarms quiet. Empty: no dimension.
	Table string
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

// FunctionConfig is the configuration of the ledger's two functions, from
// the environment: the stream function (StreamConfigFromEnv) and the
// digest function (DigestConfigFromEnv). They run the same code with one
// entry point each (StreamEntry, DigestEntry), so that nothing but the
// stream's event source mapping invokes the stream handler (issue 26).
type FunctionConfig struct {
	TableName  string
	Bucket     string
	SigningKey string
	Ledger     Config
	// StreamFunctionName is the stream function's name
	// (STREAM_FUNCTION_NAME, the digest function only): each digest run
	// checks the pipeline with it (pipeline.go: the stream function's
	// mapping on the stream, and the canary). Empty (a test's or a tool's
	// Service) turns that check off.
	StreamFunctionName string
	// FunctionName is the digest function's own name
	// (AWS_LAMBDA_FUNCTION_NAME, which Lambda sets): each digest run names
	// any event source mapping of it as a pipeline problem, since only
	// its schedule (and an operator's baseline) may invoke it.
	FunctionName string
}

// DefaultDigestMaxAge is DIGEST_MAX_AGE's default.
const DefaultDigestMaxAge = 55 * time.Minute

// StreamConfigFromEnv reads the stream function's configuration with
// getenv (TABLE_NAME, LEDGER_BUCKET, SIGNING_KEY_ID, STREAM_ARN,
// LEDGER_RETENTION_DAYS, METRICS_NAMESPACE), reporting every problem at
// once. The digest's own settings are not read: the stream function never
// writes a digest.
func StreamConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	cfg, errs := commonConfig(getenv)
	return cfg, errors.Join(errs...)
}

// DigestConfigFromEnv reads the digest function's configuration: the
// stream function's, plus DIGEST_MAX_AGE, WRITER_PROOFS, the writer keys,
// STREAM_FUNCTION_NAME (required: the pipeline check lists the stream
// function's mappings) and AWS_LAMBDA_FUNCTION_NAME (required; Lambda sets
// it), reporting every problem at once.
func DigestConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	cfg, errs := commonConfig(getenv)
	cfg.StreamFunctionName, cfg.FunctionName = getenv("STREAM_FUNCTION_NAME"), getenv("AWS_LAMBDA_FUNCTION_NAME")
	if cfg.StreamFunctionName == "" {
		errs = append(errs, errors.New("STREAM_FUNCTION_NAME is required (the stream function's name: each digest run checks its stream mapping)"))
	}
	if cfg.FunctionName == "" {
		errs = append(errs, errors.New("AWS_LAMBDA_FUNCTION_NAME is required (the digest function's own name, which Lambda sets)"))
	}
	if cfg.FunctionName != "" && cfg.FunctionName == cfg.StreamFunctionName {
		errs = append(errs, fmt.Errorf("STREAM_FUNCTION_NAME=%q names the digest function itself: the stream and the digest run from two functions", cfg.StreamFunctionName))
	}
	if v := getenv("DIGEST_MAX_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("DIGEST_MAX_AGE=%q is not a positive Go duration", v))
		}
		cfg.Ledger.DigestMaxAge = d
	}
	switch v := getenv("WRITER_PROOFS"); v {
	case "", "false":
	case "true":
		cfg.Ledger.WriterProofs = true
	default:
		errs = append(errs, fmt.Errorf("WRITER_PROOFS=%q is not true or false", v))
	}
	var err error
	if cfg.Ledger.WriterKeys, err = writerKeysFromEnv(getenv); err != nil { // writerkeys.go
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// commonConfig reads what both functions need.
func commonConfig(getenv func(string) string) (FunctionConfig, []error) {
	var errs []error
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), Bucket: getenv("LEDGER_BUCKET"), SigningKey: getenv("SIGNING_KEY_ID"),
		Ledger: Config{StreamARN: getenv("STREAM_ARN"), DigestMaxAge: DefaultDigestMaxAge, Namespace: getenv("METRICS_NAMESPACE"), Table: getenv("TABLE_NAME")}}
	for _, v := range []struct{ name, value string }{{"TABLE_NAME", cfg.TableName}, {"LEDGER_BUCKET", cfg.Bucket}, {"SIGNING_KEY_ID", cfg.SigningKey}, {"STREAM_ARN", cfg.Ledger.StreamARN}} {
		if v.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", v.name))
		}
	}
	days, err := strconv.Atoi(getenv("LEDGER_RETENTION_DAYS"))
	if err != nil || days < 1 {
		errs = append(errs, fmt.Errorf("LEDGER_RETENTION_DAYS=%q is not a number of days ≥ 1", getenv("LEDGER_RETENTION_DAYS")))
	}
	cfg.Ledger.Retention = time.Duration(days) * 24 * time.Hour
	if cfg.Ledger.Namespace == "" {
		cfg.Ledger.Namespace = emf.Namespace
	}
	return cfg, errs
}

// ErrNotThisEntry refuses an event the function's one entry point does
// not take: an action event sent to the stream function, or anything but
// {"action":"digest"} and {"action":"baseline"} sent to the digest
// function. Nothing is read or written before it.
var ErrNotThisEntry = errors.New("event refused")

// StreamEntry is the stream function's Lambda handler: a batch of the
// table's stream, as the event source mapping delivers it (Records and
// shardId), and nothing else. An event with an "action" (the digest's, the
// baseline's, any) is refused before anything is read or written: the
// digest runs from the digest function. Lambda invokes this function only
// through its mapping (no resource policy names it); the batch itself is
// then checked to be from the ledger's stream (HandleStream).
func (s *Service) StreamEntry(ctx context.Context, raw json.RawMessage) (events.DynamoDBTimeWindowEventResponse, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil || probe == nil {
		return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("%w: the ledger stream function takes a stream batch, not %s", ErrNotThisEntry, shape(raw))
	}
	if _, ok := probe["action"]; ok {
		return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("%w: the ledger stream function takes only its stream mapping's batches; "+
			"an action event (%s) goes to the digest function", ErrNotThisEntry, actionOf(probe))
	}
	_, records := probe["Records"]
	_, shard := probe["shardId"]
	if !records && !shard {
		return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("%w: the ledger stream function takes a stream batch (Records, shardId), not %s", ErrNotThisEntry, shape(raw))
	}
	var ev events.DynamoDBTimeWindowEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("malformed stream event: %w", err)
	}
	return s.HandleStream(ctx, ev)
}

// DigestEntry is the digest function's Lambda handler: exactly
// {"action":"digest"} (the schedule's input) or {"action":"baseline"} (an
// operator's one-off), a JSON object with that one member. Anything else,
// a stream batch above all (Records, shardId, or those beside an action:
// what a forged schedule target would send), is refused before anything is
// read or written: the digest function never ledgers a change.
func (s *Service) DigestEntry(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil || probe == nil {
		return nil, fmt.Errorf("%w: the ledger digest function takes {\"action\":\"digest\"} or {\"action\":\"baseline\"}, not %s", ErrNotThisEntry, shape(raw))
	}
	var action string
	if a, ok := probe["action"]; ok && len(probe) == 1 {
		if err := json.Unmarshal(a, &action); err != nil {
			action = ""
		}
	}
	switch action {
	case "digest":
		rep, err := s.Digest(ctx)
		if err != nil {
			return rep, fmt.Errorf("digest failed: %w", err)
		}
		return rep, nil
	case "baseline":
		return s.Baseline(ctx) // baseline.go
	}
	if _, ok := probe["Records"]; ok {
		return nil, fmt.Errorf("%w: the ledger digest function never takes a stream batch (Records): only the stream function's mapping delivers those", ErrNotThisEntry)
	}
	if _, ok := probe["shardId"]; ok {
		return nil, fmt.Errorf("%w: the ledger digest function never takes a stream batch (shardId): only the stream function's mapping delivers those", ErrNotThisEntry)
	}
	return nil, fmt.Errorf("%w: the ledger digest function takes exactly {\"action\":\"digest\"} or {\"action\":\"baseline\"}, not an object with %s", ErrNotThisEntry, members(probe))
}

// shape names what a refused event is, without its values (no payload
// value reaches an error or a log line).
func shape(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "malformed JSON"
	}
	switch v.(type) {
	case map[string]any:
		return "a JSON object"
	case []any:
		return "a JSON array"
	case nil:
		return "null"
	}
	return "a JSON scalar"
}

// members lists an object's member names (sorted, at most 8, each cut to
// 40 bytes).
func members(probe map[string]json.RawMessage) string {
	if len(probe) == 0 {
		return "no members"
	}
	names := slices.Sorted(maps.Keys(probe))
	more := ""
	if len(names) > 8 {
		names, more = names[:8], fmt.Sprintf(" and %d more", len(names)-8)
	}
	for i, n := range names {
		names[i] = strconv.Quote(truncate(n, 40))
	}
	return "members " + strings.Join(names, ", ") + more
}

// actionOf names an event's action for an error: its value when it is a
// short string, else what it is.
func actionOf(probe map[string]json.RawMessage) string {
	var a string
	if err := json.Unmarshal(probe["action"], &a); err != nil {
		return "a non-string action"
	}
	return "action " + strconv.Quote(truncate(a, 40))
}

// MetricDimensionTable is the dimension every ledger metric carries: the
// quarantine table's name.
const MetricDimensionTable = "Table"

// emitLag writes the anchoring lag as an EMF document in Seconds (a
// failure is logged: the digest stands).
func (s *Service) emitLag(at time.Time, seconds float64) {
	if s.Metrics == nil {
		return
	}
	if err := writeEMF(s.Metrics, s.Config, at, MetricAnchoringLag, seconds, "Seconds"); err != nil {
		s.log().Warn("ledger metric not written", "error", err.Error())
	}
}

// writeEMF writes one EMF document of one metric in cfg's namespace, with
// the Table dimension when cfg names a table (package emf writes counts
// only).
func writeEMF(w io.Writer, cfg Config, at time.Time, name string, v float64, unit string) error {
	namespace := cfg.Namespace
	if namespace == "" {
		namespace = emf.Namespace
	}
	doc := map[string]any{name: v}
	dims := []string{}
	if cfg.Table != "" {
		doc[MetricDimensionTable], dims = cfg.Table, []string{MetricDimensionTable}
	}
	doc["_aws"] = map[string]any{"Timestamp": at.UnixMilli(), "CloudWatchMetrics": []any{map[string]any{
		"Namespace": namespace, "Dimensions": [][]string{dims}, "Metrics": []any{map[string]string{"Name": name, "Unit": unit}}}}}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("marshal emf: %w", err)
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
