// Command dlqlocal runs DLQ Quarantine on the embedded AWS stack, with no AWS
// account and no Docker.
//
//	dlqlocal demo [-events N] [-seed S] [-log FILE]
//	dlqlocal local [-logs stderr|stdout|FILE] [-env-file FILE] [-dir DIR] [-consumer off|fail|flaky|validate] [-flaky-rate R] [-data DIR] [-park-age D] [-resolved-age D] [-sweep-every D] [-settle-window D] [-settle-margin D] [-source-visibility D]
//	dlqlocal soak [-messages N] [-seed S] [-fault-rate R] [-lost-rate L] [-crash-share C] [-max-backoff D] [-log FILE]
//	dlqlocal capacity [-messages N] [-seed S] [-log FILE]
//
// demo starts the stack from infra/template.yaml, plays the scenario, prints
// the report and exits 1 if any invariant was violated. local starts the
// stack with the seven functions deployed in the local Lambda API, each its
// real bootstrap under a supervisor, invoked by the DLQ's and the table
// stream's event source mappings and the template's schedules through that
// API, and keeps it up
// until Ctrl-C (exit 0), for the AWS CLI and dlqctl; its -settle-window,
// -settle-margin and -source-visibility shorten the redrive function's
// settle window so that a short session sees a replay RESOLVED. soak
// sends N messages through the whole pipeline while injecting AWS faults and
// crashing redrive and sweeper processes, prints its table and exits 1 if an
// invariant was violated. capacity plays a storm of N messages from 50
// sources through the real ingest and ledger, records every partition key
// and write unit they write, and prints what one table sustains on
// DynamoDB (its last line: "projected sustained ingest: N msgs/s per
// table (limited by …)").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/demo"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: dlqlocal demo [-events N] [-seed S] [-log FILE] | dlqlocal local [-logs stderr|stdout|FILE] [-env-file FILE] [-dir DIR] [-consumer off|fail|flaky|validate] [-flaky-rate R] [-data DIR] [-park-age D] [-resolved-age D] [-sweep-every D] [-settle-window D] [-settle-margin D] [-source-visibility D] | dlqlocal soak [-messages N] [-seed S] [-fault-rate R] [-lost-rate L] [-crash-share C] [-max-backoff D] [-log FILE] | dlqlocal capacity [-messages N] [-seed S] [-log FILE]"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	logPath := fs.String("log", "", "write the functions' JSON logs to this file")
	logs := fs.String("logs", "", "local: where the functions' output and the runner's log go: stderr, stdout or a file (default: functions.log in -dir; -log FILE is the same)")
	envFile := fs.String("env-file", "", "local: once everything runs, write the export lines here (shell: source FILE); removed on stop")
	dir := fs.String("dir", defaultLocalDir(), "local: directory for the bootstraps, S3 data and the default log file; emptied at start if an earlier run made it, refused if it holds anything else")
	events := fs.Int("events", 3000, "inventory events to produce (demo)")
	seed := fs.Uint64("seed", 20261129, "generator seed (demo, soak, capacity)")
	messages := fs.Int("messages", 10000, "messages to send (soak, capacity)")
	faultRate := fs.Float64("fault-rate", 0.05, "share of AWS requests and batch entries that fail (soak)")
	lostRate := fs.Float64("lost-rate", 0.03, "share of DynamoDB writes, S3 PutObjects and SendMessageBatch calls applied and then answered with a 500 or a timeout; 0 for none (soak)")
	crashShare := fs.Float64("crash-share", 0.5, "share of redrive and sweeper processes that crash (soak)")
	maxBackoff := fs.Duration("max-backoff", 200*time.Millisecond, "cap on the backoff of the SDK retryer and of redrive's entry retries; 0 keeps the defaults (20 s, 2 s) (soak)")
	extras := addLocalExtras(fs) // extras.go
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if args[0] == "local" {
		if err := checkDirs(*dir, extras.data); err != nil { // before the re-exec
			fmt.Fprintln(stderr, "dlqlocal local:", err)
			return 2
		}
		if err := extras.prepare(); err != nil { // with -data, re-executes the process
			fmt.Fprintln(stderr, "dlqlocal local:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first Ctrl-C the stop runs (up to half a minute); a second
	// one ends the process at once, as a terminal user expects.
	go func() { <-ctx.Done(); stop() }()
	if args[0] == "local" {
		if *logs == "" {
			*logs = *logPath
		}
		return runLocal(ctx, stdout, stderr, localOptions{Logs: *logs, EnvFile: *envFile, Dir: *dir, Extras: extras})
	}
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
	case "capacity":
		return runCapacity(ctx, stdout, stderr, logw, capacity.Options{Messages: *messages, Seed: *seed})
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
	st := startStack(ctx, stderr, embedded.WithLocalSources(embedded.Options{StackName: embedded.RandomName("demo"), Params: demo.StackParams, Log: logw, Progress: stdout}))
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
	ok := rep.OK()
	if !ok {
		for _, x := range rep.Unreconciled() {
			fmt.Fprintln(stderr, "does not reconcile:", x)
		}
		fmt.Fprintln(stderr, "an invariant was violated")
	}
	// The operator's view of the same data: dlqctl buckets and verify,
	// pointed at this stack by explicit flags (the names are random; a
	// DLQQ_* variable in the caller's shell names some other stack).
	base := []string{
		"--table", st.Names["QuarantineTable"],
		"--payload-bucket", st.Names["PayloadBucket"],
		"--ledger-bucket", st.Names["ArchiveBucket"],
		"--signing-key", st.Names["LedgerSigningKey"],
	}
	// verify checks every version's writer proof with the stack's keys.
	if keys, err := demo.WriterKeyARNs(st); err != nil {
		fmt.Fprintln(stderr, "dlqlocal:", err)
		ok = false
	} else {
		base = append(base, "--writer-keys", strings.Join(keys, ","))
	}
	connect := func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: st.Clients, Lambda: lambda.NewFromConfig(st.AWS)}, nil
	}
	for _, step := range []string{"buckets", "verify"} {
		if code := demoCtl(ctx, connect, stdout, stderr, append(base, step)); code != 0 {
			ok = false
		}
	}
	if !ok {
		return 1
	}
	return 0
}

// demoCtl runs one dlqctl command against the demo's stack, showing it as
// an operator would type it; when it fails it says which step failed, with
// dlqctl's exit code and its last error line.
func demoCtl(ctx context.Context, connect func(context.Context, string, string) (*dlqctl.Clients, error), stdout, stderr io.Writer, args []string) int {
	cmd := args[len(args)-1]
	fmt.Fprintf(stdout, "\n$ dlqctl %s\n", cmd)
	var errs strings.Builder
	ctl := dlqctl.NewApp(strings.NewReader(""), stdout, io.MultiWriter(stderr, &errs))
	ctl.Connect = connect
	code := ctl.Main(ctx, args)
	if code != 0 {
		last := strings.TrimSpace(errs.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if last == "" {
			last = "no message"
		}
		fmt.Fprintf(stderr, "dlqctl %s failed (exit %d): %s\n", cmd, code, strings.TrimPrefix(last, "dlqctl: "))
	}
	return code
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
