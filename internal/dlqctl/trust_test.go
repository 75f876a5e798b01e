package dlqctl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// runOn runs dlqctl on the ledger fixture's clients with only args (no
// table, bucket or key added) and cfn as its CloudFormation (the
// stack's own when nil).
func (l *ledgerFixture) runOn(cfn dlqctl.StackDescriber, args ...string) (string, string, int) {
	l.t.Helper()
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.IsTerminal = func() bool { return false }
	if cfn == nil {
		cfn = cloudformation.NewFromConfig(l.st.AWS)
	}
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: l.st.Clients, Lambda: lambda.NewFromConfig(l.st.AWS), CloudFormation: cfn, STS: sts.NewFromConfig(l.st.AWS), Local: true}, nil
	}
	code := a.Main(context.Background(), args)
	return out.String(), errw.String(), code
}

// fingerprint is the SHA-256 (hex) of the DER public key KMS gives for
// key, and the key's ARN.
func (l *ledgerFixture) fingerprint(key string) (string, string) {
	l.t.Helper()
	pk, err := l.st.Clients.KMS.GetPublicKey(context.Background(), &kms.GetPublicKeyInput{KeyId: aws.String(key)})
	if err != nil {
		l.t.Fatal(err)
	}
	sum := sha256.Sum256(pk.PublicKey)
	return hex.EncodeToString(sum[:]), aws.ToString(pk.KeyId)
}

