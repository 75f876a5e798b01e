package metrics

import (
	"errors"
	"log/slog"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// FunctionConfig is the metrics function's configuration.
type FunctionConfig struct {
	TableName string
	Sources   map[string]sources.Config
	Namespace string
}

// ConfigFromEnv reads TABLE_NAME, SOURCES and METRICS_NAMESPACE with getenv,
// reporting every problem at once.
func ConfigFromEnv(getenv func(string) string) (FunctionConfig, error) {
	var errs []error
	srcs, err := sources.ParseRequired(getenv("SOURCES"))
	if err != nil {
		errs = append(errs, err)
	}
	cfg := FunctionConfig{TableName: getenv("TABLE_NAME"), Sources: srcs, Namespace: getenv("METRICS_NAMESPACE")}
	if cfg.TableName == "" {
		errs = append(errs, errors.New("TABLE_NAME is required"))
	}
	return cfg, errors.Join(errs...)
}

// DynamoAPI is what the metrics function needs of DynamoDB.
type DynamoAPI interface {
	dynamostore.API
	dynamostore.QueryAPI
	dynamostore.BatchAPI
}

// NewFromConfig builds the service on real clients.
func NewFromConfig(cfg FunctionConfig, ddb DynamoAPI, sqs QueueAPI, cw MetricsAPI, log *slog.Logger, now func() time.Time) (*Service, error) {
	srcs, err := sources.Build(cfg.Sources)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	store, list := dynamostore.New(ddb, cfg.TableName), dynamostore.NewLister(ddb, cfg.TableName)
	return &Service{SQS: sqs, Counters: store, Signatures: list, Lister: list, Store: store, CloudWatch: cw,
		Sources: srcs, Namespace: cfg.Namespace, Now: now, Log: log}, nil
}
