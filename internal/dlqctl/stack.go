package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// StackDescriber reads a CloudFormation stack (its outputs).
type StackDescriber interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// stackSetting is a global flag that --stack can fill from an output.
type stackSetting struct {
	flag   string
	env    []string
	output string
	dst    *string
}

func (a *App) stackSettings() []stackSetting {
	return []stackSetting{
		{"table", []string{"DLQQ_TABLE"}, stackoutputs.QuarantineTable, &a.Table},
		{"payload-bucket", []string{"DLQQ_PAYLOAD_BUCKET"}, stackoutputs.PayloadBucket, &a.PayloadBucket},
		{"function", []string{"DLQQ_REDRIVE_FUNCTION"}, stackoutputs.RedriveFunction, &a.Function},
		{"ledger-bucket", []string{"DLQQ_LEDGER_BUCKET", "DLQQ_ARCHIVE_BUCKET"}, stackoutputs.ArchiveBucket, &a.LedgerBucket},
		{"signing-key", []string{"DLQQ_SIGNING_KEY"}, stackoutputs.LedgerSigningKey, &a.SigningKey},
		{"operator-url", []string{"DLQQ_OPERATOR_URL"}, stackoutputs.OperatorEndpoint, &a.OperatorURL},
	}
}

// stackNeeds names, by command path, the settings a command cannot do
// without; a command not listed needs them all. The payload bucket is
// never needed (a record's reference names its bucket).
var stackNeeds = map[string][]string{
	"ls":                {"table"},
	"approvals ls":      {"table"},
	"approvals show":    {"table"},
	"approvals approve": {"table", "operator-url"},
	"approvals reject":  {"table", "operator-url"},
	"buckets":           {"table"},
	"show":              {"table", "function"},
	"fix":               {"table", "function"},
	"redrive":           {"table", "function"},
	"park":              {"table", "function"},
	"unpark":            {"table", "function"},
	"policy add":        {"table", "function"},
	"policy ls":         {"table"},
	"policy rm":         {"table", "function"},
	"policy resume":     {"table", "function"},
	"health":            {"function"},
	"verify":            {"table", "ledger-bucket", "signing-key"},
	"ledger export":     {"table", "ledger-bucket", "signing-key"},
}

// given says whether the user set the setting: its flag, else one of its
// variables. Outside cobra (a test calling a run function), a value is
// given when it is set.
func (a *App) given(s stackSetting) bool {
	if a.cmd == nil {
		return *s.dst != ""
	}
	if a.cmd.Flags().Changed(s.flag) {
		return true
	}
	for _, name := range s.env {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

// fromStack says whether the setting of the flag will come from the
// stack's outputs: a stack is named and the user did not set it.
func (a *App) fromStack(flag string) bool {
	if a.Stack == "" {
		return false
	}
	for _, s := range a.stackSettings() {
		if s.flag == flag {
			return !a.given(s)
		}
	}
	return false
}

// needed says whether the running command cannot do without the setting.
func (a *App) needed(flag string) bool {
	if flag == "payload-bucket" {
		return false
	}
	if a.cmd == nil {
		return true
	}
	path := strings.TrimPrefix(a.cmd.CommandPath(), a.cmd.Root().Name()+" ")
	needs, ok := stackNeeds[path]
	if !ok {
		return true
	}
	if f := a.cmd.Flags().Lookup("no-ledger"); f != nil && f.Value.String() == "true" && (flag == "ledger-bucket" || flag == "signing-key") {
		return false
	}
	for _, n := range needs {
		if n == flag {
			return true
		}
	}
	return false
}

// useStack fills, once, the settings the user did not give from the
// outputs of the stack --stack (DLQQ_STACK) names: a flag and its
// variables win over an output, an output over the built-in default. A
// stack that does not exist, or lacks an output the command needs, is an
// error naming both. When flags and variables give every setting the
// command needs, the stack is not read.
func (a *App) useStack(ctx context.Context, c *Clients) error {
	if a.Stack == "" {
		return nil
	}
	wanted := false // a setting the command needs is not given
	for _, s := range a.stackSettings() {
		wanted = wanted || (a.needed(s.flag) && !a.given(s))
	}
	if !wanted {
		return nil // flags and variables give all it needs
	}
	if c.CloudFormation == nil {
		return errors.New("no CloudFormation client to read --stack with")
	}
	out, err := c.CloudFormation.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(a.Stack)})
	var api smithy.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode() == "ValidationError":
		return &stackUnreadable{fmt.Errorf("stack %s (--stack, DLQQ_STACK): no such CloudFormation stack in this account and region: %s", a.Stack, api.ErrorMessage())}
	case errors.As(err, &api) && (api.ErrorCode() == "AccessDenied" || api.ErrorCode() == "AccessDeniedException"):
		return &stackUnreadable{fmt.Errorf("read stack %s (--stack, DLQQ_STACK): %w", a.Stack, err)}
	case err != nil:
		return fmt.Errorf("read stack %s (--stack, DLQQ_STACK): %w", a.Stack, err)
	case len(out.Stacks) != 1:
		return fmt.Errorf("stack %s (--stack, DLQQ_STACK): DescribeStacks returned %d stacks", a.Stack, len(out.Stacks))
	}
	st := out.Stacks[0]
	if err := a.stackUsable(st); err != nil {
		return err
	}
	a.stack = &st
	outputs := map[string]string{}
	for _, o := range st.Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	a.writerKeysFromStack(outputs) // writers.go
	var missing []string
	for _, s := range a.stackSettings() {
		if a.given(s) {
			continue
		}
		if v := outputs[s.output]; v != "" {
			if err := sameAccount(st, s, v); err != nil {
				return err
			}
			*s.dst = v
			if a.fromOutput == nil {
				a.fromOutput = map[string]string{}
			}
			a.fromOutput[s.flag] = s.output
			continue
		}
		if a.needed(s.flag) {
			missing = append(missing, fmt.Sprintf("%s (set --%s or %s)", s.output, s.flag, s.env[0]))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("stack %s has no output %s", a.Stack, strings.Join(missing, ", no output "))
	}
	return nil
}