// verify and ledger export on the stack alone (the set-up of
// operations.md): the table, ledger bucket and signing key all from its
// outputs, each said with where it came from, the stack's ARN and the
// key's ARN and fingerprint; a ledger setting given by a flag or a
// variable wins over the output, each on its own.
func TestVerifyOnTheStackSaysWhereItsAnchorsCameFrom(t *testing.T) {
	l := newLedgerFixture(t)
	l.next(l.create("a"), park)
	l.drain()
	l.digest()
	testenv.ClearDLQQ(t)
	stack := l.st.Env.StackName
	outputs := l.st.Outputs()
	table, bucket, key := outputs[stackoutputs.QuarantineTable], outputs[stackoutputs.ArchiveBucket], outputs[stackoutputs.LedgerSigningKey]
	if bucket != l.fns.LedgerConfig.Bucket || table != l.table {
		t.Fatalf("the stack's outputs %v are not the ledger's bucket %s and table %s", outputs, l.fns.LedgerConfig.Bucket, l.table)
	}
	sum, keyARN := l.fingerprint(key)
	d, err := cloudformation.NewFromConfig(l.st.AWS).DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	stackID := aws.ToString(d.Stacks[0].StackId)

	out, errOut, code := l.runOn(nil, "--stack", stack, "verify")
	if code != 0 {
		t.Fatalf("--stack verify (exit %d):\n%s%s", code, out, errOut)
	}
	mustContain(t, out,
		"\ntrust: table "+table+" (stack output "+stackoutputs.QuarantineTable+"), ledger bucket "+bucket+" (stack output "+stackoutputs.ArchiveBucket+
			"), signing key "+key+" (stack output "+stackoutputs.LedgerSigningKey+")\n",
		"\ntrust: stack "+stackID+", CREATE_COMPLETE, never updated: its outputs are only as trustworthy as whoever can update it\n",
		"\ntrust: key "+keyARN+", public key SHA-256 "+sum+" (not pinned: record it and pass --key-fingerprint)\n")

	js, errOut, code := l.runOn(nil, "--stack", stack, "verify", "-o", "json")
	var res struct{ Trust dlqctl.Trust }
	if err := json.Unmarshal([]byte(js), &res); err != nil || code != 0 {
		t.Fatalf("verify -o json (exit %d): %v\n%s%s", code, err, js, errOut)
	}
	tr := res.Trust
	if tr.Table != (dlqctl.Source{Value: table, From: "stack output " + stackoutputs.QuarantineTable}) ||
		tr.LedgerBucket == nil || *tr.LedgerBucket != (dlqctl.Source{Value: bucket, From: "stack output " + stackoutputs.ArchiveBucket}) ||
		tr.SigningKey == nil || *tr.SigningKey != (dlqctl.Source{Value: key, From: "stack output " + stackoutputs.LedgerSigningKey}) ||
		tr.Stack == nil || tr.Stack.ID != stackID || tr.Stack.Name != stack || tr.Stack.Status != "CREATE_COMPLETE" ||
		tr.KeyARN != keyARN || tr.KeyFingerprint != sum || tr.Pinned != "" {
		t.Fatalf("verify -o json's trust: %+v\n%s", tr, js)
	}

	// One ledger setting pinned by a flag or a variable, the other from
	// the stack.
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--signing-key", nil, []string{"--signing-key", keyARN}, "signing key " + keyARN + " (flag --signing-key)"},
		{"--ledger-bucket", nil, []string{"--ledger-bucket", bucket}, "ledger bucket " + bucket + " (flag --ledger-bucket), signing key " + key + " (stack output "},
		{"DLQQ_SIGNING_KEY", map[string]string{"DLQQ_SIGNING_KEY": keyARN}, nil, "signing key " + keyARN + " (variable DLQQ_SIGNING_KEY)"},
		{"DLQQ_LEDGER_BUCKET", map[string]string{"DLQQ_LEDGER_BUCKET": bucket}, nil, "ledger bucket " + bucket + " (variable DLQQ_LEDGER_BUCKET)"},
		{"DLQQ_ARCHIVE_BUCKET", map[string]string{"DLQQ_ARCHIVE_BUCKET": bucket}, nil, "ledger bucket " + bucket + " (variable DLQQ_ARCHIVE_BUCKET)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			out, errOut, code := l.runOn(nil, append(append([]string{"--stack", stack}, c.args...), "verify")...)
			if code != 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "ledger bucket "+bucket) {
				t.Fatalf("exit %d, want %q:\n%s%s", code, c.want, out, errOut)
			}
			dir := filepath.Join(t.TempDir(), "export")
			out, errOut, code = l.runOn(nil, append(append([]string{"--stack", stack}, c.args...), "ledger", "export", dir)...)
			if code != 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "public key SHA-256 "+sum) {
				t.Fatalf("ledger export: exit %d, want %q:\n%s%s", code, c.want, out, errOut)
			}
		})
	}
	// The flag and the variable win over the stack's output.
	if out, errOut, code := l.runOn(nil, "--stack", stack, "--ledger-bucket", "no-such-bucket", "verify"); code != dlqctl.ExitFailure || !strings.Contains(errOut, "ledger bucket no-such-bucket") {
		t.Fatalf("--ledger-bucket over the output (exit %d):\n%s%s", code, out, errOut)
	}
	t.Run("the variable over the output", func(t *testing.T) {
		t.Setenv("DLQQ_SIGNING_KEY", "alias/no-such-key")
		if out, errOut, code := l.runOn(nil, "--stack", stack, "verify"); code != dlqctl.ExitFailure || !strings.Contains(errOut, "signing key alias/no-such-key") {
			t.Fatalf("DLQQ_SIGNING_KEY over the output (exit %d):\n%s%s", code, out, errOut)
		}
	})
}

