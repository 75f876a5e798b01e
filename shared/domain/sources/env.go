package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
)

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
	out, err := Parse(sourcesJSON)
	if err != nil {
		return nil, err
	}
	extra, err := parseAs(EnvExtraSources, extraJSON)
	if err != nil {
		return nil, err
	}
	reg, err := r.registered()
	var errs []error
	if err != nil {
		errs = append(errs, err)
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
			errs = append(errs, fmt.Errorf("source %q is defined in both %s and %s", name, EnvSources, EnvExtraSources))
			continue
		}
		if rc, ok := reg[name]; ok {
			if c.ARN != "" && c.ARN != rc.ARN {
				errs = append(errs, fmt.Errorf("%s: source %q has arn %s, but the queue registered by that name is %s", EnvExtraSources, name, c.ARN, rc.ARN))
			}
			c.ARN = rc.ARN
			if c.DLQ == "" {
				c.DLQ = rc.DLQ
			}
			delete(reg, name)
		} else {
			if c.ARN == "" {
				errs = append(errs, fmt.Errorf("%s: source %q has no arn and no registered queue (%s) has its name", EnvExtraSources, name, EnvQueueARNs))
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
			errs = append(errs, fmt.Errorf("source %q: dlq %q is not of its kind (SQS: a FIFO queue's DLQ is FIFO, a standard queue's standard; leave dlq out in %s for the stack's DLQ of its kind)", name, c.DLQ, EnvExtraSources))
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
	cfg, err := Merge(getenv(EnvSources), getenv(EnvExtraSources), RegistryFromEnv(getenv))
	if err != nil {
		return cfg, err
	}
	return ResolveSchemas(cfg, SchemaDir(getenv)), nil
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

// Ungranted checks cfg, read with FromEnv from getenv, against what the
// template grants a function that sends (redrive, operator): the queues of
// SOURCES (the stack's own, granted by the template), the registered
// queues and the attached one. It names every source whose queue is none
// of them, so that a configuration and the role's policy never silently
// disagree: the function refuses to start instead of failing its first
// send with AccessDenied.
func Ungranted(getenv func(string) string, cfg map[string]Config) error {
	granted := map[string]bool{}
	own, _ := Parse(getenv(EnvSources))
	for _, c := range own {
		granted[c.ARN] = true
	}
	r := RegistryFromEnv(getenv)
	for _, arn := range append(r.QueueARNs, r.AttachedSourceARN) {
		granted[arn] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg)) {
		if arn := cfg[name].ARN; !granted[arn] {
			errs = append(errs, fmt.Errorf("source %q: queue %q is not one the role may send to (register it in SourceQueueArns, %s)", name, arn, EnvQueueARNs))
		}
	}
	return errors.Join(errs...)
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
