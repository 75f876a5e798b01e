// Package embedded starts the embedded AWS stack used by tests, the demo and
// `make local`: kumo in-process for SQS, DynamoDB, CloudWatch, KMS and the
// Lambda Runtime API, and versitygw (built through the tools module with
// `go tool`) for S3 with Object Lock. Every resource is created from
// infra/template.yaml, so tests and template cannot drift.
//
// When AWS_ENDPOINT_URL is set (LocalStack, say), no emulator is started and
// the resources are created there instead; AWS_ENDPOINT_URL_S3 does the same
// for S3 alone.
package embedded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/awslabs/goformation/v7/cloudformation"
	_ "github.com/sivchari/kumo" // kumoHandler (kmshmac.go)

	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/sdkhttp"
)

// Credentials the embedded stack uses; versitygw checks them, kumo does not.
const (
	AccessKey = "dlqqtest"
	SecretKey = "dlqqtestsecret"
	Region    = "us-east-1"
	// Account is the account id kumo and LocalStack report.
	Account = "000000000000"
	profile = "dlqq-embedded"
)

// Options configure Start.
type Options struct {
	// StackName prefixes every resource name; a random one when empty.
	StackName string
	// Template is the template path (default infra/template.yaml).
	Template string
	// Params override template parameter defaults.
	Params map[string]any
	// NoS3 skips S3 (no versitygw, no buckets).
	NoS3 bool
	// NoIndexBackfill leaves the tables as a deploy leaves them, before
	// dlqctl index backfill: no index state item (listings read the
	// status index) and nothing in the table's stream.
	NoIndexBackfill bool
	// Dir holds versitygw's data and the SDK profile file (a temp dir when empty).
	Dir string
	// DataDir, when set, keeps the stack's state across restarts: kumo's
	// snapshots in DataDir/kumo, versitygw's data in DataDir/s3 (it
	// replaces Dir). The process must have started with
	// PersistEnviron(DataDir) in its environment (see Reexec); Start
	// refuses otherwise. Resources already there are kept.
	DataDir string
	// Log receives versitygw's output and the stack's notes on what the
	// emulator could not create (an alarm kumo cannot hold, and why);
	// discarded when nil.
	Log io.Writer
	// Progress, when set, is told what a slow first start builds.
	Progress io.Writer
	// Existing are queues the stack does not create (a user's queues from
	// before it), created before the template's resources and attached
	// after them (existing.go); WithLocalSources sets the local stack's.
	Existing []ExistingQueue
	// SourcesFile, when set, is the sources file (SOURCES_FILE) of every
	// function that reads one, instead of config/sources.json of the
	// checkout: a deployment's own list of sources.
	SourcesFile string
}

// Stack is a running embedded stack with the template's resources.
type Stack struct {
	// operatorURL is the local operator endpoint (SetOperatorURL).
	operatorURL atomic.Pointer[string]
	// noIndexBackfill: Options.NoIndexBackfill.
	noIndexBackfill bool

	// AWS is an SDK config whose endpoints point at the stack.
	AWS aws.Config
	// Clients are built from AWS for the emulators.
	Clients *awsclients.Clients
	// Endpoint serves every service but S3; S3Endpoint serves S3.
	Endpoint   string
	S3Endpoint string
	// CloudFormationEndpoint answers DescribeStacks for the stack (the dev
	// kit's endpoint: kumo's CloudFormation stores no outputs).
	CloudFormationEndpoint string
	// External is true when the endpoints came from AWS_ENDPOINT_URL.
	External bool
	// Env is what the template was resolved against.
	Env template.Env
	// Template is the resolved template.
	Template *cloudformation.Template
	// Names maps logical ids to physical names.
	Names map[string]string
	// QueueURLs maps queue logical ids to queue URLs, and the names of
	// the existing queues (Options.Existing) to theirs.
	QueueURLs map[string]string
	// QueueARNs maps queue logical ids (and existing queues' names) to
	// queue ARNs.
	QueueARNs map[string]string
	// KeyARNs maps KMS key logical ids to the keys' ARNs.
	KeyARNs map[string]string
	// StreamARNs maps table logical ids to the ARN of the table's
	// DynamoDB stream (tables whose template asks for one).
	StreamARNs map[string]string
	// Skipped maps the logical ids of resources the template creates but
	// the emulator cannot hold (a metric-math or composite alarm on kumo)
	// to the reason.
	Skipped map[string]string
	// ConfigFile is an AWS shared config file with the stack's endpoints,
	// for child processes (AWS_CONFIG_FILE and AWS_PROFILE).
	ConfigFile string

	closers []func()
	// log is Options.Log.
	log io.Writer
}