// --key-fingerprint (DLQQ_KEY_FINGERPRINT) pins the signing key: the
// right one verifies and says so; another fails verify (exit 3, a
// problem naming both fingerprints, the ledger not checked) and ledger
// export (nothing written); a malformed one is a usage error.
func TestKeyFingerprintPinsTheSigningKey(t *testing.T) {
	l := digestedLedger(t)
	stack := l.st.Env.StackName
	sum, keyARN := l.fingerprint(l.st.Outputs()[stackoutputs.LedgerSigningKey])
	other := strings.Repeat("ab", 32)

	out, errOut, code := l.runOn(nil, "--stack", stack, "verify", "--key-fingerprint", "SHA256:"+strings.ToUpper(sum))
	if code != 0 || !strings.Contains(out, "public key SHA-256 "+sum+" (pinned by --key-fingerprint)") {
		t.Fatalf("the right pin (exit %d):\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"--key-fingerprint", nil, []string{"--key-fingerprint", other}},
		{"DLQQ_KEY_FINGERPRINT", map[string]string{"DLQQ_KEY_FINGERPRINT": other}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			out, errOut, code := l.runOn(nil, append([]string{"--stack", stack, "verify"}, c.args...)...)
			if code != dlqctl.ExitMismatch || !strings.Contains(out, "MISMATCH signing key ") ||
				!strings.Contains(out, "has SHA-256 "+sum+", but --key-fingerprint (DLQQ_KEY_FINGERPRINT) pins "+other) ||
				!strings.Contains(out, "ledger: not checked (the signing key is not the pinned one (--key-fingerprint))") ||
				!strings.HasPrefix(out, "not verified: the signing key is not the pinned one\n") || strings.Contains(out, "verified 0 records") {
				t.Fatalf("another pin (exit %d):\n%s%s", code, out, errOut)
			}
			js, _, code := l.runOn(nil, append([]string{"--stack", stack, "verify", "-o", "json"}, c.args...)...)
			var res dlqctl.VerifyResult
			if err := json.Unmarshal([]byte(js), &res); err != nil || code != dlqctl.ExitMismatch || len(res.Problems) != 1 || res.Problems[0].Kind != "key-fingerprint" ||
				res.Trust == nil || res.Trust.KeyFingerprint != sum || res.Trust.Pinned != other || res.Trust.KeyARN != keyARN || res.Ledger != nil ||
				res.NotVerified != dlqctl.NotVerifiedKeyFingerprint || !strings.Contains(js, `"not_verified": "key-fingerprint"`) {
				t.Fatalf("another pin, -o json (exit %d): %v\n%s", code, err, js)
			}
			dir := filepath.Join(t.TempDir(), "export")
			out, errOut, code = l.runOn(nil, append([]string{"--stack", stack, "ledger", "export", dir}, c.args...)...)
			if _, err := os.Stat(dir); code != dlqctl.ExitFailure || !strings.Contains(errOut, "nothing exported: the public key of "+keyARN+" has SHA-256 "+sum+", but --key-fingerprint (DLQQ_KEY_FINGERPRINT) pins "+other) || err == nil {
				t.Fatalf("ledger export, another pin (exit %d, %s: %v):\n%s%s", code, dir, err, out, errOut)
			}
		})
	}
	for _, bad := range []string{"abc", strings.Repeat("zz", 32)} {
		if out, errOut, code := l.runOn(nil, "--stack", stack, "verify", "--key-fingerprint", bad); code != dlqctl.ExitUsage || !strings.Contains(errOut, "64 hex digits") {
			t.Fatalf("--key-fingerprint %s (exit %d):\n%s%s", bad, code, out, errOut)
		}
		if out, errOut, code := l.runOn(nil, "--stack", stack, "verify", "--no-ledger", "--key-fingerprint", bad); code != dlqctl.ExitUsage || !strings.Contains(errOut, "64 hex digits") {
			t.Fatalf("--no-ledger --key-fingerprint %s (exit %d):\n%s%s", bad, code, out, errOut)
		}
	}
	// --no-ledger reads no signing key: a pin is not applied, and says so.
	out, errOut, code = l.runOn(nil, "--stack", stack, "verify", "--no-ledger", "--key-fingerprint", other)
	if code != 0 || !strings.Contains(out, "  note: --key-fingerprint not applied: --no-ledger") {
		t.Fatalf("--no-ledger with a pin (exit %d):\n%s%s", code, out, errOut)
	}
	js, errOut, code := l.runOn(nil, "--stack", stack, "verify", "--no-ledger", "--key-fingerprint", other, "-o", "json")
	var res dlqctl.VerifyResult
	if err := json.Unmarshal([]byte(js), &res); err != nil || code != 0 || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "--key-fingerprint not applied: --no-ledger") }) {
		t.Fatalf("--no-ledger with a pin, -o json (exit %d): %v\n%s%s", code, err, js, errOut)
	}
	if out, errOut, code := l.runOn(nil, "--stack", stack, "verify", "--no-ledger"); code != 0 || strings.Contains(out, "--key-fingerprint not applied") {
		t.Fatalf("--no-ledger, no pin (exit %d):\n%s%s", code, out, errOut)
	}
}

