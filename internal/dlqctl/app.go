// Package dlqctl is the operator CLI: triage (ls, buckets), forensics
// (show), verification (verify), replay (redrive), manual parking and
// health (the metrics and alarm states in CloudWatch). Each
// command is a file with an options struct and a run function that tests
// call directly; the cobra commands only parse flags into them.
package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFailure  = 1
	ExitUsage    = 2
	ExitMismatch = 3
	// ExitNotExecuted: a change was planned but not made because it was
	// not confirmed (redrive without --yes off a terminal, or declined).
	ExitNotExecuted = 4
)

// UsageError is a bad command line.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// MismatchError is a verification that found problems.
type MismatchError struct{ Count int }

func (e *MismatchError) Error() string {
	return plural(e.Count, "verification problem", "verification problems")
}

// ExitCode classifies an error into the CLI's exit code.
func ExitCode(err error) int {
	var u *UsageError
	var m *MismatchError
	var n *NotExecutedError
	var p *PendingApprovalError
	switch {
	case errors.As(err, &p):
		return ExitNotExecuted
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	case errors.As(err, &m):
		return ExitMismatch
	case errors.As(err, &n):
		return ExitNotExecuted
	}
	return ExitFailure
}

// Clients are the AWS clients the commands use.
type Clients struct {
	*awsclients.Clients
	Lambda *lambda.Client
	// AWS is the configuration the clients were made from: the operator
	// endpoint's requests are signed with its credentials and region.
	AWS aws.Config
	// CloudFormation reads the stack --stack names; STS says who the
	// credentials are when no --actor is given.
	CloudFormation StackDescriber
	STS            CallerIdentity
	// Local is true against emulators (an endpoint is configured): the
	// clients adjust to them (awsclients.Options).
	Local bool
}

// App holds what every command shares: IO, the clock, the AWS clients and
// the global flags.
type App struct {
	In       io.Reader
	Out, Err io.Writer
	// IsTerminal reports whether a person is at the keyboard.
	IsTerminal func() bool
	Now        func() time.Time
	// Connect builds the AWS clients (the standard config chain: profiles,
	// region, AWS_ENDPOINT_URL); tests replace it.
	Connect func(ctx context.Context, profile, region string) (*Clients, error)

	Table, PayloadBucket, Function, Profile, Region, Output, Actor string
	// ApprovalID names the approval a high-risk request through the
	// operator endpoint becomes (--approval-id): a change ticket, say;
	// empty, dlqctl draws one.
	ApprovalID string
	// OperatorURL is the operator endpoint (--operator-url,
	// DLQQ_OPERATOR_URL, the stack's OperatorEndpointUrl): when set, every
	// action goes there, signed with your own credentials, and is recorded
	// under the principal AWS verified (operator.go).
	OperatorURL string
	// Stack names a CloudFormation stack whose outputs fill the settings
	// not given (stack.go).
	Stack string
	// LedgerBucket holds the ledger's objects; SigningKey is the KMS key
	// whose public key verifies the digests (verify, ledger export).
	LedgerBucket, SigningKey string
	// BusyWait is how long a request waits while the redrive function is
	// busy (TooManyRequestsException: its one concurrent slot is taken by
	// a run), retrying, before it gives up (default DefaultBusyWait).
	BusyWait time.Duration
	// PartitionBytes is the bytes of segments and items verify checks in
	// one partition (0: ledger.PartitionBytes; verifyspill.go).
	PartitionBytes int64
	// ObjectConcurrency is how many archived stubs and claim-checked
	// bodies verify checks against their S3 objects at once (0:
	// ObjectConcurrency).
	ObjectConcurrency int
	// CheckpointResample is the chance, 1 in it, that verify --checkpoint
	// reads an object it has a copy or proof of all the same (0:
	// CheckpointResample; negative: never, for tests that count reads).
	CheckpointResample int

	// WriterKeys are the writer HMAC keys' ARNs, ingest,redrive,sweeper
	// (--writer-keys, DLQQ_WRITER_KEYS, else the stack's three outputs):
	// verify checks each ledgered version's writer proof with them
	// (writers.go).
	WriterKeys string
	// writerARNs are WriterKeys resolved to their ARNs by writerCheck (nil:
	// none given), checked against the signed digests (writers.go).
	writerARNs []string
	// writerMACs answers writerCheck's VerifyMac calls online (nil:
	// offline, or no writer keys); verify --checkpoint gives it the
	// checkpoint's proofs (writers.go).
	writerMACs *macCache

	// KeyFingerprint pins the signing key: the SHA-256 (hex) of its DER
	// public key (verify, ledger export: --key-fingerprint,
	// DLQQ_KEY_FINGERPRINT).
	KeyFingerprint string

	clients  *Clients
	stackErr error
	// stack is the stack read (nil: none); fromOutput names, by flag, the
	// output each setting filled from it came from.
	stack      *cfntypes.Stack
	fromOutput map[string]string
	// cmd is the command running (set before it runs).
	cmd *cobra.Command
}

