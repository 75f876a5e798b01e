package sources

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The environment variables every reader of the sources configuration
// takes (FromEnv): the functions at init, the local runner, and dlqctl from
// a deployed function's configuration.
const (
	// EnvSources is the stack's own sources (the template's example
	// queue), in full form.
	EnvSources = "SOURCES"
	// EnvExtraSources is the deployment's further sources' settings (the
	// template's ExtraSources parameter), in the SOURCES format, where an
	// entry may leave out arn (a registered queue's, by its name) and dlq
	// (a registered queue's dlq).
	EnvExtraSources = "EXTRA_SOURCES"
	// EnvQueueARNs is the registered source queues (the template's
	// SourceQueueArns, comma-separated): the queues the redrive role may
	// send to. Each is a source, named by the queue name in its ARN, with
	// the settings EXTRA_SOURCES gives it, else the defaults.
	EnvQueueARNs = "SOURCE_QUEUE_ARNS"
	// EnvDefaultDLQ is the dlq of a registered standard source that names
	// none: the stack's DLQ. A FIFO source's is its FIFO twin (FIFODLQ).
	EnvDefaultDLQ = "SOURCE_DEFAULT_DLQ"
	// EnvAttachedSourceARN and EnvAttachedDLQARN are the template's
	// ExtraSourceQueueArn and ExtraDLQArn: a registered source queue
	// whose dlq is, unless EXTRA_SOURCES says otherwise, the queue the
	// second names.
	EnvAttachedSourceARN = "ATTACHED_SOURCE_ARN"
	EnvAttachedDLQARN    = "ATTACHED_DLQ_ARN"
	// EnvSourcesFile is a JSON file shipped with the deployment (the
	// repository's config/sources.json, copied into every function's
	// package), in the EXTRA_SOURCES format: the settings of registered
	// queues and the full entries (with arn) of any others. A relative
	// path is read from the package root (LAMBDA_TASK_ROOT) only, and not
	// at all outside Lambda (SourcesFilePath). Unlike the variables it has
	// no 4 KB bound: any number of sources. Read and absent or
	// unreadable: the init fails.
	EnvSourcesFile = "SOURCES_FILE"
	// EnvSourceTagAccount, EnvSourceTagRegion and EnvSourceTagValue, when
	// set (the template's TaggedSourceAccess=Enabled), grant the redrive
	// role the queues of that account and Region that carry the tag
	// SourceTagKey with that value (the stack's name), and their KMS keys
	// tagged alike: TagGrantFromEnv.
	EnvSourceTagAccount = "SOURCE_TAG_ACCOUNT"
	EnvSourceTagRegion  = "SOURCE_TAG_REGION"
	EnvSourceTagValue   = "SOURCE_TAG_VALUE"
)

// SourceTagKey is the tag whose value (the stack's name) grants a queue,
// and its KMS key, to the redrive role of a stack with
// TaggedSourceAccess=Enabled.
const SourceTagKey = "dlq-quarantine:source"

// Registry is what completes EXTRA_SOURCES: the registered source queues
// and their default dlq.
type Registry struct {
	// QueueARNs are the registered source queues (SOURCE_QUEUE_ARNS).
	QueueARNs []string
	// DLQ is the dlq of a registered standard queue that names none, and
	// FIFODLQ(DLQ) a FIFO queue's (defaultDLQ).
	DLQ string
	// AttachedSourceARN, when set, is one more registered queue, whose
	// dlq is the queue AttachedDLQARN names.
	AttachedSourceARN, AttachedDLQARN string
}

// FIFODLQ is the name of the stack's FIFO DLQ, given its standard DLQ's
// name: the template names them <stack>-dlq and <stack>-dlq.fifo, so that
// the one variable SOURCE_DEFAULT_DLQ (every byte of a function's 4 KB
// environment counts) says both. "" for "".
func FIFODLQ(dlq string) string {
	if dlq == "" {
		return ""
	}
	return dlq + ".fifo"
}

// defaultDLQ is the dlq of a source named name that names none: SQS moves
// a FIFO queue's messages only into a FIFO DLQ, a standard queue's only
// into a standard one.
func (r Registry) defaultDLQ(name string) string {
	if strings.HasSuffix(name, ".fifo") {
		return FIFODLQ(r.DLQ)
	}
	return r.DLQ
}