// A signing key (or a table) that a stack output names by an ARN of
// another account or region than the stack's is refused.
func TestStackOutputOfAnotherAccountIsRefused(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	table := f.st.Names["QuarantineTable"]
	for _, c := range []struct {
		name, output, value, cmd, want string
	}{
		{"a key of another account", stackoutputs.LedgerSigningKey, "arn:aws:kms:us-east-1:999999999999:key/1234abcd-0000-4000-8000-000000000000", "verify",
			"of account 999999999999 in us-east-1, but the stack is account 000000000000's in us-east-1: refused"},
		{"a key of another region", stackoutputs.LedgerSigningKey, "arn:aws:kms:eu-west-1:000000000000:key/1234abcd-0000-4000-8000-000000000000", "verify",
			"of account 000000000000 in eu-west-1, but the stack is account 000000000000's in us-east-1: refused"},
		{"a table of another account", stackoutputs.QuarantineTable, "arn:aws:dynamodb:us-east-1:999999999999:table/" + table, "ls",
			"of account 999999999999 in us-east-1, but the stack is account 000000000000's in us-east-1: refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			outs := outputsOnly{stackoutputs.QuarantineTable: table, stackoutputs.ArchiveBucket: f.st.Names["ArchiveBucket"],
				stackoutputs.LedgerSigningKey: f.st.KeyARNs["LedgerSigningKey"]}
			outs[c.output] = c.value
			a, out, errw := f.stackApp(outs, nil)
			if code := a.Main(context.Background(), []string{"--stack", "s", c.cmd}); code != dlqctl.ExitFailure ||
				!strings.Contains(errw.String(), "stack s output "+c.output+" is "+c.value+", "+c.want) {
				t.Fatalf("exit %d:\n%s%s", code, out, errw)
			}
		})
	}
	// The key of the stack's own account and region is used.
	a, out, errw := f.stackApp(outputsOnly{stackoutputs.QuarantineTable: table, stackoutputs.ArchiveBucket: f.st.Names["ArchiveBucket"],
		stackoutputs.LedgerSigningKey: f.st.KeyARNs["LedgerSigningKey"]}, nil)
	// Used: verify read the key (its trust lines name it, from the
	// stack's output, and KMS answered for it; the fixture has no
	// ledger, so its records are problems, exit 3).
	key := f.st.KeyARNs["LedgerSigningKey"]
	if code := a.Main(context.Background(), []string{"--stack", "s", "verify"}); (code != 0 && code != dlqctl.ExitMismatch) || strings.Contains(errw.String(), "refused") ||
		a.SigningKey != key || !strings.Contains(out.String(), ", signing key "+key+" (stack output "+stackoutputs.LedgerSigningKey+")") ||
		!strings.Contains(out.String(), "\ntrust: key "+key+", public key SHA-256 ") {
		t.Fatalf("the stack's own key (exit %d, key %s):\n%s%s", code, a.SigningKey, out, errw)
	}
}