// DefaultBusyWait bounds the wait for a busy redrive function: a park or a
// policy revocation during a run is retried for this long.
const DefaultBusyWait = 2 * time.Minute

// NewApp returns an App on the process's IO and the real AWS config chain.
func NewApp(in io.Reader, out, errw io.Writer) *App {
	return &App{In: in, Out: out, Err: errw, Now: time.Now, IsTerminal: stdinIsTerminal, Connect: connect}
}

func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func connect(ctx context.Context, profile, region string) (*Clients, error) {
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	cfg = sdkhttp.Use(cfg)
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("no AWS credentials found (set a profile, AWS_ACCESS_KEY_ID, or run aws sso login): %w", err)
	}
	local := cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL") != ""
	return &Clients{AWS: cfg, Clients: awsclients.New(cfg, awsclients.Options{Local: local}), Lambda: lambda.NewFromConfig(cfg),
		CloudFormation: cloudformation.NewFromConfig(cfg), STS: sts.NewFromConfig(cfg), Local: local}, nil
}

func (a *App) connect(ctx context.Context) (*Clients, error) {
	if a.clients == nil {
		c, err := a.Connect(ctx, a.Profile, a.Region)
		if err != nil {
			return nil, err
		}
		a.clients = c
		a.stackErr = a.useStack(ctx, c)
	}
	if a.stackErr != nil {
		return nil, a.stackErr
	}
	return a.clients, nil
}

func (a *App) store(ctx context.Context) (*dynamostore.Store, *dynamostore.Lister, quarantine.PayloadStore, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var payloads quarantine.PayloadStore
	if a.PayloadBucket != "" {
		payloads = s3store.New(c.S3, a.PayloadBucket, "")
	} else {
		payloads = s3store.New(c.S3, "", "") // references carry their bucket
	}
	return dynamostore.New(c.DynamoDB, a.Table), dynamostore.NewLister(c.DynamoDB, a.Table), payloads, nil
}