// registered returns the registry's queues by name: ARN and default dlq.
func (r Registry) registered() (map[string]Config, error) {
	out := map[string]Config{}
	var errs []error
	add := func(variable, arn, dlq string) {
		name := QueueName(arn)
		switch {
		case name == "":
			errs = append(errs, fmt.Errorf("%s: %q is not an SQS queue ARN", variable, arn))
		case out[name].ARN != "":
			errs = append(errs, fmt.Errorf("%s: queues %s and %s have the same name: a source is named by its queue's name", variable, out[name].ARN, arn))
		default:
			out[name] = Config{ARN: arn, DLQ: dlq}
		}
	}
	for _, arn := range r.QueueARNs {
		if arn = strings.TrimSpace(arn); arn != "" {
			add(EnvQueueARNs, arn, r.defaultDLQ(QueueName(arn)))
		}
	}
	if r.AttachedSourceARN != "" {
		dlq := QueueName(r.AttachedDLQARN)
		if dlq == "" {
			errs = append(errs, fmt.Errorf("%s=%q is not an SQS queue ARN (the attached source's dlq)", EnvAttachedDLQARN, r.AttachedDLQARN))
		}
		add(EnvAttachedSourceARN, r.AttachedSourceARN, dlq)
	}
	return out, errors.Join(errs...)
}

// Merge decodes sourcesJSON (full entries) and extraJSON (settings, whose
// entries may leave out arn and dlq) into one configuration with the
// registered queues of r: each registered queue is a source with the
// settings extraJSON gives its name, else the defaults; an extraJSON entry
// of a name nobody registered needs its arn. A name defined twice (in
// sourcesJSON and extraJSON or the registry, or two registered queues of
// one name) is refused, as is an arn that differs from the registered one.
// The result is not validated: callers Validate it.
func Merge(sourcesJSON, extraJSON string, r Registry) (map[string]Config, error) {
	return MergeFile(sourcesJSON, extraJSON, "", r)
}