// Start starts the emulators (unless AWS_ENDPOINT_URL says otherwise) and
// creates the template's queues, tables, buckets, keys and alarms.
func Start(ctx context.Context, o Options) (st *Stack, err error) {
	s := &Stack{Names: map[string]string{}, QueueURLs: map[string]string{}, QueueARNs: map[string]string{}, StreamARNs: map[string]string{}, KeyARNs: map[string]string{}, Skipped: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if o.StackName == "" {
		o.StackName = RandomName("dlqq")
	}
	if o.Template == "" {
		o.Template = template.Path()
	}
	s.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	s.S3Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	s.External = s.Endpoint != ""
	if o.DataDir != "" {
		if !s.External {
			if err := persistReady(o.DataDir); err != nil {
				return nil, err
			}
			s.closers = append(s.closers, startFlusher())
			advanceStreamSequence() // see streams.go
		}
		o.Dir = o.DataDir
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "dlqq-stack-")
		if err != nil {
			return nil, err
		}
		o.Dir = dir
		s.closers = append(s.closers, func() { os.RemoveAll(dir) })
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s.log = o.Log

	if s.Endpoint == "" {
		if s.Endpoint, err = kumoURL(); err != nil {
			return nil, err
		}
	}
	if s.S3Endpoint == "" && !o.NoS3 {
		if s.External {
			s.S3Endpoint = s.Endpoint
		} else {
			if _, err := buildVersityGW(ctx, o.Progress); err != nil {
				return nil, err
			}
			url, stop, err := StartVersityGW(ctx, filepath.Join(o.Dir, "s3"), o.Log)
			if err != nil {
				return nil, err
			}
			s.closers = append(s.closers, stop)
			s.S3Endpoint = url
		}
	}
	cfn, err := cloudFormation()
	if err != nil {
		return nil, err
	}
	s.CloudFormationEndpoint = cfn.url
	if err := s.loadConfig(ctx, o.Dir); err != nil {
		return nil, err
	}
	s.Clients = awsclients.New(s.AWS, awsclients.Options{Local: true})

	s.Env = template.Env{StackName: o.StackName, Region: s.AWS.Region, Account: Account, Endpoint: s.Endpoint, Params: o.Params}
	var names map[string]string
	s.Template, names, err = template.OpenNamed(o.Template, s.Env)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedKeys(s.Template.GetAllKMSKeyResources()) {
		s.Names[id] = names[id]
	}
	TakeTheSettleMarginAsGiven(s.Template, o.Params)
	if o.SourcesFile != "" {
		s.useSourcesFile(o.SourcesFile)
	}
	s.noIndexBackfill = o.NoIndexBackfill
	if err := s.createExisting(ctx, o.Existing); err != nil {
		return nil, err
	}
	if err := s.createResources(ctx, !o.NoS3); err != nil {
		return nil, err
	}
	if err := s.attachExisting(ctx, o.Existing); err != nil {
		return nil, err
	}
	s.registerOutputs(cfn)
	return s, nil
}

// loadConfig writes a shared config profile with the stack's endpoints and
// loads the SDK config from it, so clients get their endpoints from the SDK's
// own configuration, as in production.
func (s *Stack) loadConfig(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[profile %s]\nregion = %s\nendpoint_url = %s\ndisable_request_compression = true\n", profile, Region, s.Endpoint)
	fmt.Fprintf(&b, "aws_access_key_id = %s\naws_secret_access_key = %s\n", AccessKey, SecretKey)
	fmt.Fprintf(&b, "services = %s\n\n[services %s]\ncloudformation =\n  endpoint_url = %s\n", profile, profile, s.CloudFormationEndpoint)
	if s.S3Endpoint != "" {
		fmt.Fprintf(&b, "s3 =\n  endpoint_url = %s\n", s.S3Endpoint)
	}
	s.ConfigFile = filepath.Join(dir, "aws-config")
	if err := os.WriteFile(s.ConfigFile, []byte(b.String()), 0o600); err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithSharedConfigFiles([]string{s.ConfigFile}),
		config.WithSharedCredentialsFiles([]string{}),
		config.WithSharedConfigProfile(profile),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")),
	)
	if err != nil {
		return fmt.Errorf("load SDK config: %w", err)
	}
	s.AWS = sdkhttp.Use(cfg)
	return nil
}

