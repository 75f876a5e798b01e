package dlqctl_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// countingCFN counts DescribeStacks calls.
type countingCFN struct {
	dlqctl.StackDescriber
	calls atomic.Int32
}

func (c *countingCFN) DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	c.calls.Add(1)
	return c.StackDescriber.DescribeStacks(ctx, in, opts...)
}

// countingSTS counts GetCallerIdentity calls; err, when set, is its answer.
type countingSTS struct {
	dlqctl.CallerIdentity
	calls atomic.Int32
	err   error
}

func (c *countingSTS) GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, opts ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	c.calls.Add(1)
	if c.err != nil {
		return nil, c.err
	}
	return c.CallerIdentity.GetCallerIdentity(ctx, in, opts...)
}

// outputsOnly is a CloudFormation that describes one stack, complete, of
// account 000000000000 in us-east-1, with the given outputs.
type outputsOnly map[string]string

func (o outputsOnly) DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	return fakeStack{status: cfntypes.StackStatusCreateComplete, outputs: o}.DescribeStacks(ctx, in, opts...)
}

// fakeStack is a CloudFormation that describes one stack in the state
// status, with the given outputs, of account 000000000000 in us-east-1.
type fakeStack struct {
	status  cfntypes.StackStatus
	outputs map[string]string
	updated *time.Time
}

func (f fakeStack) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	s := cfntypes.Stack{StackName: in.StackName, StackStatus: f.status, LastUpdatedTime: f.updated,
		StackId: aws.String("arn:aws:cloudformation:us-east-1:000000000000:stack/" + aws.ToString(in.StackName) + "/8d0c7a10-0000-4000-8000-000000000000")}
	for k, v := range f.outputs {
		s.Outputs = append(s.Outputs, cfntypes.Output{OutputKey: aws.String(k), OutputValue: aws.String(v)})
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cfntypes.Stack{s}}, nil
}

// stackApp is an App on f's stack whose CloudFormation and STS are cfn and
// id (the stack's own when nil), and only the arguments given.
func (f *fixture) stackApp(cfn dlqctl.StackDescriber, id dlqctl.CallerIdentity) (*dlqctl.App, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.Now = f.clock.Now
	a.IsTerminal = func() bool { return false }
	if cfn == nil {
		cfn = cloudformation.NewFromConfig(f.st.AWS)
	}
	if id == nil {
		id = sts.NewFromConfig(f.st.AWS)
	}
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: f.st.Clients, Lambda: lambda.NewFromConfig(f.st.AWS), CloudFormation: cfn, STS: id, Local: true}, nil
	}
	return a, &out, &errw
}

// --stack (DLQQ_STACK) fills the settings from the stack's outputs, read
// once and only when a stack is named and the command needs a setting not
// given: a flag wins over its variable, the variable over the output, the
// output over the built-in default.
func TestStackOutputsFillTheSettings(t *testing.T) {
	f := newFixture(t)
	stack := f.st.Env.StackName
	outputs := f.st.Outputs()
	for _, c := range []struct {
		name  string
		env   map[string]string
		args  []string
		table string
		calls int32
	}{
		{"no stack: the default", nil, []string{"ls"}, "dlqq-quarantine", 0},
		{"--stack: the output", nil, []string{"--stack", stack, "ls"}, f.st.Names["QuarantineTable"], 1},
		{"DLQQ_STACK: the output", map[string]string{"DLQQ_STACK": stack}, []string{"ls"}, f.st.Names["QuarantineTable"], 1},
		// show needs the function too, which the stack gives.
		{"the variable over the output", map[string]string{"DLQQ_TABLE": "from-env"}, []string{"--stack", stack, "show", "orders#o1"}, "from-env", 1},
		{"the flag over the variable and the output", map[string]string{"DLQQ_TABLE": "from-env"}, []string{"--stack", stack, "--table", "from-flag", "show", "orders#o1"}, "from-flag", 1},
		// ls needs only the table: given, the stack is not read.
		{"all it needs given: the stack is not read", nil, []string{"--stack", stack + "-nosuch", "--table", "from-flag", "ls"}, "from-flag", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.ClearDLQQ(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfn := &countingCFN{StackDescriber: cloudformation.NewFromConfig(f.st.AWS)}
			a, out, errw := f.stackApp(cfn, nil)
			code := a.Main(context.Background(), c.args)
			if a.Table != c.table || cfn.calls.Load() != c.calls {
				t.Fatalf("table %q after %d DescribeStacks, want %q after %d (exit %d: %s)", a.Table, cfn.calls.Load(), c.table, c.calls, code, errw)
			}
			if c.table == f.st.Names["QuarantineTable"] && (code != 0 || !strings.Contains(out.String(), "orders#o1")) {
				t.Fatalf("ls on the stack's table (exit %d):\n%s%s", code, out, errw)
			}
		})
	}

	testenv.ClearDLQQ(t)
	cfn := &countingCFN{StackDescriber: cloudformation.NewFromConfig(f.st.AWS)}
	a, out, errw := f.stackApp(cfn, nil)
	if code := a.Main(context.Background(), []string{"--stack", stack, "verify", "--no-ledger"}); code != 0 || cfn.calls.Load() != 1 {
		t.Fatalf("verify on the stack: exit %d after %d DescribeStacks:\n%s%s", code, cfn.calls.Load(), out, errw)
	}
	for got, want := range map[string]string{
		a.Table: outputs[stackoutputs.QuarantineTable], a.PayloadBucket: outputs[stackoutputs.PayloadBucket], a.Function: outputs[stackoutputs.RedriveFunction],
		a.LedgerBucket: outputs[stackoutputs.ArchiveBucket], a.SigningKey: outputs[stackoutputs.LedgerSigningKey],
	} {
		if want == "" || got != want {
			t.Errorf("a setting is %q, the stack's output %q", got, want)
		}
	}
	if a.LedgerBucket != f.st.Names["ArchiveBucket"] || a.SigningKey != f.st.KeyARNs["LedgerSigningKey"] {
		t.Errorf("ledger bucket %q, signing key %q", a.LedgerBucket, a.SigningKey)
	}
}

