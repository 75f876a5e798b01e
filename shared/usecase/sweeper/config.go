package sweeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// FunctionConfig is the sweeper function's configuration.
type FunctionConfig struct {
	TableName     string
	PayloadBucket string
	Sweeper       Config
	// WriterKeyID is the sweeper's HMAC writer key (WRITER_KEY_ID): every
	// archive stub it writes carries a writer proof. Empty: no proofs.
	WriterKeyID string
}

// ConfigFromEnv reads the configuration with getenv, reporting every
// problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	num := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a non-negative number", name, v))
		}
		return n
	}
	cfg := FunctionConfig{
		TableName:     getenv("TABLE_NAME"),
		PayloadBucket: getenv("PAYLOAD_BUCKET"),
		WriterKeyID:   getenv("WRITER_KEY_ID"),
		Sweeper: Config{
			Bucket:      getenv("ARCHIVE_BUCKET"),
			KMSKeyID:    getenv("ARCHIVE_KMS_KEY_ID"),
			Retention:   time.Duration(num("RETENTION_DAYS", 2557)) * 24 * time.Hour,
			ParkAge:     time.Duration(num("PARK_AGE_SECONDS", 30*24*3600)) * time.Second,
			ResolvedAge: time.Duration(num("RESOLVED_AGE_SECONDS", 7*24*3600)) * time.Second,
			Namespace:   getenv("METRICS_NAMESPACE"),
			Table:       getenv("TABLE_NAME"),
		},
	}
	if cfg.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	if err := cfg.Sweeper.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// LambdaHandler serves the schedule's events. The runtime logs a function
// error's text: it gets the error's kind only.
func (s *Service) LambdaHandler(ctx context.Context, _ events.CloudWatchEvent) (*Report, error) {
	out, err := s.Run(ctx)
	if err != nil {
		return out, fmt.Errorf("run failed: %s", quarantine.ErrorKind(err))
	}
	return out, nil
}