// Environ returns environment variables that point a child process (a
// function's bootstrap, the AWS CLI) at the stack.
func (s *Stack) Environ() []string {
	env := []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + s.AWS.Region,
		"AWS_DEFAULT_REGION=" + s.AWS.Region,
		"AWS_DISABLE_REQUEST_COMPRESSION=true",
		"AWS_ENDPOINT_URL_CLOUDFORMATION=" + s.CloudFormationEndpoint,
	}
	if s.S3Endpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_S3="+s.S3Endpoint)
	}
	return env
}

// Close stops the stack's versitygw and removes temporary data; the shared
// kumo server stays up for the process's other stacks.
func (s *Stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// RandomName returns prefix plus 8 random hex characters, lower case, valid
// for queues, tables and buckets.
func RandomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

var (
	// dlqSources is the process's DLQ-source front, once kumo started.
	dlqSources atomic.Pointer[dlqSourceFront]
	kumoOnce   sync.Once
	kumoSrv    *httptest.Server
	kumoErr    error
)

// kumoURL returns the process's one kumo server, started on first use. kumo
// keeps its state process-wide whatever the server, and starting servers
// concurrently races inside kumo, so every stack of a process shares one
// (and names its resources uniquely); it lives as long as the process. The
// dev kit's KMS HMAC keys (kmshmac.go) and SQS's DeadLetterQueueSourceArn
// (dlqsource.go) sit in front of kumo's handler.
func kumoURL() (string, error) {
	kumoOnce.Do(func() {
		front, err := newDLQSourceFront(kumoHandler(), kumoDataDirAtStart)
		if err != nil {
			kumoErr = err
			return
		}
		dlqSources.Store(front)
		h, err := newHMACKMS(front, kumoDataDirAtStart)
		if err != nil {
			kumoErr = err
			return
		}
		kumoSrv = httptest.NewServer(h)
	})
	if kumoErr != nil {
		return "", kumoErr
	}
	return kumoSrv.URL, nil
}

var (
	vgwOnce sync.Once
	vgwPath string
	vgwErr  error
)

// VersityGWBinary builds (once per process, cached by the go command across
// runs) and returns the versitygw binary pinned in tools/go.mod.
func VersityGWBinary(ctx context.Context) (string, error) {
	vgwOnce.Do(func() {
		cmd := exec.CommandContext(ctx, "go", "tool", "-n", "versitygw")
		cmd.Dir = filepath.Join(filepath.Dir(template.Path()), "..", "tools")
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			vgwErr = fmt.Errorf("build versitygw through tools/go.mod: %w", err)
			return
		}
		vgwPath = strings.TrimSpace(string(out))
	})
	return vgwPath, vgwErr
}

// StartVersityGW starts versitygw on a free loopback port with the posix
// backend and a versioning directory under dir, and waits until it answers.
func StartVersityGW(ctx context.Context, dir string, log io.Writer) (url string, stop func(), err error) {
	bin, err := VersityGWBinary(ctx)
	if err != nil {
		return "", nil, err
	}
	data, versions := filepath.Join(dir, "data"), filepath.Join(dir, "versions")
	for _, d := range []string{data, versions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--port", addr, "posix", "--versioning-dir", versions, data)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start versitygw: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
			return url, stop, nil
		}
		select {
		case <-done:
			return "", nil, errors.New("versitygw exited before it answered")
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("versitygw did not answer on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TakeTheSettleMarginAsGiven makes a local stack given SettleMarginSeconds
// (the demo, dlqlocal's -settle-margin, tests that settle in seconds)
// settle with that margin. Deployed, redrive never settles with less than
// the ingest lag that the DLQ's visibility timeout and ingest's timeout
// imply (redrive.IngestLag): the template passes both. A local run's
// ingest answers in milliseconds and settles in seconds on purpose, so the
// redrive function of tpl gets neither, and its margin is the one given.
func TakeTheSettleMarginAsGiven(tpl *cloudformation.Template, params map[string]any) {
	if _, ok := params["SettleMarginSeconds"]; !ok {
		return
	}
	fn, err := tpl.GetServerlessFunctionWithName("RedriveFunction")
	if err != nil || fn.Environment == nil {
		return
	}
	delete(fn.Environment.Variables, "INGEST_TIMEOUT_SECONDS")
	delete(fn.Environment.Variables, "DLQ_VISIBILITY_SECONDS")
}