// A stack that does not exist, or lacks an output the command needs, is an
// error naming the stack and the output; a command that fails before it
// calls AWS does not read the stack.
func TestStackErrors(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	missing := f.st.Env.StackName + "-nosuch"
	a, out, errw := f.stackApp(nil, nil)
	if code := a.Main(context.Background(), []string{"--stack", missing, "ls"}); code != 1 ||
		!strings.Contains(errw.String(), "stack "+missing+" (--stack, DLQQ_STACK): no such CloudFormation stack") || !strings.Contains(errw.String(), "does not exist") {
		t.Fatalf("an unknown stack (exit %d):\n%s%s", code, out, errw)
	}

	tableOnly := outputsOnly{stackoutputs.QuarantineTable: f.st.Names["QuarantineTable"]}
	a, out, errw = f.stackApp(tableOnly, nil)
	if code := a.Main(context.Background(), []string{"--stack", "old", "ls"}); code != 0 || !strings.Contains(out.String(), "orders#o1") {
		t.Fatalf("ls needs only the table (exit %d):\n%s%s", code, out, errw)
	}
	a, out, errw = f.stackApp(tableOnly, nil)
	if code := a.Main(context.Background(), []string{"--stack", "old", "verify"}); code != 1 ||
		!strings.Contains(errw.String(), "stack old has no output ArchiveBucketName (set --ledger-bucket or DLQQ_LEDGER_BUCKET), no output LedgerSigningKeyArn (set --signing-key or DLQQ_SIGNING_KEY)") {
		t.Fatalf("verify on a stack without the ledger's outputs (exit %d):\n%s%s", code, out, errw)
	}
	// Given by flags, the missing outputs are not needed.
	a, out, errw = f.stackApp(tableOnly, nil)
	if code := a.Main(context.Background(), []string{"--stack", "old", "verify", "--no-ledger"}); code != 0 {
		t.Fatalf("verify --no-ledger needs only the table (exit %d):\n%s%s", code, out, errw)
	}

	cfn := &countingCFN{StackDescriber: cloudformation.NewFromConfig(f.st.AWS)}
	a, _, errw = f.stackApp(cfn, nil)
	if code := a.Main(context.Background(), []string{"--stack", f.st.Env.StackName, "park", "orders#o1"}); code != 2 || cfn.calls.Load() != 0 {
		t.Fatalf("park without --reason: exit %d after %d DescribeStacks: %s", code, cfn.calls.Load(), errw)
	}
}

// startStackRedrive runs the redrive function under the name the
// template gives it (the stack's RedriveFunctionName) and leaves the test
// with DLQQ_STACK as its only DLQQ_* variable.
func (f *fixture) startStackRedrive(t *testing.T) {
	t.Helper()
	env, err := lambdatest.Env(f.st, "RedriveFunction")
	if err != nil {
		t.Fatal(err)
	}
	fn, err := lambdatest.Supervise(context.Background(), f.st, lambdatest.Spec{
		Name: f.st.Outputs()[stackoutputs.RedriveFunction], Bootstrap: redriveBootstrap(t), Env: append(env, "SOURCES="+oneOperator(t, ordersSources)),
		Timeout: 60 * time.Second, Configure: true,
	}, io.Discard, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Close)
	// dlqctl finds everything else through the stack alone.
	testenv.ClearDLQQ(t)
	t.Setenv("DLQQ_STACK", f.st.Env.StackName)
}