// A stack in a state whose outputs are not to be used is refused, naming
// the state; one being updated is used with a warning.
func TestStackStates(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	outs := map[string]string{stackoutputs.QuarantineTable: f.st.Names["QuarantineTable"]}
	for _, st := range []cfntypes.StackStatus{cfntypes.StackStatusDeleteComplete, cfntypes.StackStatusDeleteInProgress, cfntypes.StackStatusRollbackComplete,
		cfntypes.StackStatusUpdateRollbackFailed, cfntypes.StackStatusCreateInProgress, cfntypes.StackStatusReviewInProgress, ""} {
		a, out, errw := f.stackApp(fakeStack{status: st, outputs: outs}, nil)
		want := "stack s (--stack, DLQQ_STACK) is " + string(st) + ": its outputs are not used (want CREATE_COMPLETE, UPDATE_COMPLETE, UPDATE_ROLLBACK_COMPLETE, IMPORT_COMPLETE, IMPORT_ROLLBACK_COMPLETE); pass --table/--function/--ledger-bucket/--signing-key (without --stack) to go on"
		if st == "" {
			want = "stack s (--stack, DLQQ_STACK) is in no state DescribeStacks named"
		}
		if code := a.Main(context.Background(), []string{"--stack", "s", "ls"}); code != dlqctl.ExitFailure || !strings.Contains(errw.String(), want) {
			t.Errorf("%q: exit %d:\n%s%s", st, code, out, errw)
		}
	}
	for _, st := range []cfntypes.StackStatus{cfntypes.StackStatusUpdateComplete, cfntypes.StackStatusUpdateRollbackComplete, cfntypes.StackStatusImportComplete} {
		a, out, errw := f.stackApp(fakeStack{status: st, outputs: outs}, nil)
		if code := a.Main(context.Background(), []string{"--stack", "s", "ls"}); code != 0 || errw.Len() > 0 || !strings.Contains(out.String(), "orders#o1") {
			t.Errorf("%s: exit %d:\n%s%s", st, code, out, errw)
		}
	}
	a, out, errw := f.stackApp(fakeStack{status: cfntypes.StackStatusUpdateInProgress, outputs: outs}, nil)
	if code := a.Main(context.Background(), []string{"--stack", "s", "ls"}); code != 0 || !strings.Contains(out.String(), "orders#o1") ||
		!strings.Contains(errw.String(), "dlqctl: warning: stack s is UPDATE_IN_PROGRESS: its outputs are those of its last deploy until that ends") {
		t.Errorf("UPDATE_IN_PROGRESS: exit %d:\n%s%s", code, out, errw)
	}
	// Cleaning up, the update has finished: the warning says whose
	// outputs they are.
	for st, want := range map[cfntypes.StackStatus]string{
		cfntypes.StackStatusUpdateCompleteCleanupInProgress:         "dlqctl: warning: stack s is UPDATE_COMPLETE_CLEANUP_IN_PROGRESS: the update has finished and its outputs are the new deploy's; CloudFormation is deleting the resources it replaced\n",
		cfntypes.StackStatusUpdateRollbackCompleteCleanupInProgress: "dlqctl: warning: stack s is UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS: the update was rolled back and its outputs are the previous deploy's again; CloudFormation is deleting the resources the failed update created\n",
	} {
		a, out, errw := f.stackApp(fakeStack{status: st, outputs: outs}, nil)
		if code := a.Main(context.Background(), []string{"--stack", "s", "ls"}); code != 0 || !strings.Contains(out.String(), "orders#o1") || errw.String() != want {
			t.Errorf("%s: exit %d:\n%s%s", st, code, out, errw)
		}
	}
}

// Given the stack's ARN, health names the alarms and sources after the
// stack's name (DescribeStacks's StackName), read or not.
func TestHealthOnAStackARN(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	stack := f.st.Env.StackName
	d, err := cloudformation.NewFromConfig(f.st.AWS).DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(d.Stacks[0].StackId)
	for _, args := range [][]string{{"--stack", id, "health"}, {"--stack", id, "--function", stack + "-nosuch", "health"}} {
		a, out, errw := f.app("", f.clock.Now)
		if code := a.Main(context.Background(), args); code != 0 || !strings.Contains(out.String(), "\nalarms "+stack+".…\n") ||
			!strings.Contains(out.String(), "sources: those named "+stack+"-… ") {
			t.Fatalf("%v (exit %d):\n%s%s", args, code, out, errw)
		}
	}
}

// deniedCFN answers every DescribeStacks with err.
type deniedCFN struct{ err error }

