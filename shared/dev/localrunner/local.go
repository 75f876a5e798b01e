package localrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
)

// LocalFunctions are the template's seven functions, by logical id, with
// the ./functions directory that builds each.
var LocalFunctions = []struct{ LogicalID, Dir string }{
	{"IngestFunction", "ingest"},
	{"RedriveFunction", "redrive"},
	{"OperatorFunction", "operator"},
	{"SweeperFunction", "sweeper"},
	{"MetricsFunction", "metrics"},
	{"LedgerFunction", "ledger"},
	{"DigestFunction", "digest"},
}

// The template's event source mappings the runner feeds, by logical id.
const (
	ingestMapping = "IngestDLQMapping"
	ledgerMapping = "LedgerStreamMapping"
	ledgerTable   = "QuarantineTable"
)

// LocalOptions configure StartLocal.
type LocalOptions struct {
	// BuildDir receives the bootstraps (a directory of the stack's data).
	BuildDir string
	// Output receives the bootstraps' output, each line prefixed with its
	// function's name; it must accept concurrent writes (syncio.Writer).
	Output io.Writer
	// Log receives the runner's own lines (supervisor, poller, schedules).
	Log *slog.Logger
	// Progress receives what is being done, for a person waiting.
	Progress io.Writer
}

// Local is the template's functions deployed in kumo's Lambda API, each
// served by its real bootstrap under a supervisor, with the DLQ's event
// source mapping, the table stream's mapping and the schedules invoking
// them through the Lambda API.
type Local struct {
	Stack *embedded.Stack
	// Functions maps logical ids to the running functions.
	Functions map[string]*lambdatest.Supervised
	// Mappings are the template's SQS mappings (IngestMappings), each
	// fed by its poller (Pollers, in the same order); Mapping and Poller
	// are the stack's DLQ's.
	Mapping   Mapping
	Mappings  []Mapping
	Schedules []Schedule
	Lambda    *lambda.Client
	Poller    *Poller
	Pollers   []*Poller
	// LedgerStream is the table stream's mapping to the ledger function;
	// LedgerPoller feeds it by invoking the function (InvokeStream).
	LedgerStream StreamMapping
	LedgerPoller *StreamPoller
	// LedgerMapping is the ledger's mapping in kumo (ledgermapping.go):
	// the ledger reads it, LedgerPoller follows it.
	LedgerMapping *LedgerMapping

	// Endpoint is the operator endpoint: the operator function behind a
	// SigV4 check against the local identities, as a function URL with
	// AWS_IAM fronts it on AWS (docs/identity.md).
	Endpoint *lambdatest.Endpoint

	// Progress, when not nil, is told what the stop waits for.
	Progress io.Writer

	log *slog.Logger
}

