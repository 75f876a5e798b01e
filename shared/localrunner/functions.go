package localrunner

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/embedded"
	"github.com/dlqquarantine/dlqq/shared/ingest"
	"github.com/dlqquarantine/dlqq/shared/metrics"
	"github.com/dlqquarantine/dlqq/shared/redrive"
	"github.com/dlqquarantine/dlqq/shared/s3payload"
	"github.com/dlqquarantine/dlqq/shared/sweeper"
)

// Functions are the real handlers of every function, configured from the
// template's environment variables, on the stack's clients.
type Functions struct {
	Ingest       *ingest.Handler
	IngestConfig ingest.Config
	// Mapping is the DLQ's event source mapping.
	Mapping Mapping
	Redrive *redrive.Service
	Sweeper *sweeper.Service
	Metrics *metrics.Service
	// Source is the template's source queue, with its redrive cap and the
	// settle window.
	Source     string
	RedriveCap int
	Settle     time.Duration
}

// NewFunctions builds them. emfOut receives ingest's EMF lines.
func NewFunctions(st *embedded.Stack, log *slog.Logger, emfOut io.Writer) (*Functions, error) {
	env := func(id string) (func(string) string, error) {
		fn, err := st.Template.GetServerlessFunctionWithName(id)
		if err != nil {
			return nil, err
		}
		return func(k string) string { return fn.Environment.Variables[k] }, nil
	}
	f := &Functions{}
	getenv, err := env("IngestFunction")
	if err != nil {
		return nil, err
	}
	if f.IngestConfig, err = ingest.ConfigFromEnv(getenv); err != nil {
		return nil, fmt.Errorf("ingest config from template: %w", err)
	}
	if f.Ingest, err = ingest.New(f.IngestConfig, ingest.Clients{DynamoDB: st.Clients.DynamoDB, S3: st.Clients.S3}, log, emfOut, nil); err != nil {
		return nil, err
	}
	if f.Mapping, err = MappingFromTemplate(st.Template, "IngestDLQMapping", st.QueueURLs["DeadLetterQueue"], st.QueueARNs["DeadLetterQueue"], st.AWS.Region); err != nil {
		return nil, err
	}
	if getenv, err = env("RedriveFunction"); err != nil {
		return nil, err
	}
	rcfg, err := redrive.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("redrive config from template: %w", err)
	}
	if f.Redrive, err = redrive.NewFromConfig(rcfg, redrive.Clients{DynamoDB: st.Clients.DynamoDB, S3: st.Clients.S3, SQS: st.Clients.SQS}, log, nil); err != nil {
		return nil, err
	}
	f.Settle = rcfg.Service.SettleWindow
	for name, s := range rcfg.Sources {
		f.Source, f.RedriveCap = name, s.RedriveCap
	}
	if getenv, err = env("SweeperFunction"); err != nil {
		return nil, err
	}
	scfg, err := sweeper.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("sweeper config from template: %w", err)
	}
	if getenv, err = env("MetricsFunction"); err != nil {
		return nil, err
	}
	mcfg, err := metrics.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("metrics config from template: %w", err)
	}
	if f.Metrics, err = metrics.NewFromConfig(mcfg, st.Clients.DynamoDB, st.Clients.SQS, st.Clients.CloudWatch, log, nil); err != nil {
		return nil, err
	}
	table := scfg.TableName
	f.Sweeper = sweeper.New(dynamostore.New(st.Clients.DynamoDB, table), dynamostore.NewLister(st.Clients.DynamoDB, table),
		s3payload.New(st.Clients.S3, scfg.PayloadBucket, ""), st.Clients.S3, st.Clients.CloudWatch, nil, log, scfg.Sweeper)
	return f, nil
}