// Root builds the command tree.
func (a *App) Root() *cobra.Command {
	root := &cobra.Command{
		Use:           "dlqctl",
		Short:         "Triage, forensics, verification and redrive for DLQ Quarantine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(a.In)
	root.SetOut(a.Out)
	root.SetErr(a.Err)
	root.SetFlagErrorFunc(flagError) // root_help.go: a usage error, naming the flag meant
	pf := root.PersistentFlags()
	pf.StringVar(&a.Table, "table", envOr("DLQQ_TABLE", "dlqq-quarantine"), "quarantine table (DLQQ_TABLE)")
	pf.StringVar(&a.PayloadBucket, "payload-bucket", os.Getenv("DLQQ_PAYLOAD_BUCKET"), "claim-check bucket (DLQQ_PAYLOAD_BUCKET)")
	pf.StringVar(&a.Function, "function", envOr("DLQQ_REDRIVE_FUNCTION", "dlqq-redrive"), "redrive function name (DLQQ_REDRIVE_FUNCTION)")
	pf.StringVar(&a.OperatorURL, "operator-url", os.Getenv("DLQQ_OPERATOR_URL"), "the operator endpoint, where AWS verifies who acts: actions go there signed with your credentials (DLQQ_OPERATOR_URL, else the stack's OperatorEndpointUrl; unset: a direct invoke of --function, recorded as unverified)")
	pf.StringVar(&a.ApprovalID, "approval-id", "", "the id a high-risk request through the operator endpoint waits under (8 to 64 of a-z, 0-9, -: a change ticket, say; default: drawn), which the second operator approves")
	pf.StringVar(&a.Profile, "profile", "", "AWS profile")
	pf.StringVar(&a.Region, "region", "", "AWS region")
	pf.StringVarP(&a.Output, "output", "o", "table", "output: table or json")
	pf.StringVar(&a.LedgerBucket, "ledger-bucket", envOr("DLQQ_LEDGER_BUCKET", os.Getenv("DLQQ_ARCHIVE_BUCKET")), "the ledger's Object Lock bucket, the stack's ArchiveBucket (DLQQ_LEDGER_BUCKET, else DLQQ_ARCHIVE_BUCKET)")
	pf.StringVar(&a.SigningKey, "signing-key", envOr("DLQQ_SIGNING_KEY", "alias/"+envOr("DLQQ_STACK", "dlqq")+"-ledger-signing"), "the ledger's KMS signing key: id, ARN or alias (DLQQ_SIGNING_KEY, else alias/STACK-ledger-signing)")
	pf.StringVar(&a.WriterKeys, "writer-keys", os.Getenv("DLQQ_WRITER_KEYS"), "the writer HMAC keys' ARNs, ingest,redrive,sweeper: verify checks every version's writer proof with them (DLQQ_WRITER_KEYS, else the stack's IngestWriterKeyArn, RedriveWriterKeyArn, SweeperWriterKeyArn)")
	pf.StringVar(&a.Stack, "stack", os.Getenv("DLQQ_STACK"), "CloudFormation stack whose outputs give the table, buckets, redrive function and signing key not set by a flag or variable (DLQQ_STACK)")
	pf.StringVar(&a.Actor, "actor", os.Getenv("DLQQ_ACTOR"), "who you are, for the audit history (DLQQ_ACTOR; default: your ARN from sts:GetCallerIdentity)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.cmd = cmd
		if err := a.checkOutput(); err != nil {
			return err
		}
		if !a.actorGiven() {
			return nil // asked of STS by a command that records it (actor.go)
		}
		return a.checkActor()
	}
	root.AddCommand(a.lsCmd(), a.showCmd(), a.fixCmd(), a.policyCmd(), a.bucketsCmd(), a.verifyCmd(), a.redriveCmd(), a.parkCmd(true), a.parkCmd(false), a.healthCmd(), a.ledgerCmd(), a.approvalsCmd(), a.indexCmd())
	a.finishRoot(root) // root_help.go: version, help, examples, suggestions
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Main runs the CLI and returns its exit code.
func (a *App) Main(ctx context.Context, args []string) int {
	root := a.Root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		if _, usage := err.(*UsageError); !usage && isCobraUsage(err) {
			err = &UsageError{err}
		}
		fmt.Fprintln(a.Err, "dlqctl:", err)
	}
	return ExitCode(err)
}

// isCobraUsage recognises cobra's own argument errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// checkActor refuses an --actor (or DLQQ_ACTOR) that is empty, too long or
// a name the system uses for itself: the audit history must say who acted.
func (a *App) checkActor() error {
	switch {
	case strings.TrimSpace(a.Actor) == "":
		return &UsageError{fmt.Errorf("--actor is empty: name yourself for the audit history (DLQQ_ACTOR)")}
	case len(a.Actor) > maxDirectActor:
		return &UsageError{fmt.Errorf("--actor is longer than %d bytes", maxDirectActor)}
	case quarantine.ReservedActor(a.Actor):
		return &UsageError{fmt.Errorf("--actor %q is a name the system uses for itself (ingest, settler, sweeper, breaker, policy:…, schedule:…); name yourself (DLQQ_ACTOR)", a.Actor)}
	}
	return nil
}

// checkOutput checks -o, case-insensitively as every enum flag
// (enumValue), and stores it lower-case.
func (a *App) checkOutput() error {
	a.Output = strings.ToLower(strings.TrimSpace(a.Output))
	if a.Output != "table" && a.Output != "json" {
		return &UsageError{fmt.Errorf("--output %q: want table or json", a.Output)}
	}
	return nil
}
