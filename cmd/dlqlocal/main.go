// Command dlqlocal runs DLQ Quarantine on the embedded AWS stack, with no AWS
// account and no Docker.
//
//	dlqlocal demo [-events N] [-seed S] [-log FILE]
//	dlqlocal local [-log FILE] [-consumer off|fail|flaky|validate] [-flaky-rate R] [-data DIR] [-park-age D] [-resolved-age D] [-sweep-every D]
//	dlqlocal soak [-messages N] [-seed S] [-fault-rate R] [-lost-rate L] [-crash-share C] [-max-backoff D] [-log FILE]
//
// demo starts the stack from infra/template.yaml, plays the scenario, prints
// the report and exits 1 if any invariant was violated. local starts the
// stack with the functions running (the DLQ event source and the template's
// schedules) and keeps it up until Ctrl-C, for the AWS CLI and dlqctl. soak
// sends N messages through the whole pipeline while injecting AWS faults and
// crashing redrive and sweeper processes, prints its table and exits 1 if an
// invariant was violated.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/demo"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: dlqlocal demo [-events N] [-seed S] [-log FILE] | dlqlocal local [-log FILE] [-consumer off|fail|flaky|validate] [-flaky-rate R] [-data DIR] [-park-age D] [-resolved-age D] [-sweep-every D] | dlqlocal soak [-messages N] [-seed S] [-fault-rate R] [-lost-rate L] [-crash-share C] [-max-backoff D] [-log FILE]"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	logPath := fs.String("log", "", "write the functions' JSON logs to this file")
	events := fs.Int("events", 3000, "inventory events to produce (demo)")
	seed := fs.Uint64("seed", 20261129, "generator seed (demo, soak)")
	messages := fs.Int("messages", 10000, "messages to send (soak)")
	faultRate := fs.Float64("fault-rate", 0.05, "share of AWS requests and batch entries that fail (soak)")
	lostRate := fs.Float64("lost-rate", 0.03, "share of DynamoDB writes, S3 PutObjects and SendMessageBatch calls applied and then answered with a 500 or a timeout; 0 for none (soak)")
	crashShare := fs.Float64("crash-share", 0.5, "share of redrive and sweeper processes that crash (soak)")
	maxBackoff := fs.Duration("max-backoff", 200*time.Millisecond, "cap on the backoff of the SDK retryer and of redrive's entry retries; 0 keeps the defaults (20 s, 2 s) (soak)")
	extras := addLocalExtras(fs) // extras.go
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if args[0] == "local" {
		if err := extras.prepare(); err != nil { // with -data, re-executes the process
			fmt.Fprintln(stderr, "dlqlocal local:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var logw io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		logw = f
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, stdout, stderr, logw, *events, *seed)
	case "local":
		return runLocal(ctx, stdout, stderr, logw, extras)
	case "soak":
		return runSoak(ctx, stdout, stderr, logw, demo.SoakOptions{Seed: *seed, Messages: *messages, FaultRate: *faultRate, LostRate: lost(*lostRate), CrashShare: *crashShare, MaxBackoff: *maxBackoff, FailFirst: true})
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

// startStack starts the embedded stack; when it does not start, it says
// why on stderr and returns nil.
func startStack(ctx context.Context, stderr io.Writer, o embedded.Options) *embedded.Stack {
	st, err := embedded.Start(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "embedded stack:", err)
		return nil
	}
	return st
}

func runDemo(ctx context.Context, stdout, stderr, logw io.Writer, events int, seed uint64) int {
	fmt.Fprintln(stdout, "starting the embedded AWS stack (kumo + versitygw) from infra/template.yaml …")
	st := startStack(ctx, stderr, embedded.Options{StackName: embedded.RandomName("demo"), Params: demo.StackParams, Log: logw, Progress: stdout})
	if st == nil {
		return 1
	}
	defer st.Close()
	fmt.Fprintf(stdout, "stack %s up: AWS endpoint %s, S3 endpoint %s\n", st.Env.StackName, st.Endpoint, st.S3Endpoint)
	fmt.Fprintf(stdout, "producing %d inventory events (seed %d) …\n", events, seed)
	rep, err := demo.Run(ctx, st, demo.Options{Seed: seed, Events: events, Log: logw, Progress: stdout})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	rep.Print(stdout, 8)
	// The operator's view of the same data: dlqctl buckets and verify.
	ctl := dlqctl.NewApp(strings.NewReader(""), stdout, stderr)
	ctl.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: st.Clients, Lambda: lambda.NewFromConfig(st.AWS)}, nil
	}
	base := []string{"--table", st.Names["QuarantineTable"], "--payload-bucket", st.Names["PayloadBucket"]}
	fmt.Fprintf(stdout, "\n$ dlqctl buckets\n")
	if code := ctl.Main(ctx, append(base, "buckets")); code != 0 {
		return code
	}
	fmt.Fprintf(stdout, "\n$ dlqctl verify\n")
	verified := ctl.Main(ctx, append(base, "verify"))
	if !rep.OK() || verified != 0 {
		fmt.Fprintln(stderr, "an invariant was violated")
		return 1
	}
	return 0
}

