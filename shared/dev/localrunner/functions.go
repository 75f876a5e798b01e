package localrunner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// Functions are the real handlers of every function, configured from the
// template's environment variables and wired as the functions' mains wire
// them (package wire), on the stack's clients.
type Functions struct {
	Ingest       *ingest.Handler
	IngestConfig ingest.Config
	// Mapping is the stack's DLQ's event source mapping, Mappings every
	// SQS mapping of the template (IngestMappings): Mapping first, then
	// the attached DLQ's.
	Mapping  Mapping
	Mappings []Mapping
	Redrive  *redrive.Service
	Sweeper  *sweeper.Service
	Metrics  *metrics.Service
	// Source is the template's example source queue (SourceQueue), with
	// its redrive cap and the settle window.
	Source     string
	RedriveCap int
	Settle     time.Duration
	// Lease is how long a redrive claim holds a record.
	Lease time.Duration
	// ArchiveBucket is the sweeper's Object Lock bucket.
	ArchiveBucket string
	// Ledger is the ledger's code in process, configured as the digest
	// function (DigestConfig, which holds all of the stream function's
	// settings too): the tests, the demo and dlqctl's fixtures call it
	// directly for stream batches (HandleStream) and digest runs (Digest,
	// Baseline) alike. Deployed, each of the two functions takes one kind
	// of event (StreamEntry, DigestEntry): NewLedger and NewDigest build
	// each as the template configures it.
	Ledger *ledger.Service
	// LedgerConfig is the stream function's configuration (LedgerFunction),
	// DigestConfig the digest function's (DigestFunction), with the names
	// Lambda gives it (AWS_LAMBDA_FUNCTION_NAME) and the template
	// (STREAM_FUNCTION_NAME).
	LedgerConfig ledger.FunctionConfig
	DigestConfig ledger.FunctionConfig
	// LedgerStream is the stream function's stream mapping.
	LedgerStream StreamMapping
	// LedgerMapping is that mapping in kumo's Lambda: the digest run reads
	// it, LedgerPoller polls only while it is enabled, and tests disable or
	// re-create it (ledgermapping.go).
	LedgerMapping *LedgerMapping

	redriveConfig redrive.FunctionConfig
	sweeperConfig sweeper.FunctionConfig
	log           *slog.Logger
}

// NewFunctions builds them on the stack's clients, or on clients when it is
// not nil (the soak's faulty ones). emfOut receives ingest's EMF lines.
func NewFunctions(st *embedded.Stack, clients *awsclients.Clients, log *slog.Logger, emfOut io.Writer) (*Functions, error) {
	if clients == nil {
		clients = st.Clients
	}
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
	if f.Ingest, err = wire.Ingest(context.Background(), f.IngestConfig, wire.From(clients), wire.Runtime{Log: log, Metrics: emfOut}); err != nil {
		return nil, err
	}
	if f.Mappings, err = IngestMappings(st); err != nil {
		return nil, err
	}
	f.Mapping = f.Mappings[0]
	if getenv, err = env("RedriveFunction"); err != nil {
		return nil, err
	}
	rcfg, err := redrive.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("redrive config from template: %w", err)
	}
	f.redriveConfig, f.log = rcfg, log
	if f.Redrive, err = f.NewRedrive(clients); err != nil {
		return nil, err
	}
	f.Settle, f.Lease = rcfg.Service.SettleWindow, rcfg.Service.Lease
	// The template's example source (SourceQueue), among the others.
	f.Source = st.Names["SourceQueue"]
	s, ok := rcfg.Sources[f.Source]
	if !ok {
		return nil, fmt.Errorf("the redrive function's sources do not include the example source %s", f.Source)
	}
	f.RedriveCap = s.RedriveCap
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
	if f.Metrics, err = wire.Metrics(context.Background(), mcfg, wire.From(clients), wire.Runtime{Log: log}); err != nil {
		return nil, err
	}
	f.sweeperConfig, f.ArchiveBucket = scfg, scfg.Sweeper.Bucket
	if f.Sweeper, err = f.NewSweeper(clients); err != nil {
		return nil, err
	}
	if getenv, err = env("LedgerFunction"); err != nil {
		return nil, err
	}
	if f.LedgerConfig, err = ledger.StreamConfigFromEnv(getenv); err != nil {
		return nil, fmt.Errorf("ledger config from template: %w", err)
	}
	if f.LedgerStream, err = StreamMappingFromTemplate(st.Template, "LedgerStreamMapping", st.StreamARNs["QuarantineTable"]); err != nil {
		return nil, err
	}
	if getenv, err = env("DigestFunction"); err != nil {
		return nil, err
	}
	// The digest function knows its own name, as Lambda tells it
	// (AWS_LAMBDA_FUNCTION_NAME), and the stream function's from the
	// template: its digest runs check the pipeline.
	digestName, err := functionName(st, "DigestFunction")
	if err != nil {
		return nil, err
	}
	lambdaEnv := func(k string) string {
		if k == "AWS_LAMBDA_FUNCTION_NAME" {
			return digestName
		}
		return getenv(k)
	}
	if f.DigestConfig, err = ledger.DigestConfigFromEnv(lambdaEnv); err != nil {
		return nil, fmt.Errorf("digest config from template: %w", err)
	}
	if f.LedgerMapping, err = newLedgerMapping(context.Background(), st, st.Clients.Lambda, f.DigestConfig.StreamFunctionName, f.LedgerStream.StreamARN); err != nil {
		return nil, err
	}
	if f.Ledger, err = f.NewDigest(clients, emfOut); err != nil {
		return nil, err
	}
	return f, nil
}

