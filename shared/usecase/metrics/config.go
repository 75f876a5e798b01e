package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// FunctionConfig is the metrics function's configuration.
type FunctionConfig struct {
	TableName string
	Sources   map[string]sources.Config
	Namespace string
}

// ConfigFromEnv reads TABLE_NAME, the sources (sources.FromEnv: SOURCES,
// EXTRA_SOURCES, …) and METRICS_NAMESPACE with getenv,
// reporting every problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	srcs, err := sources.RequiredFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), Sources: srcs, Namespace: getenv("METRICS_NAMESPACE")}
	if cfg.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	return cfg, errors.Join(errs...)
}

// LambdaHandler serves the schedule's events. The runtime logs a function
// error's text: it gets the error's kind only.
func (s *Service) LambdaHandler(ctx context.Context, _ events.CloudWatchEvent) ([]Report, error) {
	out, err := s.Run(ctx)
	if err != nil {
		return out, fmt.Errorf("run failed: %s", quarantine.ErrorKind(err))
	}
	return out, nil
}