func (d deniedCFN) DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	return nil, d.err
}

// health --stack with a stack it may not describe, or one CloudFormation
// does not know, names the alarms and the function after --stack, as
// before it read the stack, with a warning; any other failure to read it
// fails health.
func TestHealthWithAStackItCannotRead(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	stack := f.st.Env.StackName
	denied := deniedCFN{&smithy.GenericAPIError{Code: "AccessDenied", Message: "User: x is not authorized to perform: cloudformation:DescribeStacks"}}
	for _, c := range []struct {
		name  string
		cfn   dlqctl.StackDescriber
		stack string
		warn  string
	}{
		{"AccessDenied", denied, stack, "is not authorized to perform: cloudformation:DescribeStacks; health takes " + stack + " as the stack's name"},
		{"unknown", nil, stack + "-nosuch", "no such CloudFormation stack in this account and region"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, out, errw := f.stackApp(c.cfn, nil)
			code := a.Main(context.Background(), []string{"--stack", c.stack, "health"})
			if code != 0 || !strings.Contains(errw.String(), "dlqctl: warning: ") || !strings.Contains(errw.String(), c.warn) ||
				!strings.Contains(out.String(), " "+c.stack+".…\n") || !strings.Contains(out.String(), "function "+c.stack+"-redrive ") {
				t.Fatalf("exit %d:\n%s%s", code, out, errw)
			}
		})
	}
	a, out, errw := f.stackApp(deniedCFN{errors.New("connection reset by peer")}, nil)
	if code := a.Main(context.Background(), []string{"--stack", stack, "health"}); code != dlqctl.ExitFailure || !strings.Contains(errw.String(), "connection reset by peer") {
		t.Fatalf("another failure (exit %d):\n%s%s", code, out, errw)
	}
}