// Without --actor, dlqctl records the caller's ARN from STS (asked once);
// with --actor, that name and no STS call; when STS fails the command
// fails and the record is unchanged. Only --stack names the rest.
func TestTheActorIsTheCallersARN(t *testing.T) {
	f := newFixture(t)
	f.startStackRedrive(t)
	ctx := context.Background()
	who, err := sts.NewFromConfig(f.st.AWS).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(who.Arn) == "" {
		t.Fatalf("the emulator's STS: %v %v", who, err)
	}
	arn := aws.ToString(who.Arn)
	lastActor := func(id string) (string, quarantine.Status) {
		t.Helper()
		r, err := f.store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Attempts[len(r.Attempts)-1].Actor, r.Status
	}

	id := &countingSTS{CallerIdentity: sts.NewFromConfig(f.st.AWS)}
	a, out, errw := f.stackApp(nil, id)
	if code := a.Main(ctx, []string{"park", f.ids["o2"], "--reason", "recall review"}); code != 0 {
		t.Fatalf("park (exit %d):\n%s%s", code, out, errw)
	}
	if actor, status := lastActor(f.ids["o2"]); actor != "unverified:"+arn || status != quarantine.StatusParked || id.calls.Load() != 1 {
		t.Fatalf("park recorded %q (%s) after %d GetCallerIdentity, want %q", actor, status, id.calls.Load(), arn)
	}

	id = &countingSTS{CallerIdentity: sts.NewFromConfig(f.st.AWS)}
	a, out, errw = f.stackApp(nil, id)
	if code := a.Main(ctx, []string{"unpark", f.ids["o2"], "--reason", "cleared", "--actor", "bob"}); code != 0 {
		t.Fatalf("unpark (exit %d):\n%s%s", code, out, errw)
	}
	if actor, _ := lastActor(f.ids["o2"]); actor != "unverified:bob" || id.calls.Load() != 0 {
		t.Fatalf("unpark --actor bob recorded %q after %d GetCallerIdentity", actor, id.calls.Load())
	}

	// A redrive invokes the function twice (the plan, the run): STS once.
	// (The orders queue exists, so the replay is sent: a failed one is
	// invoked again until dlqctl calls it stalled.)
	if _, err := f.st.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")}); err != nil {
		t.Fatal(err)
	}
	id = &countingSTS{CallerIdentity: sts.NewFromConfig(f.st.AWS)}
	a, out, errw = f.stackApp(nil, id)
	if code := a.Main(ctx, []string{"redrive", "--source", "orders", "--id", f.ids["o3"], "--yes"}); code != 0 || id.calls.Load() != 1 {
		t.Fatalf("redrive (exit %d) after %d GetCallerIdentity:\n%s%s", code, id.calls.Load(), out, errw)
	}
	if actor, _ := lastActor(f.ids["o3"]); actor != "unverified:"+arn {
		t.Fatalf("redrive recorded %q, want %q", actor, arn)
	}

	before, _ := f.store.Get(ctx, f.ids["o4"])
	id = &countingSTS{err: errors.New("ExpiredToken: the security token included in the request is expired")}
	a, out, errw = f.stackApp(nil, id)
	if code := a.Main(ctx, []string{"park", f.ids["o4"], "--reason", "recall review"}); code != 1 ||
		!strings.Contains(errw.String(), "sts:GetCallerIdentity failed (name yourself with --actor or DLQQ_ACTOR)") || !strings.Contains(errw.String(), "ExpiredToken") {
		t.Fatalf("park with STS failing (exit %d):\n%s%s", code, out, errw)
	}
	if after, _ := f.store.Get(ctx, f.ids["o4"]); after.Version != before.Version || after.Status != before.Status {
		t.Fatalf("the record changed: version %d → %d, %s → %s", before.Version, after.Version, before.Status, after.Status)
	}
}

// The stack's redrive function is the one whose SOURCES --source is
// checked against (ls, buckets, redrive), as for --function.
func TestStackNamesTheRedriveFunction(t *testing.T) {
	f := newFixture(t)
	f.startStackRedrive(t)
	fn := f.st.Outputs()[stackoutputs.RedriveFunction]
	for _, cmd := range []string{"ls", "buckets"} {
		a, out, errw := f.stackApp(nil, nil)
		if code := a.Main(context.Background(), []string{cmd, "--source", "orders"}); code != 0 || strings.Contains(errw.String(), "not checked") {
			t.Fatalf("%s --source orders (exit %d):\n%s%s", cmd, code, out, errw)
		}
		a, out, errw = f.stackApp(nil, nil)
		if code := a.Main(context.Background(), []string{cmd, "--source", "nope"}); code != 2 || !strings.Contains(errw.String(), "the redrive function "+fn+" configures orders") {
			t.Fatalf("%s --source nope (exit %d):\n%s%s", cmd, code, out, errw)
		}
	}
}
