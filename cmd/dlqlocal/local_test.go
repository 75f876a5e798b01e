package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// The package's tests share one `dlqlocal local`, run as a subprocess (this
// test binary, re-executed as dlqlocal) exactly as a user runs it; TestMain
// starts it, waits for its env file, and at the end stops it with SIGINT
// and checks that it exits 0.
var local struct {
	cmd     *exec.Cmd
	dir     string
	envFile string
	logs    string
	stdout  *syncio.Buffer
	stderr  *syncio.Buffer
	exited  chan struct{}
	env     map[string]string
	aws     aws.Config
}

const reexec = "DLQLOCAL_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(reexec) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(asBootstrap) == "1" {
		os.Exit(fakeBootstrap())
	}
	if os.Getenv(asAWS) == "1" {
		os.Exit(awsStandIn(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv("AWS_ACCESS_KEY_ID", embedded.AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", embedded.SecretKey)
	os.Setenv("AWS_REGION", embedded.Region)
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dlqlocal-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := startLocal(dir); err != nil {
		fmt.Fprintf(os.Stderr, "dlqlocal local did not start: %v\nstdout:\n%s\nstderr:\n%s\n", err, local.stdout, local.stderr)
		stopLocal()
		return 1
	}
	code := m.Run()
	if err := stopLocal(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: dlqlocal local on SIGINT: %v\nstderr:\n%s\n", err, local.stderr)
		code = 1
	}
	return code
}

func startLocal(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	local.dir, local.envFile, local.logs = filepath.Join(dir, "local"), filepath.Join(dir, "local.env"), filepath.Join(dir, "functions.log")
	local.stdout, local.stderr, local.exited = syncio.NewBuffer(), syncio.NewBuffer(), make(chan struct{})
	local.cmd = exec.Command(self, "local", "-dir", local.dir, "-env-file", local.envFile, "-logs", local.logs)
	local.cmd.Env = append(os.Environ(), reexec+"=1")
	local.cmd.Stdout, local.cmd.Stderr = local.stdout, local.stderr
	// Its own process group, as a shell gives a foreground job: stopLocal
	// sends SIGINT to the whole group, as a terminal's Ctrl-C does.
	local.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := local.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = local.cmd.Wait(); close(local.exited) }()
	// A cold build of kumo, versitygw and the bootstraps takes minutes on
	// a busy machine.
	deadline := time.After(12 * time.Minute)
	for {
		if _, err := os.Stat(local.envFile); err == nil {
			break
		}
		select {
		case <-local.exited:
			return fmt.Errorf("exited: %v", local.cmd.ProcessState)
		case <-deadline:
			return errors.New("no env file after 12 minutes")
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The env file is what a user sources: read it with a shell.
	out, err := exec.Command("sh", "-c", ". "+local.envFile+" && env").Output()
	if err != nil {
		return fmt.Errorf("source %s: %w", local.envFile, err)
	}
	local.env = map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && (strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "DLQQ_")) {
			local.env[k] = v
		}
	}
	// Not os.Setenv: the in-process tests start stacks of their own.
	local.aws, err = config.LoadDefaultConfig(context.Background(),
		config.WithBaseEndpoint(local.env["AWS_ENDPOINT_URL"]), config.WithRegion(local.env["AWS_REGION"]),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(local.env["AWS_ACCESS_KEY_ID"], local.env["AWS_SECRET_ACCESS_KEY"], "")))
	local.aws = sdkhttp.Use(local.aws)
	return err
}

func stopLocal() error {
	if local.cmd == nil || local.cmd.Process == nil {
		return nil
	}
	select {
	case <-local.exited:
		return fmt.Errorf("exited before SIGINT: %v", local.cmd.ProcessState)
	default:
	}
	restarts := restartLines()
	_ = syscall.Kill(-local.cmd.Process.Pid, syscall.SIGINT) // Ctrl-C: the foreground group
	select {
	case <-local.exited:
	case <-time.After(2 * time.Minute):
		_ = local.cmd.Process.Kill()
		<-local.exited
		return errors.New("still running 2 minutes after SIGINT")
	}
	if code := local.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("exit code %d, want 0", code)
	}
	if n := restartLines(); n != restarts {
		return fmt.Errorf("Ctrl-C restarted %d bootstraps (their group got the SIGINT?)", n-restarts)
	}
	stopped := 0
	for _, m := range logLines() {
		if m["msg"] == "bootstrap exited on stop" {
			stopped++
			if st, _ := m["status"].(string); st != "signal: terminated" {
				return fmt.Errorf("bootstrap of %v exited on stop with %q, want SIGTERM from dlqlocal (the terminal's SIGINT reached it?)", m["function"], st)
			}
		}
	}
	if want := len(localrunner.LocalFunctions); stopped != want {
		return fmt.Errorf("%d bootstraps exited on stop, want %d", stopped, want)
	}
	if !strings.HasSuffix(local.stdout.String(), "stopped\n") {
		return fmt.Errorf("stdout does not end with stopped: %q", tail(local.stdout.String()))
	}
	if _, err := os.Stat(local.envFile); !os.IsNotExist(err) {
		return fmt.Errorf("the env file outlived the stack: %v", err)
	}
	for _, f := range []string{"ingest", "redrive", "sweeper", "metrics", "ledger"} {
		if pids := bootstrapPIDs(f); len(pids) > 0 {
			if err := syscall.Kill(pids[len(pids)-1], 0); err == nil {
				return fmt.Errorf("bootstrap of dlqq-%s (pid %d) still runs", f, pids[len(pids)-1])
			}
		}
	}
	return nil
}