// StartLocal builds the seven bootstraps for this machine, creates each
// function in kumo as the template deploys it (name, environment, timeout,
// memory) and starts it under a supervisor. It returns once every
// bootstrap polls for invocations. On an error it stops what it started
// and returns a nil *Local.
func StartLocal(ctx context.Context, st *embedded.Stack, o LocalOptions) (_ *Local, err error) {
	if o.Output == nil {
		o.Output = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	l := &Local{Stack: st, Functions: map[string]*lambdatest.Supervised{}, Lambda: lambda.NewFromConfig(st.AWS), log: o.Log, Progress: o.Progress}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.Mappings, err = IngestMappings(st); err != nil {
		return nil, err
	}
	l.Mapping = l.Mappings[0]
	if l.LedgerStream, err = StreamMappingFromTemplate(st.Template, ledgerMapping, st.StreamARNs[ledgerTable]); err != nil {
		return nil, err
	}
	if l.Schedules, err = SchedulesFromTemplate(st.Template); err != nil {
		return nil, err
	}
	for i := range l.Schedules {
		s := &l.Schedules[i]
		s.RuleARN = fmt.Sprintf("arn:aws:events:%s:%s:rule/%s-%s", st.Env.Region, st.Env.Account, st.Env.StackName, s.Rule)
	}
	// Every function's spec, and every schedule's target among them,
	// before anything is built or started.
	dirs := make([]string, len(LocalFunctions))
	specs := make([]lambdatest.Spec, len(LocalFunctions))
	names := map[string]bool{}
	for i, f := range LocalFunctions {
		dirs[i] = f.Dir
		if specs[i], err = lambdatest.FromTemplate(st, f.LogicalID, ""); err != nil {
			return nil, err
		}
		names[specs[i].Name] = true
	}
	for _, s := range l.Schedules {
		if !names[s.Function] {
			return nil, fmt.Errorf("rule %s targets %s, which is not one of the template's functions", s.Rule, s.Function)
		}
	}
	fmt.Fprintf(o.Progress, "building the seven function bootstraps (%v) for this machine into %s … (a cold build takes minutes)\n", dirs, o.BuildDir)
	bins, err := lambdatest.BuildAll(ctx, filepath.Clean(o.BuildDir), dirs...)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(LocalFunctions))
	for i, f := range LocalFunctions {
		spec := specs[i]
		spec.Bootstrap = bins[f.Dir]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sup, err := lambdatest.Supervise(ctx, st, spec, o.Output, o.Log)
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			l.Functions[f.LogicalID] = sup
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, m := range l.Mappings {
		l.Pollers = append(l.Pollers, &Poller{SQS: st.Clients.SQS, Mapping: m, Handler: InvokeSQS(l.Lambda, l.Name("IngestFunction")), Log: o.Log})
	}
	l.Poller = l.Pollers[0]
	// Retried without bound (the mapping's MaximumRetryAttempts -1): Run.
	if l.LedgerMapping, err = newLedgerMapping(ctx, st, l.Lambda, l.Name("LedgerFunction"), l.LedgerStream.StreamARN); err != nil {
		return nil, err
	}
	l.LedgerPoller = &StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: l.LedgerStream.StreamARN,
		Handler:   seeThrough(InvokeStream(l.Lambda, l.Name("LedgerFunction"))),
		BatchSize: l.LedgerStream.BatchSize, Bisect: l.LedgerStream.Bisect, Log: o.Log, Gate: l.LedgerMapping}
	if l.Endpoint, err = lambdatest.ServeEndpoint(st, l.Name("OperatorFunction"), o.Log); err != nil {
		return nil, err
	}
	st.SetOperatorURL(l.Endpoint.URL) // the stack's OperatorEndpointUrl, as dlqctl --stack reads it
	return l, nil
}

// seeThrough lets a stream batch whose invocation has started finish when
// the stop comes (bounded by batchGrace), as the SQS poller does: the
// invocation's answer is taken, not cut off, and the poller stops after it.
func seeThrough(h StreamHandler) StreamHandler {
	return func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchGrace)
		defer cancel()
		return h(ctx, ev)
	}
}

// Name is the function name of the function with the given logical id.
func (l *Local) Name(logicalID string) string {
	if f := l.Functions[logicalID]; f != nil {
		return f.Spec.Name
	}
	return ""
}

// Run runs the DLQ's event source mapping, the table stream's mapping and
// the schedules until ctx is done; all invoke the functions through the
// Lambda API. ready, when not nil, is called once they run. It returns
// once each has stopped, an invocation it started answered.
func (l *Local) Run(ctx context.Context, ready func()) error {
	handlers := map[string]func(context.Context, json.RawMessage) error{}
	for _, s := range l.Schedules {
		handlers[s.Function] = InvokeScheduled(l.Lambda, s.Function)
	}
	var wg sync.WaitGroup
	var err error
	wg.Add(2 + len(l.Pollers))
	for _, p := range l.Pollers {
		go func() { defer wg.Done(); _ = p.Run(ctx) }()
	}
	go func() { defer wg.Done(); _ = l.LedgerPoller.Run(ctx) }()
	go func() { defer wg.Done(); err = RunSchedules(ctx, l.Schedules, handlers, l.log) }()
	if ready != nil {
		ready()
	}
	wg.Wait()
	return err
}

// Close stops the bootstraps, all at once, each once its invocations in
// flight have finished (up to lambdatest.StopGrace); call it after what
// invokes them (Run, a consumer) has stopped.
func (l *Local) Close() {
	if l.Endpoint != nil {
		l.Endpoint.Close()
	}
	n := 0
	for _, f := range l.Functions {
		n += f.InFlight()
	}
	if n > 0 && l.Progress != nil {
		fmt.Fprintf(l.Progress, "stopping: waiting up to %s for %d invocations in flight to finish …\n", lambdatest.StopGrace, n)
	}
	var wg sync.WaitGroup
	for _, f := range l.Functions {
		wg.Add(1)
		go func() { defer wg.Done(); f.Close() }()
	}
	wg.Wait()
}
