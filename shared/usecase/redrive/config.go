package redrive

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// FunctionConfig configures the redrive function; main fills it from the
// environment with ConfigFromEnv.
type FunctionConfig struct {
	// TableName is the quarantine table (TABLE_NAME). Required.
	TableName string
	// WriterKeyID is redrive's HMAC writer key (WRITER_KEY_ID): every
	// record and policy version it writes carries a writer proof. Empty:
	// no proofs.
	WriterKeyID string
	// PayloadBucket holds claim-check bodies (PAYLOAD_BUCKET).
	PayloadBucket string
	// Sources are the source queues (sources.FromEnv: SOURCES merged with
	// EXTRA_SOURCES and the attached source, as for ingest).
	Sources map[string]sources.Config
	// Service tunes leases, settling and approval (LEASE_SECONDS,
	// SETTLE_WINDOW_SECONDS, SETTLE_MARGIN_SECONDS, APPROVAL_THRESHOLD),
	// and says whether the breakers' counters are live (COUNTERS_LIVE,
	// "true" or "false"; unset: "true"): the template sets "false" while
	// the ledger's stream mapping is off (LedgerMappingEnabled=false), when
	// nothing counts replays or comebacks (Config.CountersOff). The settle
	// margin is never less than the ingest lag that INGEST_TIMEOUT_SECONDS
	// and DLQ_VISIBILITY_SECONDS imply (IngestLag).
	Service Config
}

// validRoleName reports whether name is an IAM role name (1 to 64 of
// [A-Za-z0-9+=,.@_-]).
func validRoleName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+=,.@_-", c)) {
			return false
		}
	}
	return true
}

// DLQBatchingWindow is the DLQ event source's MaximumBatchingWindowInSeconds
// in the template.
const DLQBatchingWindow = time.Second

// IngestLag is the longest a dead-lettered replay can take from the DLQ to
// its record, when ingest's invocation times out and is retried twice: the
// event source's batching window, an ingest invocation, and two DLQ
// visibility timeouts. Zero when either is unknown (0): the configured
// margin then stands alone.
func IngestLag(ingestTimeout, dlqVisibility time.Duration) time.Duration {
	if ingestTimeout <= 0 || dlqVisibility <= 0 {
		return 0
	}
	return DLQBatchingWindow + ingestTimeout + 2*dlqVisibility
}

// ConfigFromEnv reads the configuration with getenv and validates it,
// reporting every problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	srcs, err := sources.RequiredFromEnv(getenv)
	var tagged map[string]bool
	if err != nil {
		errs = append(errs, err)
	} else if tagged, err = sources.Grants(getenv, srcs); err != nil {
		// It sends: a source its role may not send to fails init, named.
		errs = append(errs, err)
	}
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), PayloadBucket: getenv("PAYLOAD_BUCKET"), Sources: srcs, WriterKeyID: getenv("WRITER_KEY_ID")}
	if len(tagged) > 0 {
		cfg.Service.TaggedSources = tagged
		cfg.Service.SourceTagValue = strings.TrimSpace(getenv(sources.EnvSourceTagValue))
	}
	cfg.Service.Region = strings.TrimSpace(getenv("AWS_REGION"))
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
	cfg.Service.SettleMargin = max(seconds("SETTLE_MARGIN_SECONDS"), IngestLag(seconds("INGEST_TIMEOUT_SECONDS"), seconds("DLQ_VISIBILITY_SECONDS")))
	if v := getenv("APPROVAL_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("APPROVAL_THRESHOLD=%q is not a positive number", v))
		}
		cfg.Service.ApprovalThreshold = n
	}
	cfg.Service.ApprovalTTL = seconds("APPROVAL_TTL_SECONDS")
	if cfg.Service.ApprovalTTL > MaxApprovalTTL {
		errs = append(errs, fmt.Errorf("APPROVAL_TTL_SECONDS=%q is above %d (7 days)", getenv("APPROVAL_TTL_SECONDS"), int(MaxApprovalTTL.Seconds())))
	}
	if v := strings.TrimSpace(getenv("TRUSTED_SESSION_ROLES")); v != "" {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if !validRoleName(name) {
				errs = append(errs, fmt.Errorf("TRUSTED_SESSION_ROLES names %q, not an IAM role name", name))
				continue
			}
			cfg.Service.TrustedSessionRoles = append(cfg.Service.TrustedSessionRoles, name)
		}
	}
	switch v := getenv("COUNTERS_LIVE"); v {
	case "", "true":
	case "false":
		cfg.Service.CountersOff = true
	default:
		errs = append(errs, fmt.Errorf("COUNTERS_LIVE=%q is not true or false", v))
	}
	if cfg.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	return cfg, errors.Join(errs...)
}