func tail(s string) string {
	if len(s) > 300 {
		return s[len(s)-300:]
	}
	return s
}

// logLines are the runner's JSON lines in the log file (the bootstraps'
// lines carry their function's prefix).
func logLines() []map[string]any {
	f, err := os.Open(local.logs)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// restartLines counts the supervisor's restart lines in the log.
func restartLines() int {
	n := 0
	for _, m := range logLines() {
		if m["msg"] == "bootstrap exited; restarting it" {
			n++
		}
	}
	return n
}

// bootstrapPIDs are the pids the supervisor started for dlqq-<fn>, in order.
func bootstrapPIDs(fn string) []int {
	var pids []int
	for _, m := range logLines() {
		if m["msg"] == "bootstrap started" && m["function"] == "dlqq-"+fn {
			if p, ok := m["pid"].(float64); ok {
				pids = append(pids, int(p))
			}
		}
	}
	return pids
}

func logs(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(local.logs)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// eventually retries check until it returns nil or a minute has passed.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stackOutput is the output of the local stack that DescribeStacks gives
// at the endpoint the env file names (AWS_ENDPOINT_URL_CLOUDFORMATION).
func stackOutput(t *testing.T, name string) string {
	t.Helper()
	cfn := cloudformation.NewFromConfig(local.aws, func(o *cloudformation.Options) {
		o.BaseEndpoint = aws.String(local.env["AWS_ENDPOINT_URL_CLOUDFORMATION"])
	})
	out, err := cfn.DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(local.env["DLQQ_STACK"])})
	if err != nil || len(out.Stacks) != 1 {
		t.Fatalf("describe the local stack %q: %v", local.env["DLQQ_STACK"], err)
	}
	for _, o := range out.Stacks[0].Outputs {
		if aws.ToString(o.OutputKey) == name {
			return aws.ToString(o.OutputValue)
		}
	}
	t.Fatalf("the local stack has no output %s", name)
	return ""
}

