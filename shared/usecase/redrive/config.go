package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// FunctionConfig configures the redrive function; main fills it from the
// environment with ConfigFromEnv.
type FunctionConfig struct {
	// TableName is the quarantine table (TABLE_NAME). Required.
	TableName string
	// PayloadBucket holds claim-check bodies (PAYLOAD_BUCKET).
	PayloadBucket string
	// Sources are the source queues (SOURCES, JSON, as for ingest).
	Sources map[string]sources.Config
	// Service tunes leases, settling and approval (LEASE_SECONDS,
	// SETTLE_WINDOW_SECONDS, SETTLE_MARGIN_SECONDS, APPROVAL_THRESHOLD).
	Service Config
}

// ConfigFromEnv reads the configuration with getenv and validates it,
// reporting every problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	srcs, err := sources.ParseRequired(getenv("SOURCES"))
	if err != nil {
		errs = append(errs, err)
	}
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), PayloadBucket: getenv("PAYLOAD_BUCKET"), Sources: srcs}
	seconds := func(name string) time.Duration {
		v := getenv(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive number of seconds", name, v))
		}
		return time.Duration(n) * time.Second
	}
	cfg.Service.Lease = seconds("LEASE_SECONDS")
	cfg.Service.KeyAttribute = getenv("IDEMPOTENCY_ATTRIBUTE")
	cfg.Service.SettleWindow = seconds("SETTLE_WINDOW_SECONDS")
	cfg.Service.SettleMargin = seconds("SETTLE_MARGIN_SECONDS")
	if v := getenv("APPROVAL_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("APPROVAL_THRESHOLD=%q is not a positive number", v))
		}
		cfg.Service.ApprovalThreshold = n
	}
	if cfg.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	return cfg, errors.Join(errs...)
}

// Clients are the AWS clients redrive needs.
type Clients struct {
	DynamoDB interface {
		dynamostore.API
		dynamostore.QueryAPI
	}
	S3  s3store.API
	SQS Sender
	// CloudWatch, when set, enables standing policies (their breaker
	// metrics).
	CloudWatch MetricsAPI
}

// NewFromConfig builds the service on real AWS clients.
func NewFromConfig(cfg FunctionConfig, c Clients, log *slog.Logger, now func() time.Time) (*Service, error) {
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	var payloads quarantine.PayloadStore
	if cfg.PayloadBucket != "" && c.S3 != nil {
		payloads = s3store.New(c.S3, cfg.PayloadBucket, "")
	}
	store := dynamostore.New(c.DynamoDB, cfg.TableName)
	svc := New(store, dynamostore.NewLister(c.DynamoDB, cfg.TableName), payloads, c.SQS, srcs, now, log, cfg.Service)
	if c.CloudWatch != nil {
		svc.WithPolicies(Policies{Store: dynamostore.NewPolicyStore(c.DynamoDB, cfg.TableName), Counters: store, Metrics: c.CloudWatch})
	}
	return svc, nil
}

// LambdaHandler adapts Handle to lambda.Start's signature. The runtime logs
// a function error's text, so an operational error is returned by its kind
// only (its text may name a record, and so an idempotency key); a request
// error, which names request fields, is returned whole.
func (s *Service) LambdaHandler(ctx context.Context, raw json.RawMessage) (*Report, error) {
	if err := s.checkLease(ctx); err != nil {
		return nil, err
	}
	rep, err := s.Handle(ctx, raw)
	var re *RequestError
	var ce *quarantine.CorrectionError
	var cfe *ConfigError
	var he *HeldError
	// Only an error that is one of these kinds as a whole passes: a joined
	// error of a run may carry other records' ids.
	whole := func(target any) bool { return errors.As(err, target) && !isJoined(err) }
	if err != nil && !whole(&re) && !whole(&ce) && !whole(&cfe) && !whole(&he) && !errors.Is(err, quarantine.ErrCorrectionConflict) {
		return rep, fmt.Errorf("redrive failed: %s (the run's log line has its counts)", quarantine.ErrorKind(err))
	}
	return rep, err
}

// checkLease refuses an invocation that could outlive its claims: the
// invocation's deadline is the function's timeout, and a claim that expired
// while its run still holds it would let another run send the record again.
func (s *Service) checkLease(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) >= s.cfg.Lease {
		return &ConfigError{Problem: fmt.Sprintf("LEASE_SECONDS (%s) must exceed the function timeout (this invocation has %s left)",
			s.cfg.Lease, time.Until(dl).Round(time.Second))}
	}
	return nil
}

// ConfigError is a configuration that makes every run unsafe; it names
// settings only, so a function error returns it whole.
type ConfigError struct{ Problem string }

func (e *ConfigError) Error() string { return "redrive misconfigured: " + e.Problem }

// HeldError is a correction refused because its record fails verification;
// the record was set aside by an integrity hold. It names the reason only.
type HeldError struct{ Reason string }

func (e *HeldError) Error() string {
	return "ids[0] (" + e.Reason + "): " + quarantine.ErrHeld.Error()
}

// Unwrap makes errors.Is(err, quarantine.ErrHeld) hold.
func (e *HeldError) Unwrap() error { return quarantine.ErrHeld }

// isJoined reports whether err joins several errors.
func isJoined(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}
