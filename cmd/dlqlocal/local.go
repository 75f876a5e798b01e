package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// localOptions are the flags of `dlqlocal local`.
type localOptions struct {
	// Logs is where the functions' output and the runner's log go:
	// "stderr", "stdout" or a file (default: functions.log in Dir).
	Logs string
	// EnvFile, when set, receives the export lines once everything runs.
	EnvFile string
	// Dir holds the bootstraps, versitygw's data and the default log file;
	// emptied at start.
	Dir string
	// Extras are the consumer, -data and the sweeper's local ages
	// (extras.go); nil for none.
	Extras *localExtras
}

func defaultLocalDir() string { return filepath.Join(os.TempDir(), "dlqq-local") }

// runLocal starts the stack named dlqq, deploys the seven functions in the
// local Lambda API with their real bootstraps (supervised), runs the DLQ's
// and the table stream's event source mappings and the schedules through
// the Lambda API, prints how
// to reach it and runs until ctx is done (Ctrl-C), then exits 0.
func runLocal(ctx context.Context, stdout, stderr io.Writer, o localOptions) int {
	if o.Dir == "" {
		o.Dir = defaultLocalDir()
	}
	if o.Extras == nil {
		o.Extras = &localExtras{consumer: string(localrunner.ConsumerOff)}
	}
	if o.EnvFile != "" {
		// A file left by an earlier run must not read as this one ready.
		if err := os.Remove(o.EnvFile); err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if err := resetDir(o.Dir); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	logw, logDesc, closeLog, err := openLogs(o.Logs, o.Dir, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer closeLog()
	log := slog.New(slog.NewJSONHandler(logw, nil))

	fmt.Fprintln(stdout, "starting the embedded AWS stack (kumo + versitygw) from infra/template.yaml …")
	// The local stack's sources: the template's example queue, an existing
	// standard queue sharing its DLQ, an existing FIFO pair.
	st := startStack(ctx, stderr, embedded.WithLocalSources(o.Extras.stackOptions(embedded.Options{StackName: "dlqq", Dir: filepath.Join(o.Dir, "stack"), Log: logw, Progress: stdout})))
	if st == nil {
		return 1
	}
	defer st.Close()
	// The sweeper's local ages over the template's function environment,
	// before the functions are created from it.
	if err := applyFunctionEnv(st.Template, o.Extras.functionEnv()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	l, err := localrunner.StartLocal(ctx, st, localrunner.LocalOptions{BuildDir: filepath.Join(o.Dir, "bin"), Output: logw, Log: log, Progress: stdout})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stdout, "stopped")
			return 0
		}
		fmt.Fprintln(stderr, "functions:", err)
		return 1
	}
	defer l.Close()

	// The optional consumer of the source queue (-consumer), started
	// before the banner and the env file, which say what it does.
	consumed, err := o.Extras.startConsumer(ctx, st, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}

	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	// The mappings (the DLQ's to ingest, the table stream's to the ledger,
	// which also counts the metrics counters) and the schedules.
	go func() {
		defer wg.Done()
		if err := l.Run(ctx, func() { close(ready) }); err != nil {
			fmt.Fprintln(stderr, err)
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	env := localEnv(st, l)
	printBanner(stdout, st, l, env, logDesc, o.EnvFile)
	if err := o.Extras.banner(stdout, st); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if o.EnvFile != "" && ctx.Err() == nil {
		if err := writeEnvFile(o.EnvFile, env, identitySwitch(l)); err != nil {
			fmt.Fprintln(stderr, "env file:", err)
			return 1
		}
		defer os.Remove(o.EnvFile)
	}
	<-ctx.Done()
	// The stop, in order: what receives and invokes (the pollers, each
	// after the invocation it started answered, the schedules, the
	// consumer), then the functions (each waits for its
	// invocations in flight), then the count of what -data cannot keep,
	// then (deferred) the stack, whose Close writes the last snapshot.
	wg.Wait()
	<-consumed
	l.Close()
	o.Extras.warnInFlight(context.WithoutCancel(ctx), stderr, st)
	fmt.Fprintln(stdout, "stopped")
	return 0
}

// dirMarker marks a directory dlqlocal local made, and may therefore empty.
const dirMarker = ".dlqlocal-local"

// resetDir empties dir for a new run, refusing a directory that is neither
// empty nor one an earlier run made.
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, dirMarker)); err != nil {
			return fmt.Errorf("-dir %s is not empty and was not made by dlqlocal local: refusing to empty it (name a new directory)", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, dirMarker), []byte("made by dlqlocal local; emptied at its next start\n"), 0o600)
}

// openLogs opens where the logs go and describes it for the banner.
func openLogs(dest, dir string, stdout, stderr io.Writer) (io.Writer, string, func(), error) {
	switch dest {
	case "stderr":
		return syncio.NewWriter(stderr), "stderr", func() {}, nil
	case "stdout":
		return syncio.NewWriter(stdout), "stdout", func() {}, nil
	case "":
		dest = filepath.Join(dir, "functions.log")
	}
	f, err := os.Create(dest)
	if err != nil {
		return nil, "", nil, fmt.Errorf("logs: %w", err)
	}
	return syncio.NewWriter(f), dest, func() { f.Close() }, nil
}