// The env file has the exports the banner shows, and they are what dlqctl
// and the AWS CLI need: the endpoints (CloudFormation's among them), the
// credentials, DLQQ_STACK, whose outputs give dlqctl the rest, and for the
// AWS CLI the archive bucket, the ledger's stream and digest functions
// and queue URLs on the real endpoint.
func TestLocalEnvFileAndBanner(t *testing.T) {
	banner := local.stdout.String()
	for _, want := range []string{"DLQQ_STACK", "DLQQ_LOCAL_ARCHIVE_BUCKET", "DLQQ_LEDGER_FUNCTION", "DLQQ_DIGEST_FUNCTION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_CLOUDFORMATION", "DLQQ_DLQ_URL", "DLQQ_SOURCE_QUEUE_URL"} {
		if local.env[want] == "" {
			t.Errorf("env file has no %s", want)
		}
		if !strings.Contains(banner, "export "+want+"="+shellQuote(local.env[want])+"\n") {
			t.Errorf("banner does not export %s as the env file does", want)
		}
	}
	if key := stackOutput(t, stackoutputs.LedgerSigningKey); local.env["DLQQ_LEDGER_FUNCTION"] != "dlqq-ledger" || local.env["DLQQ_DIGEST_FUNCTION"] != "dlqq-digest" ||
		!strings.HasPrefix(key, "arn:aws:kms:") || strings.Contains(key, ":alias/") {
		t.Errorf("the ledger's functions %q and %q, signing key %q", local.env["DLQQ_LEDGER_FUNCTION"], local.env["DLQQ_DIGEST_FUNCTION"], key)
	}
	if fn := stackOutput(t, stackoutputs.RedriveFunction); fn != "dlqq-redrive" || local.env["DLQQ_STACK"] != "dlqq" || !strings.HasPrefix(local.env["DLQQ_DLQ_URL"], local.env["AWS_ENDPOINT_URL"]+"/") {
		t.Errorf("redrive function %q; env %v", fn, local.env)
	}
	// The archive bucket is exported for the AWS CLI under a name dlqctl
	// does not read (DLQQ_ARCHIVE_BUCKET would beat the stack's output),
	// and a DLQQ_ARCHIVE_BUCKET left by an earlier file is unset.
	if _, ok := local.env["DLQQ_ARCHIVE_BUCKET"]; ok || strings.Contains(banner, "export DLQQ_ARCHIVE_BUCKET=") {
		t.Errorf("the env file exports DLQQ_ARCHIVE_BUCKET, which beats the stack's output: %v", local.env)
	}
	over := exec.Command("sh", "-c", ". "+local.envFile+` && echo "archive=${DLQQ_ARCHIVE_BUCKET-unset} ledger=${DLQQ_LEDGER_BUCKET-unset}"`)
	over.Env = append(os.Environ(), "DLQQ_ARCHIVE_BUCKET=stale", "DLQQ_LEDGER_BUCKET=stale")
	if got, err := over.Output(); err != nil || string(got) != "archive=unset ledger=unset\n" {
		t.Errorf("sourcing the env file over stale bucket variables: %q, %v", got, err)
	}
	if stackOutput(t, stackoutputs.ArchiveBucket) != local.env["DLQQ_LOCAL_ARCHIVE_BUCKET"] || stackOutput(t, "DeadLetterQueueUrl") == "" {
		t.Errorf("the stack's outputs disagree with the env file %v", local.env)
	}
	for _, want := range []string{
		"dlqq-redrive   every 5m0s    settle ", "dlqq-redrive   every 5m0s    policies ",
		`dlqq-digest    every 5m0s    digest    {"action":"digest"}`,
		"dlqq-ledger is invoked with the table stream's batches (batch 1000, tumbling window 1m0s, bisect on error on, partial batch responses on, retried until it succeeds)",
		`dlqq-digest signs the ledger's digests on its schedule (and takes {"action":"baseline"} by hand); it refuses stream batches, as dlqq-ledger refuses actions`,
		"logs (the functions' output and the runner's log): " + local.logs,
		"aws lambda invoke --function-name dlqq-redrive --cli-read-timeout 0 --payload fileb://events/redrive-dry-run.json",
		`--queue-url "$DLQQ_DLQ_URL"`,
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, `dlqq-ledger    every`) {
		t.Errorf("a schedule invokes the stream function:\n%s", banner)
	}
	if strings.Contains(banner, "4566") {
		t.Errorf("banner prints kumo's localhost:4566 URLs:\n%s", banner)
	}
	// A shell that sourced an earlier local.env (which exported the table,
	// buckets, function and key) keeps none of them: they would beat the
	// stack's outputs. A variable it never set (a pin) stays.
	stale := []string{"DLQQ_TABLE=stale", "DLQQ_PAYLOAD_BUCKET=stale", "DLQQ_REDRIVE_FUNCTION=stale", "DLQQ_SIGNING_KEY=stale", "DLQQ_LEDGER_BUCKET=stale", "DLQQ_KEY_FINGERPRINT=kept"}
	sh := exec.Command("sh", "-c", ". "+local.envFile+" && env")
	sh.Env = append(os.Environ(), stale...)
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("source %s: %v", local.envFile, err)
	}
	got := "\n" + string(out)
	for _, kv := range stale {
		name, _, _ := strings.Cut(kv, "=")
		if kept := strings.Contains(got, "\n"+kv+"\n"); kept != (name == "DLQQ_KEY_FINGERPRINT") {
			t.Errorf("after sourcing %s over %s, it is kept: %v", local.envFile, kv, kept)
		}
	}
	if !strings.Contains(got, "\nDLQQ_STACK=dlqq\n") {
		t.Errorf("after sourcing %s: no DLQQ_STACK=dlqq", local.envFile)
	}
}