// lost maps the flag's 0 (none) to the soak's "none" (negative; its 0 is
// the default).
func lost(rate float64) float64 {
	if rate == 0 {
		return -1
	}
	return rate
}

func runSoak(ctx context.Context, stdout, stderr, logw io.Writer, o demo.SoakOptions) int {
	fmt.Fprintln(stdout, "starting the embedded AWS stack (kumo + versitygw) from infra/template.yaml …")
	st := startStack(ctx, stderr, embedded.Options{StackName: embedded.RandomName("soak"), Params: demo.SoakStackParams, Log: logw})
	if st == nil {
		return 1
	}
	defer st.Close()
	fmt.Fprintf(stdout, "soak: %d messages, seed %d, fault rate %.0f%%, applied-then-lost rate %.0f%%, %.0f%% of redrive and sweeper processes crash, SDK backoff cap %s …\n",
		o.Messages, o.Seed, 100*o.FaultRate, 100*max(o.LostRate, 0), 100*o.CrashShare, o.MaxBackoff)
	o.Log = logw
	rep, err := demo.Soak(ctx, st, o)
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	rep.Print(stdout)
	if !rep.OK() {
		fmt.Fprintln(stderr, "an invariant was violated")
		return 1
	}
	return 0
}

func runLocal(ctx context.Context, stdout, stderr, logw io.Writer, extras *localExtras) int {
	st := startStack(ctx, stderr, extras.stackOptions(embedded.Options{StackName: "dlqq", Log: logw}))
	if st == nil {
		return 1
	}
	defer st.Close()
	log := slog.New(slog.NewJSONHandler(logw, nil))
	// extras.go: the sweeper ages over the template's function environment.
	if err := applyFunctionEnv(st.Template, extras.functionEnv()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fns, err := localrunner.NewFunctions(st, nil, log, logw)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	schedules, err := localrunner.SchedulesFromTemplate(st.Template)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	name := func(id string) string {
		fn, err := st.Template.GetServerlessFunctionWithName(id)
		if err != nil {
			return ""
		}
		return *fn.FunctionName
	}
	handlers := map[string]func(context.Context, json.RawMessage) error{
		name("RedriveFunction"): func(ctx context.Context, in json.RawMessage) error { _, err := fns.Redrive.Handle(ctx, in); return err },
		name("SweeperFunction"): func(ctx context.Context, _ json.RawMessage) error { _, err := fns.Sweeper.Run(ctx); return err },
		name("MetricsFunction"): func(ctx context.Context, _ json.RawMessage) error { _, err := fns.Metrics.Run(ctx); return err },
	}
	fmt.Fprintf(stdout, "DLQ Quarantine is running on the embedded stack (Ctrl-C to stop).\n\n")
	fmt.Fprintf(stdout, "Point the AWS CLI or dlqctl at it:\n")
	for _, e := range st.Environ() {
		fmt.Fprintf(stdout, "  export %s\n", e)
	}
	fmt.Fprintf(stdout, "\nresources (from infra/template.yaml):\n")
	var ids []string
	for id := range st.Names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(stdout, "  %-22s %s\n", id, st.Names[id])
	}
	fmt.Fprintf(stdout, "\nsource queue: %s\nDLQ:          %s\n", st.QueueURLs["SourceQueue"], st.QueueURLs["DeadLetterQueue"])
	fmt.Fprintf(stdout, "ingest polls the DLQ (batch %d, window %s, partial batch failures %v);", fns.Mapping.BatchSize, fns.Mapping.Window, fns.Mapping.ReportBatchItemFailures)
	var names []string
	for _, s := range schedules {
		names = append(names, fmt.Sprintf("%s every %s", s.Function, s.Every))
	}
	fmt.Fprintf(stdout, " schedules: %s\n", strings.Join(names, ", "))
	if err := extras.banner(stdout, st); err != nil { // extras.go
		fmt.Fprintln(stderr, err)
		return 1
	}
	consumed, err := extras.startConsumer(ctx, st, log) // extras.go
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "try: aws sqs send-message --queue-url %s --message-body '{\"event_id\":\"x\"}'\n", st.QueueURLs["DeadLetterQueue"])

	poller := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: fns.Mapping, Handler: fns.Ingest.Handle, Log: log}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = poller.Run(ctx) }()
	go func() {
		defer wg.Done()
		if err := localrunner.RunSchedules(ctx, schedules, handlers, log); err != nil {
			fmt.Fprintln(stderr, err)
		}
	}()
	<-ctx.Done()
	wg.Wait()
	<-consumed
	fmt.Fprintln(stdout, "stopped")
	return 0
}