// stackUnreadable is a stack that does not exist or that the caller may
// not describe (health then names the alarms after --stack alone).
type stackUnreadable struct{ err error }

func (e *stackUnreadable) Error() string { return e.err.Error() }
func (e *stackUnreadable) Unwrap() error { return e.err }

// usableStates are the stack states whose outputs dlqctl uses; in
// passingStates (an update or import under way, the outputs those of the
// last deploy until it ends, or finished and cleaning up: see passingWhy)
// it warns and goes on. Any other state (being
// created or deleted, deleted, rolled back from its creation, a failed
// update or rollback) is refused, naming it.
var (
	usableStates = []cfntypes.StackStatus{cfntypes.StackStatusCreateComplete, cfntypes.StackStatusUpdateComplete,
		cfntypes.StackStatusUpdateRollbackComplete, cfntypes.StackStatusImportComplete, cfntypes.StackStatusImportRollbackComplete}
	passingStates = []cfntypes.StackStatus{cfntypes.StackStatusUpdateInProgress, cfntypes.StackStatusUpdateCompleteCleanupInProgress,
		cfntypes.StackStatusUpdateRollbackInProgress, cfntypes.StackStatusUpdateRollbackCompleteCleanupInProgress,
		cfntypes.StackStatusImportInProgress, cfntypes.StackStatusImportRollbackInProgress}
)

// stackUsable refuses a stack whose state is not usable, and warns of one
// being updated.
func (a *App) stackUsable(st cfntypes.Stack) error {
	for _, u := range usableStates {
		if st.StackStatus == u {
			return nil
		}
	}
	for _, p := range passingStates {
		if st.StackStatus == p {
			fmt.Fprintf(a.Err, "dlqctl: warning: stack %s is %s: %s\n", a.Stack, st.StackStatus, passingWhy(st.StackStatus))
			return nil
		}
	}
	names := make([]string, len(usableStates))
	for i, u := range usableStates {
		names[i] = string(u)
	}
	state := string(st.StackStatus)
	if state == "" {
		state = "in no state DescribeStacks named"
	}
	return fmt.Errorf("stack %s (--stack, DLQQ_STACK) is %s: its outputs are not used (want %s); pass --table/--function/--ledger-bucket/--signing-key (without --stack) to go on",
		a.Stack, state, strings.Join(names, ", "))
}

// passingWhy says what a passing state's outputs are. In the two
// *_CLEANUP_IN_PROGRESS states the update itself has finished and
// CloudFormation only removes resources: after a successful update the
// outputs are the new deploy's (the replaced resources are being
// deleted); after a rolled-back one they are the previous deploy's again
// (the resources the failed update created are being deleted). Otherwise
// an update, rollback or import is under way.
func passingWhy(s cfntypes.StackStatus) string {
	switch s {
	case cfntypes.StackStatusUpdateCompleteCleanupInProgress:
		return "the update has finished and its outputs are the new deploy's; CloudFormation is deleting the resources it replaced"
	case cfntypes.StackStatusUpdateRollbackCompleteCleanupInProgress:
		return "the update was rolled back and its outputs are the previous deploy's again; CloudFormation is deleting the resources the failed update created"
	}
	return "its outputs are those of its last deploy until that ends"
}

// sameAccount refuses an output that is an ARN (the signing key's; a
// table's, were it one) of another account or region than the stack's
// own: whoever can update the stack could point dlqctl at a key anywhere.
// A name or alias resolves in the caller's account and region.
func sameAccount(st cfntypes.Stack, s stackSetting, v string) error {
	if !arn.IsARN(v) {
		return nil
	}
	out, err := arn.Parse(v)
	if err != nil {
		return fmt.Errorf("stack %s output %s: %q is not an ARN: %w", aws.ToString(st.StackName), s.output, v, err)
	}
	stack, err := arn.Parse(aws.ToString(st.StackId))
	if err != nil {
		return fmt.Errorf("stack %s: no stack ARN (StackId %q) to check its output %s (%s) against: set --%s", aws.ToString(st.StackName), aws.ToString(st.StackId), s.output, v, s.flag)
	}
	if out.AccountID != stack.AccountID || out.Region != stack.Region {
		return fmt.Errorf("stack %s output %s is %s, of account %s in %s, but the stack is account %s's in %s: refused (whoever can update the stack can set its outputs; set --%s to the key you mean)",
			aws.ToString(st.StackName), s.output, v, out.AccountID, out.Region, stack.AccountID, stack.Region, s.flag)
	}
	return nil
}

// stackName is the stack's name: DescribeStacks's when the stack was read
// (--stack may be its ARN), else the name in a stack ARN, else --stack.
func (a *App) stackName() string {
	if a.stack != nil && aws.ToString(a.stack.StackName) != "" {
		return aws.ToString(a.stack.StackName)
	}
	if p, err := arn.Parse(a.Stack); err == nil && p.Service == "cloudformation" {
		if parts := strings.Split(p.Resource, "/"); len(parts) >= 2 && parts[0] == "stack" {
			return parts[1]
		}
	}
	return a.Stack
}