// reachable rewrites a queue URL to the endpoint's host and port: kumo's
// URLs say localhost:4566 whatever it listens on, and it routes a QueueUrl
// by its path, so the rewritten one works for the CLI and the SDKs.
func reachable(queueURL, endpoint string) string {
	q, err := url.Parse(queueURL)
	if err != nil {
		return queueURL
	}
	e, err := url.Parse(endpoint)
	if err != nil || e.Host == "" {
		return queueURL
	}
	q.Scheme, q.Host = e.Scheme, e.Host
	return q.String()
}

// envVar is one exported variable.
type envVar struct{ Name, Value string }

// localEnv is what points the AWS CLI and dlqctl at the stack: the SDK's
// endpoint and credential variables (the CloudFormation endpoint among
// them), DLQQ_STACK (dlqctl reads the table, buckets, redrive function and
// signing key from the stack's outputs), and for the AWS CLI the archive
// bucket (DLQQ_LOCAL_ARCHIVE_BUCKET: a name dlqctl does not read, since
// DLQQ_ARCHIVE_BUCKET would beat the stack's ArchiveBucketName output),
// the ledger's stream and digest functions and the queue URLs.
func localEnv(st *embedded.Stack, l *localrunner.Local) []envVar {
	var env []envVar
	for _, kv := range st.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, envVar{k, v})
	}
	return append(env,
		envVar{"DLQQ_STACK", st.Env.StackName},
		envVar{"DLQQ_LOCAL_ARCHIVE_BUCKET", st.Names["ArchiveBucket"]},
		envVar{"DLQQ_LEDGER_FUNCTION", l.Name("LedgerFunction")},
		envVar{"DLQQ_DIGEST_FUNCTION", l.Name("DigestFunction")},
		envVar{"DLQQ_SOURCE_QUEUE_URL", reachable(st.QueueURLs["SourceQueue"], st.Endpoint)},
		envVar{"DLQQ_DLQ_URL", reachable(st.QueueURLs["DeadLetterQueue"], st.Endpoint)},
		// The local stack's other sources (embedded.WithLocalSources).
		envVar{"DLQQ_SHARED_SOURCE_URL", reachable(st.QueueURLs[st.Env.StackName+"-"+embedded.SharedSource], st.Endpoint)},
		envVar{"DLQQ_FIFO_SOURCE_URL", reachable(st.QueueURLs[st.Env.StackName+"-"+embedded.FIFOSource], st.Endpoint)},
		envVar{"DLQQ_FIFO_DLQ_URL", reachable(st.QueueURLs[st.Env.StackName+"-"+embedded.FIFODLQ], st.Endpoint)},
		envVar{"DLQQ_LOCAL_IDENTITY", "operator-a"},
	)
}

// identitySwitch is the shell function build/local.env defines to switch
// between the local operator endpoint's identities (docs/identity.md):
// it exports the identity's keys, which dlqctl signs with. operator-a's
// are the stack's own (every local service takes them); operator-b's and
// the auditor's only the endpoint and kumo know.
func identitySwitch(l *localrunner.Local) string {
	var b strings.Builder
	b.WriteString("# The operator endpoint's local identities (local keys, for this stack only):\n")
	b.WriteString("#   dlqq_as operator-a | operator-b | auditor\n")
	b.WriteString("dlqq_as() {\n  case \"$1\" in\n")
	for _, id := range l.Endpoint.Identities {
		fmt.Fprintf(&b, "  %s) export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s ;;\n", id.Name, shellQuote(id.AccessKeyID), shellQuote(id.SecretAccessKey))
	}
	b.WriteString("  *) echo \"dlqq_as: operator-a, operator-b or auditor\" >&2; return 2 ;;\n  esac\n")
	b.WriteString("  export DLQQ_LOCAL_IDENTITY=\"$1\"\n}\n")
	return b.String()
}

// shellQuote quotes v for a POSIX shell.
func shellQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// droppedEnv are the variables an earlier build/local.env exported and
// this one does not: dlqctl reads them from the stack's outputs now, and
// a value left in the shell by the earlier file would win over them (a
// variable beats an output), so the file unsets them. DLQQ_LEDGER_BUCKET
// too, and DLQQ_ARCHIVE_BUCKET (an earlier file exported it for the AWS
// CLI; it is DLQQ_LOCAL_ARCHIVE_BUCKET now).
var droppedEnv = []string{"DLQQ_TABLE", "DLQQ_PAYLOAD_BUCKET", "DLQQ_REDRIVE_FUNCTION", "DLQQ_SIGNING_KEY", "DLQQ_LEDGER_BUCKET", "DLQQ_ARCHIVE_BUCKET", "DLQQ_OPERATOR_URL"}