// AddSource registers another source queue with ingest and redrive, as a
// redeploy with it in SOURCES (and its DLQ, dlqARN, in DLQ_ARNS) does, and
// builds both again on the stack's clients. The template names one
// source; a test of many brings its own queues.
func (f *Functions) AddSource(st *embedded.Stack, name string, c sources.Config, dlqARN string) error {
	ing, red := maps.Clone(f.IngestConfig.Sources), maps.Clone(f.redriveConfig.Sources)
	ing[name], red[name] = c, c
	if err := sources.Validate(red); err != nil {
		return err
	}
	f.IngestConfig.Sources, f.redriveConfig.Sources = ing, red
	f.IngestConfig.DLQARNs = append(slices.Clone(f.IngestConfig.DLQARNs), dlqARN)
	var err error
	if f.Ingest, err = wire.Ingest(context.Background(), f.IngestConfig, wire.From(st.Clients), wire.Runtime{Log: f.log, Metrics: io.Discard}); err != nil {
		return err
	}
	f.Redrive, err = f.NewRedrive(st.Clients)
	return err
}

// NewLedger builds another stream function, as the template configures
// it, on other clients (one process of it, in the soak); metricsOut
// receives its EMF lines.
func (f *Functions) NewLedger(c *awsclients.Clients, metricsOut io.Writer) (*ledger.Service, error) {
	return wire.Ledger(context.Background(), f.LedgerConfig, wire.From(c), wire.Runtime{Log: f.log, Metrics: metricsOut})
}

// NewDigest builds another digest function, as the template configures
// it, on other clients; metricsOut receives its EMF lines.
func (f *Functions) NewDigest(c *awsclients.Clients, metricsOut io.Writer) (*ledger.Service, error) {
	return wire.Ledger(context.Background(), f.DigestConfig, wire.From(c), wire.Runtime{Log: f.log, Metrics: metricsOut})
}

// LedgerPoller is a poller that feeds the table's stream to handler
// (Ledger.HandleStream, or an invocation of the function) as the ledger's
// mapping does.
func (f *Functions) LedgerPoller(c *awsclients.Clients, handler StreamHandler) *StreamPoller {
	return &StreamPoller{API: c.DynamoDBStreams, StreamARN: f.LedgerStream.StreamARN, Handler: handler,
		BatchSize: f.LedgerStream.BatchSize, Bisect: f.LedgerStream.Bisect, Log: f.log, Gate: f.LedgerMapping}
}

// NewRedrive builds another redrive function, as configured from the
// template, on other clients (one process of it, in the soak).
func (f *Functions) NewRedrive(c *awsclients.Clients, adjust ...func(*redrive.Config)) (*redrive.Service, error) {
	cfg := f.redriveConfig
	for _, a := range adjust {
		a(&cfg.Service)
	}
	return wire.Redrive(context.Background(), cfg, wire.From(c), wire.Runtime{Log: f.log})
}

// NewSweeper builds another sweeper function on other clients; adjust may
// change its configuration (the soak bounds each run).
func (f *Functions) NewSweeper(c *awsclients.Clients, adjust ...func(*sweeper.Config)) (*sweeper.Service, error) {
	cfg := f.sweeperConfig
	for _, a := range adjust {
		a(&cfg.Sweeper)
	}
	return wire.Sweeper(context.Background(), cfg, wire.From(c), wire.Runtime{Log: f.log})
}

// functionName is the name the stack gives the function with logicalID.
func functionName(st *embedded.Stack, logicalID string) (string, error) {
	fn, err := st.Template.GetServerlessFunctionWithName(logicalID)
	if err != nil {
		return "", err
	}
	name := st.Names[logicalID]
	if fn.FunctionName != nil {
		name = *fn.FunctionName
	}
	if name == "" {
		return "", fmt.Errorf("function %s has no name", logicalID)
	}
	return name, nil
}

// newLedgerMapping creates (or finds) the ledger's stream mapping in kumo,
// enabled as the template says.
func newLedgerMapping(ctx context.Context, st *embedded.Stack, api LambdaMappingAPI, function, streamARN string) (*LedgerMapping, error) {
	m, err := st.Template.GetLambdaEventSourceMappingWithName("LedgerStreamMapping")
	if err != nil {
		return nil, err
	}
	return NewLedgerMapping(ctx, api, function, streamARN, m.Enabled == nil || *m.Enabled)
}