// The seven functions exist in the Lambda API as the template deploys them.
func TestLocalListsTheSevenFunctions(t *testing.T) {
	ctx := context.Background()
	api := lambda.NewFromConfig(local.aws)
	out, err := api.ListFunctions(ctx, &lambda.ListFunctionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range out.Functions {
		got[aws.ToString(f.FunctionName)] = true
	}
	for _, f := range []string{"dlqq-ingest", "dlqq-redrive", "dlqq-operate", "dlqq-sweeper", "dlqq-metrics", "dlqq-ledger", "dlqq-digest"} {
		if !got[f] {
			t.Errorf("list-functions lacks %s: %v", f, got)
		}
	}
	cfg, err := api.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("dlqq-redrive")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(cfg.Timeout) != 900 || cfg.Environment == nil || cfg.Environment.Variables["TABLE_NAME"] != stackOutput(t, stackoutputs.QuarantineTable) {
		t.Errorf("dlqq-redrive configuration: timeout %d, environment %+v", aws.ToInt32(cfg.Timeout), cfg.Environment)
	}
}

// aws lambda invoke --function-name dlqq-redrive --payload
// fileb://events/redrive-dry-run.json answers with the function's report.
func TestLocalInvokeRedriveDryRun(t *testing.T) {
	payload := lambdatest.Sample(t, "redrive-dry-run.json")
	out, err := lambda.NewFromConfig(local.aws).Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("dlqq-redrive"), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		RunID  string `json:"run_id"`
		Action string
		Source string
		DryRun bool `json:"dry_run"`
	}
	if out.FunctionError != nil || json.Unmarshal(out.Payload, &rep) != nil || rep.RunID == "" || rep.Action != "redrive" || rep.Source != "dlqq-source" || !rep.DryRun {
		t.Fatalf("invoke: %v %s", aws.ToString(out.FunctionError), out.Payload)
	}
	if !strings.Contains(logs(t), `[dlqq-redrive] {`) || !strings.Contains(logs(t), rep.RunID) {
		t.Errorf("the redrive bootstrap's log line for run %s is not in the logs", rep.RunID)
	}
}

// ownSource names the example source of a message sent to the stack's DLQ
// itself: the DLQ is shared (embedded.WithLocalSources), and such a
// message carries no DeadLetterQueueSourceArn (docs/ingest.md).
var ownSource = map[string]sqstypes.MessageAttributeValue{
	quarantine.AttrFailureSource: {DataType: aws.String("String"), StringValue: aws.String("dlqq-source")},
}

// A message sent to the DLQ (at the URL the banner prints) becomes a
// record: the poller invoked the ingest bootstrap through the Lambda API.
// dlqctl then finds it with no flags, and its redrive dry run goes through
// the redrive function.
func TestLocalDLQMessageBecomesARecord(t *testing.T) {
	ctx := context.Background()
	event := embedded.RandomName("evt")
	sent, err := sqs.NewFromConfig(local.aws).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(local.env["DLQQ_DLQ_URL"]), MessageBody: aws.String(`{"event_id":"` + event + `"}`),
		MessageAttributes: ownSource})
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(local.aws, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	id := "dlqq-source#" + event
	table := stackOutput(t, stackoutputs.QuarantineTable)
	eventually(t, "the record of the DLQ message", func() error {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: id}}})
		if err != nil {
			return err
		}
		if out.Item == nil {
			return errors.New("no record yet")
		}
		return nil
	})
	if l := logs(t); !strings.Contains(l, "[dlqq-ingest] {") || !strings.Contains(l, aws.ToString(sent.MessageId)) {
		t.Errorf("the ingest bootstrap did not log message %s", aws.ToString(sent.MessageId))
	}
	for k, v := range local.env { // as after `source` of the env file
		t.Setenv(k, v)
	}
	var out, errw strings.Builder
	ctl := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	if code := ctl.Main(ctx, []string{"show", id}); code != 0 || !strings.Contains(out.String(), event) {
		t.Fatalf("dlqctl show %s: %d\n%s%s", id, code, out.String(), errw.String())
	}
	out.Reset()
	ctl = dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	if code := ctl.Main(ctx, []string{"redrive", "--source", "dlqq-source", "--id", id}); code != dlqctl.ExitNotExecuted || !strings.Contains(out.String()+errw.String(), "plan (dry run): would redrive 0, hold 1") {
		t.Fatalf("dlqctl redrive --id %s: %d\n%s%s", id, code, out.String(), errw.String())
	}
}