// writeEnvFile writes the unset and export lines to path at once (a
// reader sees the whole file or none).
func writeEnvFile(path string, env []envVar, extra string) error {
	var b strings.Builder
	b.WriteString("# dlqlocal local: the running stack (source this file)\n")
	fmt.Fprintf(&b, "unset %s\n", strings.Join(droppedEnv, " "))
	for _, e := range env {
		fmt.Fprintf(&b, "export %s=%s\n", e.Name, shellQuote(e.Value))
	}
	b.WriteString(extra)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func printBanner(w io.Writer, st *embedded.Stack, l *localrunner.Local, env []envVar, logs, envFile string) {
	fmt.Fprintf(w, "\nDLQ Quarantine is running locally: stack %s (Ctrl-C to stop).\n", st.Env.StackName)
	fmt.Fprintf(w, "\nfunctions in the local Lambda API, each its real bootstrap (restarted if it exits):\n")
	for _, f := range localrunner.LocalFunctions {
		s := l.Functions[f.LogicalID].Spec
		fmt.Fprintf(w, "  %-14s timeout %s, %d MB\n", s.Name, s.Timeout, s.MemorySize)
	}
	m := l.Mapping
	onOff := map[bool]string{true: "on", false: "off"}
	fmt.Fprintf(w, "ingest is invoked with the DLQ's batches (batch %d, window %s, partial batch responses %s)\n", m.BatchSize, m.Window, onOff[m.ReportBatchItemFailures])
	ls := l.LedgerStream
	fmt.Fprintf(w, "%s is invoked with the table stream's batches (batch %d, tumbling window %s, bisect on error %s, partial batch responses %s, retried until it succeeds)\n",
		l.Name("LedgerFunction"), ls.BatchSize, ls.Window, onOff[ls.Bisect], onOff[ls.ReportBatchItemFailures])
	fmt.Fprintf(w, "%s signs the ledger's digests on its schedule (and takes {\"action\":\"baseline\"} by hand); it refuses stream batches, as %s refuses actions\n",
		l.Name("DigestFunction"), l.Name("LedgerFunction"))
	fmt.Fprintf(w, "schedules (each invokes its function through the Lambda API):\n")
	for _, s := range l.Schedules {
		input := "the scheduled event"
		if s.Input != nil {
			input = string(s.Input)
		}
		fmt.Fprintf(w, "  %-14s every %-7s %-9s %s\n", s.Function, s.Every, s.Name(), input)
	}

	fmt.Fprintf(w, "\nPoint the AWS CLI and dlqctl at it")
	if envFile != "" {
		fmt.Fprintf(w, " (or: source %s)", envFile)
	}
	fmt.Fprintf(w, ":\n")
	for _, e := range env {
		fmt.Fprintf(w, "  export %s=%s\n", e.Name, shellQuote(e.Value))
	}
	fmt.Fprintf(w, "\nresources (from infra/template.yaml):\n")
	var ids []string
	for id := range st.Names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "  %-22s %s\n", id, st.Names[id])
	}
	fmt.Fprintf(w, "\nsource queue: %s\nDLQ:          %s\n", reachable(st.QueueURLs["SourceQueue"], st.Endpoint), reachable(st.QueueURLs["DeadLetterQueue"], st.Endpoint))
	fmt.Fprintf(w, "sources (ingest's mappings: %d DLQs):\n", len(l.Mappings))
	for _, q := range localSources(st) {
		fmt.Fprintf(w, "  %-24s -> %-24s %s\n", q.name, q.dlq, q.what)
	}
	fmt.Fprintf(w, "logs (the functions' output and the runner's log): %s (-logs stderr shows them here)\n", logs)

	source := st.Names["SourceQueue"]
	fmt.Fprintf(w, "\ntry (from the repository root, after the exports):\n")
	fmt.Fprintf(w, "  aws lambda list-functions --query 'Functions[].FunctionName'\n")
	// --cli-read-timeout 0: the CLI's 60 s read timeout would retry a long
	// redrive call, starting a second run.
	fmt.Fprintf(w, "  aws lambda invoke --function-name %s --cli-read-timeout 0 --payload fileb://events/redrive-dry-run.json build/out.json && cat build/out.json\n", l.Name("RedriveFunction"))
	fmt.Fprintf(w, "  aws sqs send-message --endpoint-url \"$AWS_ENDPOINT_URL\" --queue-url \"$DLQQ_DLQ_URL\" --message-body '{\"event_id\":\"x\"}' --message-attributes '{\"%s\":{\"DataType\":\"String\",\"StringValue\":\"%s\"}}'\n", quarantine.AttrFailureSource, source)
	fmt.Fprintf(w, "      (straight into the DLQ, which %d sources share, naming its source: ingest quarantines it within seconds; the AWS CLI v1 needs --endpoint-url for sqs)\n", sharing(st))
	fmt.Fprintf(w, "  dlqctl ls --status all      (dlqctl: go run ./cmd/dlqctl, or go build -o build/dlqctl ./cmd/dlqctl)\n")
	fmt.Fprintf(w, "  dlqctl redrive --source %s --class validation      (a dry run; --yes replays)\n", source)
}

// sharing is how many of the local stack's sources share the stack's DLQ.
func sharing(st *embedded.Stack) int {
	n := 0
	for _, q := range localSources(st) {
		if q.dlq == st.Names["DeadLetterQueue"] {
			n++
		}
	}
	return n
}