// MergeFile is Merge with the sources file's JSON (SOURCES_FILE) beside
// extraJSON: its entries are read as EXTRA_SOURCES entries are, and a name
// in both is refused.
func MergeFile(sourcesJSON, extraJSON, fileJSON string, r Registry) (map[string]Config, error) {
	out, err := Parse(sourcesJSON)
	if err != nil {
		return nil, err
	}
	extra, err := parseAs(EnvExtraSources, extraJSON)
	if err != nil {
		return nil, err
	}
	file, err := parseAs(EnvSourcesFile, fileJSON)
	if err != nil {
		return nil, err
	}
	reg, err := r.registered()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	// Where each extra entry comes from, for the errors.
	from := map[string]string{}
	for name := range extra {
		from[name] = EnvExtraSources
	}
	for _, name := range slices.Sorted(maps.Keys(file)) {
		if _, dup := extra[name]; dup {
			errs = append(errs, fmt.Errorf("source %q is defined in both %s and %s", name, EnvExtraSources, EnvSourcesFile))
			continue
		}
		extra[name], from[name] = file[name], EnvSourcesFile
	}
	for _, name := range slices.Sorted(maps.Keys(reg)) {
		if _, dup := out[name]; dup {
			errs = append(errs, fmt.Errorf("source %q is defined in %s and registered again (%s)", name, EnvSources, reg[name].ARN))
			delete(reg, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		c := extra[name]
		if _, dup := out[name]; dup {
			errs = append(errs, fmt.Errorf("source %q is defined in both %s and %s", name, EnvSources, from[name]))
			continue
		}
		if rc, ok := reg[name]; ok {
			if c.ARN != "" && c.ARN != rc.ARN {
				errs = append(errs, fmt.Errorf("%s: source %q has arn %s, but the queue registered by that name is %s", from[name], name, c.ARN, rc.ARN))
			}
			c.ARN = rc.ARN
			if c.DLQ == "" {
				c.DLQ = rc.DLQ
			}
			delete(reg, name)
		} else {
			if c.ARN == "" {
				errs = append(errs, fmt.Errorf("%s: source %q has no arn and no registered queue (%s) has its name", from[name], name, EnvQueueARNs))
			}
			if c.DLQ == "" {
				c.DLQ = r.defaultDLQ(name)
			}
		}
		out[name] = c
	}
	maps.Copy(out, reg) // the registered queues extra gives no settings
	// SQS: the DLQ of a FIFO queue is a FIFO queue, of a standard queue a
	// standard one. The defaults fit (defaultDLQ); a dlq named in
	// EXTRA_SOURCES may not.
	for _, name := range slices.Sorted(maps.Keys(out)) {
		c := out[name]
		if c.DLQ != "" && strings.HasSuffix(name, ".fifo") != strings.HasSuffix(c.DLQ, ".fifo") {
			errs = append(errs, fmt.Errorf("source %q: dlq %q is not of its kind (SQS: a FIFO queue's DLQ is FIFO, a standard queue's standard; leave dlq out in %s for the stack's DLQ of its kind)", name, c.DLQ, cmp.Or(from[name], EnvExtraSources)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// RegistryFromEnv reads the registry's variables with getenv.
func RegistryFromEnv(getenv func(string) string) Registry {
	return Registry{
		QueueARNs:         SplitList(getenv(EnvQueueARNs)),
		DLQ:               strings.TrimSpace(getenv(EnvDefaultDLQ)),
		AttachedSourceARN: strings.TrimSpace(getenv(EnvAttachedSourceARN)),
		AttachedDLQARN:    strings.TrimSpace(getenv(EnvAttachedDLQARN)),
	}
}

// FromEnv reads the sources configuration from the variables getenv looks
// up (os.Getenv in a function's main, a deployed function's configuration
// in dlqctl, the template's in the local runner): SOURCES merged with
// EXTRA_SOURCES and the registered queues (Merge), schema files
// read from SchemaDir (ResolveSchemas). Not validated.
func FromEnv(getenv func(string) string) (map[string]Config, error) {
	file, err := ReadSourcesFile(getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := MergeFile(getenv(EnvSources), getenv(EnvExtraSources), file, RegistryFromEnv(getenv))
	if err != nil {
		return cfg, err
	}
	return ResolveSchemas(cfg, SchemaDir(getenv)), nil
}

// SourcesFilePath is where SOURCES_FILE is read from: an absolute path as
// given; a relative one from the Lambda task root (LAMBDA_TASK_ROOT, where
// the deployment package is unpacked: always set in Lambda, also by SAM's
// local invoke and LocalStack). "" when unset, and when relative outside
// Lambda: dlqctl, the local stack and the tests never take a sources file
// from the directory they run in (a deployment's file in a checkout would
// change what they check); the local stack gives an absolute one
// (embedded.Options.SourcesFile). Not SCHEMA_DIR: the file is the
// package's, wherever its schemas are read from.
func SourcesFilePath(getenv func(string) string) string {
	p := strings.TrimSpace(getenv(EnvSourcesFile))
	switch root := strings.TrimSpace(getenv("LAMBDA_TASK_ROOT")); {
	case p == "" || filepath.IsAbs(p):
		return p
	case root == "":
		return ""
	default:
		return filepath.Join(root, p)
	}
}

// MaxSourcesFileBytes bounds the sources file: about 40,000 sources of
// full entries, far more than one table's listings and alarms are sized
// for, and a bound on what an init reads.
const MaxSourcesFileBytes = 8 << 20

// ReadSourcesFile returns the JSON of SOURCES_FILE ("" when unset or not
// read here: SourcesFilePath). A file
// that is set and missing, unreadable or larger than MaxSourcesFileBytes
// is an error: a deployment that names a file and ships none would
// otherwise run without its sources.
func ReadSourcesFile(getenv func(string) string) (string, error) {
	if v := strings.TrimSpace(getenv(EnvSourcesFile)); v != "" && !filepath.IsAbs(v) && !filepath.IsLocal(v) {
		return "", fmt.Errorf("%s=%q is not a path inside the package", EnvSourcesFile, v)
	}
	p := SourcesFilePath(getenv)
	if p == "" {
		return "", nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w (the file ships in the deployment package: config/ in the repository)", EnvSourcesFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSourcesFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvSourcesFile, err)
	}
	if len(b) > MaxSourcesFileBytes {
		return "", fmt.Errorf("%s: %s is larger than %d bytes", EnvSourcesFile, p, MaxSourcesFileBytes)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", fmt.Errorf("%s: %s is empty (write {} for no sources)", EnvSourcesFile, p)
	}
	return string(b), nil
}

// RequiredFromEnv is FromEnv for a function that needs at least one source
// (redrive, metrics), validated, reporting every problem at once.
func RequiredFromEnv(getenv func(string) string) (map[string]Config, error) {
	srcs, err := FromEnv(getenv)
	if err != nil {
		return srcs, err
	}
	if len(srcs) == 0 {
		return srcs, fmt.Errorf("%s, %s and %s name no source queue", EnvSources, EnvExtraSources, EnvQueueARNs)
	}
	return srcs, Validate(srcs)
}

// FromVariables is FromEnv over a map of variables (a function's
// configuration).
func FromVariables(vars map[string]string) (map[string]Config, error) {
	return FromEnv(func(k string) string { return vars[k] })
}

// TagGrant is what TaggedSourceAccess=Enabled grants the redrive role
// besides the ARN lists: every queue of Account in Region that carries the
// tag SourceTagKey with the value Value (the stack's name), and the KMS
// keys tagged alike, through SQS. (A source can only dead-letter into a
// DLQ of its own account and Region, so nothing outside them is a source
// of the stack's DLQs; and a stack of the same name in another Region
// never shares the grant.)
type TagGrant struct{ Account, Region, Value string }

// TagGrantFromEnv reads SOURCE_TAG_ACCOUNT, SOURCE_TAG_REGION and
// SOURCE_TAG_VALUE: ok is false when none is set; some without the
// others, or an account that is not 12 digits, is an error.
func TagGrantFromEnv(getenv func(string) string) (g TagGrant, ok bool, err error) {
	g = TagGrant{Account: strings.TrimSpace(getenv(EnvSourceTagAccount)), Region: strings.TrimSpace(getenv(EnvSourceTagRegion)), Value: strings.TrimSpace(getenv(EnvSourceTagValue))}
	switch {
	case g.Account == "" && g.Region == "" && g.Value == "":
		return g, false, nil
	case g.Account == "" || g.Region == "" || g.Value == "":
		return g, false, fmt.Errorf("%s, %s and %s are set together (TaggedSourceAccess), or none", EnvSourceTagAccount, EnvSourceTagRegion, EnvSourceTagValue)
	case len(g.Account) != 12 || strings.Trim(g.Account, "0123456789") != "":
		return g, false, fmt.Errorf("%s=%q is not an AWS account id", EnvSourceTagAccount, g.Account)
	}
	return g, true, nil
}

// Covers reports whether the tag grant can cover the queue arn: a queue
// of its account and Region, once it carries the tag.
func (g TagGrant) Covers(arn string) bool {
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[3] == g.Region && parts[4] == g.Account
}

// Grants checks cfg, read with FromEnv from getenv, against what the
// template grants a function that sends (redrive, operator): the queues
// of SOURCES (the stack's own), the registered queues (SOURCE_QUEUE_ARNS),
// the attached one, and, with TaggedSourceAccess, the queues of the
// stack's account that carry its tag (TagGrant). It returns the sources
// whose grant rests on the tag alone (the run reads the tag before it
// claims: Config.TaggedSources), and names every source no grant can
// cover, so that a configuration and the role's policy never silently
// disagree: the function refuses to start instead of failing its first
// send with AccessDenied.
func Grants(getenv func(string) string, cfg map[string]Config) (tagged map[string]bool, err error) {
	granted := map[string]bool{}
	own, _ := Parse(getenv(EnvSources))
	for _, c := range own {
		granted[c.ARN] = true
	}
	r := RegistryFromEnv(getenv)
	for _, arn := range append(r.QueueARNs, r.AttachedSourceARN) {
		granted[arn] = true
	}
	tag, byTag, err := TagGrantFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var errs []error
	tagged = map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(cfg)) {
		arn := cfg[name].ARN
		switch {
		case granted[arn]:
		case byTag && tag.Covers(arn):
			tagged[name] = true
		case byTag:
			errs = append(errs, fmt.Errorf("source %q: queue %q is not one the role may send to (the tag grant covers queues of account %s in %s only: register it in SourceQueueArns, %s)", name, arn, tag.Account, tag.Region, EnvQueueARNs))
		default:
			errs = append(errs, fmt.Errorf("source %q: queue %q is not one the role may send to (register it in SourceQueueArns, %s, or tag it %s=<stack> with TaggedSourceAccess=Enabled)", name, arn, EnvQueueARNs, SourceTagKey))
		}
	}
	return tagged, errors.Join(errs...)
}

// Ungranted is Grants' error alone.
func Ungranted(getenv func(string) string, cfg map[string]Config) error {
	_, err := Grants(getenv, cfg)
	return err
}

// SplitList splits a comma-separated list, dropping empty elements (an
// empty CloudFormation CommaDelimitedList joins to "").
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// QueueName returns the queue name an SQS queue ARN ends with
// (arn:<partition>:sqs:<region>:<account>:<name>), or "" when arn is not
// one.
func QueueName(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return ""
	}
	return parts[5]
}

// parseAs is Parse with the variable's name in its errors.
func parseAs(variable, raw string) (map[string]Config, error) {
	out := map[string]Config{}
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	if err := duplicateName(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the JSON object", variable)
	}
	return out, nil
}