// A bootstrap that dies is restarted by the supervisor, which says so, and
// the next invocation succeeds. (One made in the instant the process dies
// may have been handed to it: that one fails with Runtime.ExitError, as on
// Lambda, instead of waiting out the timeout.)
func TestLocalRestartsAKilledBootstrap(t *testing.T) {
	pids := bootstrapPIDs("sweeper")
	if len(pids) == 0 {
		t.Fatal("no bootstrap started line for dlqq-sweeper in the logs")
	}
	old := pids[len(pids)-1]
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new dlqq-sweeper bootstrap", func() error {
		if now := bootstrapPIDs("sweeper"); now[len(now)-1] == old {
			return errors.New("not restarted yet")
		}
		return nil
	})
	out, err := lambda.NewFromConfig(local.aws).Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("dlqq-sweeper"), Payload: lambdatest.ScheduledSample(t, "sweeper-scheduled.json")})
	if err != nil || out.FunctionError != nil {
		t.Fatalf("invoke after the kill: %v %s", err, out.Payload)
	}
	restarted := false
	for _, m := range logLines() {
		restarted = restarted || (m["msg"] == "bootstrap exited; restarting it" && m["function"] == "dlqq-sweeper" && m["pid"] == float64(old))
	}
	if now := bootstrapPIDs("sweeper"); !restarted || now[len(now)-1] == old {
		t.Fatalf("restart of pid %d not logged (restarted %v, pids %v)", old, restarted, now)
	}
}

// -dir is emptied only when an earlier run made it.
func TestResetDirRefusesAForeignDirectory(t *testing.T) {
	t.Parallel()
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetDir(foreign); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("resetDir on a foreign directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "keep")); err != nil {
		t.Fatalf("the foreign file is gone: %v", err)
	}
	ours := filepath.Join(t.TempDir(), "new")
	for range 2 {
		if err := resetDir(ours); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ours, "old-run"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := resetDir(ours); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ours, "old-run")); !os.IsNotExist(err) {
		t.Fatalf("an earlier run's file survived: %v", err)
	}
}

// The table's stream reaches the ledger bootstrap through the Lambda API:
// a record made from a DLQ message is in a segment of the Object Lock
// bucket within seconds, and the digest schedule's input, invoked now on
// the digest function (the stream function refuses it), signs a digest
// that anchors it.
func TestLocalLedgerLedgersARecord(t *testing.T) {
	ctx := context.Background()
	event := embedded.RandomName("led")
	if _, err := sqs.NewFromConfig(local.aws).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(local.env["DLQQ_DLQ_URL"]), MessageBody: aws.String(`{"event_id":"` + event + `"}`),
		MessageAttributes: ownSource}); err != nil {
		t.Fatal(err)
	}
	id := "dlqq-source#" + event
	s3c := s3.NewFromConfig(local.aws, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(local.env["AWS_ENDPOINT_URL_S3"]), true
	})
	bucket := local.env["DLQQ_LOCAL_ARCHIVE_BUCKET"]
	eventually(t, "a segment with the record's first version", func() error {
		p := s3.NewListObjectsV2Paginator(s3c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("ledger/segments/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, o := range page.Contents {
				got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
				if err != nil {
					return err
				}
				raw, err := io.ReadAll(got.Body)
				got.Body.Close()
				if err != nil {
					return err
				}
				if strings.Contains(string(raw), `"event":"INSERT"`) && strings.Contains(string(raw), `"key":"`+id+`"`) {
					return nil
				}
			}
		}
		return errors.New("no segment holds it yet")
	})
	if !strings.Contains(logs(t), "[dlqq-ledger] {") {
		t.Error("the ledger bootstrap logged nothing")
	}
	// The digest is the digest function's: the stream function refuses
	// the schedule's input.
	api := lambda.NewFromConfig(local.aws)
	refused, err := api.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("dlqq-ledger"), Payload: lambdatest.Sample(t, "ledger-digest.json")})
	if err != nil {
		t.Fatal(err)
	}
	if refused.FunctionError == nil || !strings.Contains(string(refused.Payload), "event refused") {
		t.Fatalf("the stream function took the digest's input: %v %s", aws.ToString(refused.FunctionError), refused.Payload)
	}
	out, err := api.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("dlqq-digest"), Payload: lambdatest.Sample(t, "ledger-digest.json")})
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		N      int64 `json:"n"`
		Shards int   `json:"shards"`
	}
	if out.FunctionError != nil || json.Unmarshal(out.Payload, &rep) != nil || rep.N < 1 || rep.Shards < 1 {
		t.Fatalf("digest: %v %s", aws.ToString(out.FunctionError), out.Payload)
	}
}