// Offline, --key-fingerprint pins the --public-key file the same way.
func TestKeyFingerprintPinsTheOfflinePublicKey(t *testing.T) {
	l := digestedLedger(t)
	dir := l.export()
	der, err := os.ReadFile(filepath.Join(dir, "public-key.der"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	right, other := hex.EncodeToString(sum[:]), strings.Repeat("cd", 32)
	file := filepath.Join(dir, "public-key.der")
	if out, code := l.offline(dir); code != 0 || !strings.Contains(out, "\ntrust: key file "+file+", public key SHA-256 "+right+" (not pinned: record it and pass --key-fingerprint)\n") {
		t.Fatalf("no pin: the file's fingerprint is printed (exit %d):\n%s", code, out)
	}
	if out, code := l.offline(dir, "--key-fingerprint", right); code != 0 || !strings.Contains(out, "note: the public key's SHA-256 is the pinned one (--key-fingerprint)") ||
		!strings.Contains(out, "public key SHA-256 "+right+" (pinned by --key-fingerprint)") {
		t.Fatalf("the right pin (exit %d):\n%s", code, out)
	}
	out, code := l.offline(dir, "--key-fingerprint", other)
	if code != dlqctl.ExitMismatch || !strings.Contains(out, "has SHA-256 "+right+", but --key-fingerprint (DLQQ_KEY_FINGERPRINT) pins "+other) ||
		!strings.Contains(out, "ledger: not checked (the public key is not the pinned one (--key-fingerprint))") ||
		!strings.HasPrefix(out, "not verified: the public key is not the pinned one\n") || strings.Contains(out, "verified 0 records") {
		t.Fatalf("another pin (exit %d):\n%s", code, out)
	}
	js, code := l.offline(dir, "--key-fingerprint", other, "-o", "json")
	var res dlqctl.VerifyResult
	if err := json.Unmarshal([]byte(js), &res); err != nil || code != dlqctl.ExitMismatch || res.NotVerified != dlqctl.NotVerifiedKeyFingerprint || res.Ledger != nil ||
		res.Trust == nil || res.Trust.KeyFingerprint != right || strings.Contains(js, `"table"`) {
		t.Fatalf("another pin, -o json (exit %d): %v\n%s", code, err, js)
	}
}

// verify names the stack it read, with its ARN, state and last update
// (text and -o json).
func TestVerifyNamesTheStacksLastUpdate(t *testing.T) {
	f := newFixture(t)
	testenv.ClearDLQQ(t)
	updated := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	cfn := fakeStack{status: cfntypes.StackStatusUpdateComplete, outputs: map[string]string{stackoutputs.QuarantineTable: f.st.Names["QuarantineTable"]}, updated: &updated}
	a, out, errw := f.stackApp(cfn, nil)
	if code := a.Main(context.Background(), []string{"--stack", "s", "verify", "--no-ledger"}); code != 0 ||
		!strings.Contains(out.String(), "\ntrust: table "+f.st.Names["QuarantineTable"]+" (stack output "+stackoutputs.QuarantineTable+")\n") ||
		!strings.Contains(out.String(), "\ntrust: stack arn:aws:cloudformation:us-east-1:000000000000:stack/s/8d0c7a10-0000-4000-8000-000000000000, UPDATE_COMPLETE, last updated 2026-11-01T08:00:00Z: ") {
		t.Fatalf("exit %d:\n%s%s", code, out, errw)
	}
	a, out, errw = f.stackApp(cfn, nil)
	var res dlqctl.VerifyResult
	if code := a.Main(context.Background(), []string{"--stack", "s", "verify", "--no-ledger", "-o", "json"}); code != 0 || json.Unmarshal(out.Bytes(), &res) != nil ||
		res.Trust == nil || res.Trust.Stack == nil || res.Trust.Stack.LastUpdatedTime == nil || !res.Trust.Stack.LastUpdatedTime.Equal(updated) ||
		res.Trust.LedgerBucket != nil || res.Trust.KeyFingerprint != "" {
		t.Fatalf("-o json (exit %d):\n%s%s", code, out, errw)
	}
}

// docs/operations.md and docs/ledger.md record the fingerprint at deploy
// time with the key given explicitly (`./dlqctl --signing-key "$KEY_ARN"
// verify`, DLQQ_STACK set as the runbook sets it): the command, run as
// the docs show it, prints the key's fingerprint and says the key came
// from the flag, not from a stack output.
func TestDocsRecordTheFingerprintWithTheKeyGiven(t *testing.T) {
	l := digestedLedger(t)
	keyARN := l.st.Outputs()[stackoutputs.LedgerSigningKey]
	sum, answered := l.fingerprint(keyARN)
	const cmd = `./dlqctl --signing-key "$KEY_ARN" verify`
	for _, doc := range []string{"../../docs/operations.md", "../../docs/ledger.md"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "```\n"+cmd+"\n```\n") {
			t.Errorf("%s does not show the deploy-time command %s", doc, cmd)
		}
		if strings.Contains(string(raw), "first `dlqctl verify` prints it") {
			t.Errorf("%s still records the fingerprint from the first verify (trust on first use of the stack's outputs)", doc)
		}
	}
	t.Setenv("DLQQ_STACK", l.st.Env.StackName)
	t.Setenv("KEY_ARN", keyARN)
	args := strings.Fields(os.ExpandEnv(strings.ReplaceAll(strings.TrimPrefix(cmd, "./dlqctl "), `"`, "")))
	out, errOut, code := l.runOn(nil, args...)
	if code != 0 || !strings.Contains(out, ", signing key "+keyARN+" (flag --signing-key)") ||
		!strings.Contains(out, "\ntrust: key "+answered+", public key SHA-256 "+sum+" (not pinned: record it and pass --key-fingerprint)\n") {
		t.Fatalf("%v (exit %d):\n%s%s", args, code, out, errOut)
	}
}

// digestedLedger is a ledger fixture with one record, ledgered and under
// a signed digest, and no DLQQ_* variable set.
func digestedLedger(t *testing.T) *ledgerFixture {
	t.Helper()
	l := newLedgerFixture(t)
	l.anchored("a")
	testenv.ClearDLQQ(t)
	return l
}
