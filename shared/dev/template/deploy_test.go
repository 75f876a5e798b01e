package template_test

// Issue 26: the template deploys at every documented setting. No
// emulator runs CloudFormation, IAM's size limits or Lambda's checks, so
// the template is rendered here at every partition's longest region, at
// the shortest and the longest stack name the docs allow, with every
// parameter at its default, at each of its bounds and every Condition's
// branch, and each rendering is held against the limits AWS documents for
// what it creates (deployLimits). A parameter without bounds, a rule the
// defaults fail or a setting a function refuses at init fails here.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// longestStack has the 56 characters the docs allow a stack name (the
// function names <stack>-<function> must fit Lambda's 64), with capitals.
const longestStack = "Prod-EU-West-Quarantine-For-Controlled-Substances-Movesx"

// legacyStack is the longest name a stack deployed with the old fixed
// bucket names can have had: <stack>-payloads-<account> fits S3's 63.
const legacyStack = "dlq-quarantine-prod-eu-west-controlled-s"

// partitionEnvs are the partitions the template deploys in, each at its
// longest region name (the ARNs in the policies grow with it), and aws
// once more in a Region of that length where Lambda offers no function
// URLs (OperatorEndpoint auto chooses the HTTP API there, as it does in
// aws-us-gov and aws-cn).
var partitionEnvs = []template.Env{
	{Partition: "aws", Region: "ap-southeast-2"},
	{Partition: "aws-us-gov", Region: "us-gov-west-1"},
	{Partition: "aws-cn", Region: "cn-northwest-1"},
	{Partition: "aws", Region: "ap-southeast-4"},
}

// noFunctionURLRegions are the Regions of the aws partition where Lambda
// offers no function URLs (Lambda developer guide, "Creating and
// managing Lambda function URLs"); the other partitions offer none
// ("AWS Lambda in AWS GovCloud (US)"; "Amazon Lambda", Getting Started
// with Amazon Web Services in China).
var noFunctionURLRegions = []string{"ap-south-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "ap-east-2",
	"ca-west-1", "eu-south-2", "eu-central-2", "il-central-1", "me-central-1"}

// functionURLsOffered reports whether Lambda offers function URLs in the
// environment's Region.
func functionURLsOffered(e template.Env) bool {
	return (e.Partition == "" || e.Partition == "aws") && !slices.Contains(noFunctionURLRegions, e.Region)
}

// deployEnv is the environment of one rendering: CloudFormation's own
// shapes of generated names (role/<stack>-<id>-<suffix>, key/<uuid>).
func deployEnv(p template.Env, stack string, params map[string]any) template.Env {
	return template.Env{StackName: stack, Region: p.Region, Partition: p.Partition, Account: "123456789012",
		Endpoint: "https://sqs." + p.Region + "." + p.URLSuffix(), Params: params, CloudFormationNames: true}
}

// parameterDecl is a parameter as the template declares it.
type parameterDecl struct {
	Type           string   `yaml:"Type"`
	Default        any      `yaml:"Default"`
	MinValue       *float64 `yaml:"MinValue"`
	MaxValue       *float64 `yaml:"MaxValue"`
	MaxLength      *int     `yaml:"MaxLength"`
	AllowedValues  []any    `yaml:"AllowedValues"`
	AllowedPattern string   `yaml:"AllowedPattern"`
	hasDefault     bool
}

// ruleDecl is one of the template's Rules.
type ruleDecl struct {
	RuleCondition any `yaml:"RuleCondition"`
	Assertions    []struct {
		Assert            any    `yaml:"Assert"`
		AssertDescription string `yaml:"AssertDescription"`
	} `yaml:"Assertions"`
}

type templateDecl struct {
	Parameters map[string]*parameterDecl `yaml:"Parameters"`
	Rules      map[string]ruleDecl       `yaml:"Rules"`
	Resources  map[string]any            `yaml:"Resources"`
	Outputs    map[string]any            `yaml:"Outputs"`
}

// longTemplate is infra/template.yaml as JSON in the long form, unresolved
// (Fn::Or, Ref as maps), as CloudFormation reads the short tags (!Or,
// !Ref): for what goformation does not model (Rules, declarations).
func longTemplate(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(template.Path())
	if err != nil {
		t.Fatal(err)
	}
	long, err := intrinsics.ProcessYAML(raw, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	return long
}

func readDecl(t *testing.T) templateDecl {
	t.Helper()
	long := longTemplate(t)
	var d templateDecl
	if err := json.Unmarshal(long, &d); err != nil {
		t.Fatal(err)
	}
	// Whether a Default is there at all (an empty one is a default).
	var loose struct {
		Parameters map[string]map[string]any
	}
	if err := json.Unmarshal(long, &loose); err != nil {
		t.Fatal(err)
	}
	for name, p := range d.Parameters {
		_, p.hasDefault = loose.Parameters[name]["Default"]
	}
	return d
}

// requiredSamples are values for the parameters every deploy must give:
// those without a default, and the alarm destination the rule
// AlarmDestinationIsRequired asks for.
var requiredSamples = map[string]any{"NamingMode": "generated", "LegacyStatusIndex": "drop", "AlarmEmail": "oncall@example.com"}

// baseParams are the parameters a deploy gives at the least.
func baseParams(d templateDecl) map[string]any {
	out := map[string]any{}
	for name, p := range d.Parameters {
		if !p.hasDefault {
			out[name] = requiredSamples[name]
		}
	}
	out["AlarmEmail"] = requiredSamples["AlarmEmail"]
	return out
}

// setting is one documented way to deploy.
type setting struct {
	name   string
	stack  string
	params map[string]any
}

// settings are the template's documented settings in partition p: the
// defaults, each Number at each bound, all of them at their minimum and
// at their maximum, each allowed value of each choice, each optional ARN
// given (at its longest), with stack names at both ends of the rule.
func settings(t *testing.T, d templateDecl, p template.Env) []setting {
	t.Helper()
	arn := func(service, region, rest string) string {
		return fmt.Sprintf("arn:%s:%s:%s:123456789012:%s", p.Partition, service, region, rest)
	}
	// The optional ARNs at the longest their patterns allow.
	long := map[string]any{
		"ExtraDLQArn":              arn("sqs", p.Region, strings.Repeat("d", 75)+".fifo"),
		"ExtraSourceQueueArn":      arn("sqs", p.Region, strings.Repeat("s", 75)+".fifo"),
		"ExtraDLQKmsKeyArn":        arn("kms", p.Region, "key/mrk-0123456789abcdef0123456789abcdef"),
		"BreakGlassRoleArn":        fmt.Sprintf("arn:%s:iam::123456789012:role/%s/%s", p.Partition, strings.Repeat("p", 200), strings.Repeat("r", 64)),
		"ExternalAlarmTopicArn":    arn("sns", p.Region, strings.Repeat("t", 256)),
		"ExternalAlarmTopicKeyArn": arn("kms", p.Region, "key/mrk-0123456789abcdef0123456789abcdef"),
		// Two registered sources at the longest queue names and two keys
		// (how many sources fit in all: TestExtraSourcesFit).
		"SourceQueueArns":  arn("sqs", p.Region, strings.Repeat("q", 80)) + "," + arn("sqs", p.Region, strings.Repeat("r", 75)+".fifo"),
		"SourceKmsKeyArns": arn("kms", p.Region, "key/mrk-0123456789abcdef0123456789abcdef") + "," + arn("kms", p.Region, "key/1234abcd-12ab-34cd-56ef-1234567890ab"),
		// Their DLQs: the stack's of their kind (a dlq of their own must be
		// one ingest takes batches from: TestExtraSourcesFit), and settings
		// of their own.
		"ExtraSources": `{"` + strings.Repeat("q", 80) + `":{"redrive_cap":1000,"schema":"inventory-movement.v1"},"` + strings.Repeat("r", 75) + `.fifo":{"redrive_cap":1000,"schema":"inventory-movement.v1"}}`,
	}
	// The free-form strings at the longest their patterns allow, with every
	// kind of character they allow (both go into the functions'
	// environment, the pointer into the SOURCES JSON).
	longStrings := map[string]any{
		"IdempotencyAttribute": "Idem_key-" + strings.Repeat("a.b", 82) + "z",
		"IdempotencyPointer":   "/" + strings.Repeat("a~0b~1c/", 63) + strings.Repeat("€", 7), // 512 characters, 1,534 bytes
		// Eight IAM role names with every character the pattern allows, 512
		// characters in all (both redrive functions' environments).
		"TrustedSessionRoles": strings.TrimSuffix(strings.Repeat("AWSReservedSSO_Ops+Admin=1.2@example-"+strings.Repeat("r", 27)+",", 7), ",") +
			",AWSReservedSSO_Ops+Admin=1.2@example-" + strings.Repeat("r", 20),
	}
	for name := range long {
		if _, ok := d.Parameters[name]; !ok {
			t.Fatalf("no parameter %s", name)
		}
	}
	with := func(extra map[string]any) map[string]any {
		out := baseParams(d)
		maps.Copy(out, extra)
		return out
	}
	var out []setting
	add := func(name string, params map[string]any) {
		out = append(out, setting{name, longestStack, params}, setting{name + " (stack name p)", "p", params})
	}
	add("defaults", with(nil))
	add("an external alarm topic instead of an address", func() map[string]any {
		m := with(map[string]any{"ExternalAlarmTopicArn": long["ExternalAlarmTopicArn"]})
		delete(m, "AlarmEmail")
		return m
	}())
	mins, maxs := map[string]any{}, map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(d.Parameters)) {
		decl := d.Parameters[name]
		values := decl.AllowedValues
		if decl.Type == "Number" {
			if len(values) > 2 { // a long list: its ends
				values = []any{slices.MinFunc(values, numCmp), slices.MaxFunc(values, numCmp)}
			}
			if len(values) == 0 && decl.MinValue != nil && decl.MaxValue != nil {
				values = []any{*decl.MinValue, *decl.MaxValue}
			}
		}
		for i, v := range values {
			var value any = fmt.Sprint(v)
			if decl.Type == "Number" {
				n, err := strconv.ParseFloat(fmt.Sprint(v), 64)
				if err != nil {
					t.Fatalf("parameter %s allows %v, not a number", name, v)
				}
				value = n
				if i == 0 {
					mins[name] = n
				} else {
					maxs[name] = n
				}
			}
			if p.Partition != "aws-us-gov" {
				continue // one partition for the settings one parameter at a time
			}
			if name == "OperatorEndpoint" && value == "function-url" && !functionURLsOffered(p) {
				continue // documented for the Regions that offer function URLs (below)
			}
			s := setting{fmt.Sprintf("%s=%v", name, value), longestStack, with(map[string]any{name: value})}
			if name == "NamingMode" && value == "legacy" {
				s.stack = legacyStack // the fixed names are S3-valid only for such a stack
			}
			out = append(out, s)
		}
	}
	// Each operator endpoint wherever it is offered (auto, the default,
	// is in every setting above).
	if functionURLsOffered(p) {
		add("OperatorEndpoint=function-url", with(map[string]any{"OperatorEndpoint": "function-url"}))
	}
	if p.Partition != "aws-us-gov" {
		add("OperatorEndpoint=http-api", with(map[string]any{"OperatorEndpoint": "http-api"}))
	}
	add("every number at its minimum", with(mins))
	add("every number at its maximum", with(maxs))
	add("every free-form string at its longest", with(longStrings))
	all := with(maps.Clone(maxs))
	maps.Copy(all, long)
	maps.Copy(all, longStrings)
	all["LedgerMappingEnabled"], all["RedriveOneRunAtATime"] = "false", "false"
	add("every optional ARN, every number at its maximum, every switch off", all)
	out = append(out, setting{"every optional ARN, legacy names", legacyStack, func() map[string]any {
		m := with(long)
		m["NamingMode"] = "legacy"
		return m
	}()})
	return out
}

// render resolves the template for s in p.
// numCmp orders two AllowedValues of a Number parameter.
func numCmp(a, b any) int {
	x, _ := strconv.ParseFloat(fmt.Sprint(a), 64)
	y, _ := strconv.ParseFloat(fmt.Sprint(b), 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func render(t *testing.T, p template.Env, s setting) (*cloudformation.Template, template.Env) {
	t.Helper()
	e := deployEnv(p, s.stack, s.params)
	tpl, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return tpl, e
}

// Every parameter is bounded: a Number by MinValue and MaxValue, a String
// by AllowedValues or AllowedPattern; and every default meets its own
// constraints. Today's template fails this: IngestMaxConcurrency,
// MaxReceiveCount, the visibility timeouts and ArchiveRetentionDays had no
// maximum, most numbers no bound at all.
func TestEveryParameterIsBounded(t *testing.T) {
	d := readDecl(t)
	for _, name := range slices.Sorted(maps.Keys(d.Parameters)) {
		p := d.Parameters[name]
		switch p.Type {
		case "Number":
			if len(p.AllowedValues) == 0 && (p.MinValue == nil || p.MaxValue == nil) {
				t.Errorf("Number parameter %s has no MinValue and MaxValue: a value the API refuses fails the deploy mid-way", name)
			}
		case "String":
			if len(p.AllowedValues) == 0 && p.AllowedPattern == "" {
				t.Errorf("String parameter %s has neither AllowedValues nor AllowedPattern", name)
			}
		case "CommaDelimitedList":
			if p.AllowedPattern == "" {
				t.Errorf("CommaDelimitedList parameter %s has no AllowedPattern (CloudFormation applies it to each element)", name)
			}
		default:
			t.Errorf("parameter %s has type %s, which this test does not check", name, p.Type)
		}
		if p.hasDefault {
			if err := p.check(p.Default); err != nil {
				t.Errorf("parameter %s: its default %v: %v", name, p.Default, err)
			}
		}
	}
}

// check reports whether v meets the parameter's constraints as
// CloudFormation checks them (AllowedPattern is a Java regular expression
// that must match the whole value; the template's use RE2's subset).
func (p *parameterDecl) check(v any) error {
	if p == nil {
		return errors.New("the template has no such parameter")
	}
	s := fmt.Sprint(v)
	if f, ok := v.(float64); ok {
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	if p.Type == "Number" {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		if p.MinValue != nil && n < *p.MinValue || p.MaxValue != nil && n > *p.MaxValue {
			return fmt.Errorf("%v is outside [%v, %v]", n, deref(p.MinValue), deref(p.MaxValue))
		}
	}
	if len(p.AllowedValues) > 0 && !slices.ContainsFunc(p.AllowedValues, func(a any) bool { return fmt.Sprint(a) == s }) {
		return fmt.Errorf("%q is not one of %v", s, p.AllowedValues)
	}
	elements := []string{s}
	if p.Type == "CommaDelimitedList" { // the pattern applies to each element
		elements = strings.Split(s, ",")
	}
	for _, e := range elements {
		if p.AllowedPattern != "" && !regexp.MustCompile("^(?:"+p.AllowedPattern+")$").MatchString(e) {
			return fmt.Errorf("%q does not match %s", e, p.AllowedPattern)
		}
	}
	if p.MaxLength != nil && utf8.RuneCountInString(s) > *p.MaxLength { // characters, as CloudFormation counts
		return fmt.Errorf("%q is longer than %d", s, *p.MaxLength)
	}
	return nil
}

func deref(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}

// The template deploys at every documented setting: each rendering meets
// every limit of deployLimits, satisfies the template's Rules, and each
// function accepts its environment (its init would fail otherwise).
func TestTheTemplateDeploysAtEveryDocumentedSetting(t *testing.T) {
	d := readDecl(t)
	if n := len(d.Resources); n > 500 {
		t.Errorf("%d resources: CloudFormation allows 500", n)
	}
	if n := len(d.Parameters); n > 200 {
		t.Errorf("%d parameters: CloudFormation allows 200", n)
	}
	if n := len(d.Outputs); n > 200 {
		t.Errorf("%d outputs: CloudFormation allows 200", n)
	}
	if raw, err := os.ReadFile(template.Path()); err != nil || len(raw) > 1<<20 {
		t.Errorf("the template has %d bytes (%v): CloudFormation takes 1 MB from S3", len(raw), err)
	}
	for _, p := range partitionEnvs {
		for _, s := range settings(t, d, p) {
			for name, v := range s.params {
				if err := d.Parameters[name].check(v); err != nil {
					t.Fatalf("%s: the test's own setting is not allowed: %s: %v", s.name, name, err)
				}
			}
			if failed := d.failedRules(s.params); len(failed) > 0 {
				t.Errorf("%s/%s: the template's rules refuse it: %s", p.Partition, s.name, strings.Join(failed, "; "))
			}
			e := deployEnv(p, s.stack, s.params)
			tpl, extra, err := template.OpenWithUnmodeled(template.Path(), e)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			for _, problem := range deployLimits(tpl, e, extra) {
				t.Errorf("%s %s, stack %q: %s", p.Partition, s.name, s.stack, problem)
			}
		}
	}
}

// failedRules evaluates the template's Rules on params (the defaults
// filled in): the AssertDescription of each assertion that fails.
func (d templateDecl) failedRules(params map[string]any) []string {
	value := func(name string) string {
		if v, ok := params[name]; ok {
			return fmt.Sprint(v)
		}
		return fmt.Sprint(d.Parameters[name].Default)
	}
	var eval func(e any) (any, error)
	eval = func(e any) (any, error) {
		m, ok := e.(map[string]any)
		if !ok {
			return e, nil
		}
		for op, arg := range m {
			args, _ := arg.([]any)
			switch op {
			case "Ref":
				return value(fmt.Sprint(arg)), nil
			case "Fn::Equals":
				a, err1 := eval(args[0])
				b, err2 := eval(args[1])
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("%v %v", err1, err2)
				}
				return fmt.Sprint(a) == fmt.Sprint(b), nil
			case "Fn::Not":
				v, err := eval(args[0])
				b, _ := v.(bool)
				return !b, err
			case "Fn::And", "Fn::Or":
				and := op == "Fn::And"
				res := and
				for _, a := range args {
					v, err := eval(a)
					if err != nil {
						return nil, err
					}
					b, _ := v.(bool)
					if and {
						res = res && b
					} else {
						res = res || b
					}
				}
				return res, nil
			case "Fn::Contains":
				list, _ := args[0].([]any)
				v, err := eval(args[1])
				if err != nil {
					return nil, err
				}
				return slices.ContainsFunc(list, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }), nil
			}
			return nil, fmt.Errorf("rule function %s not modeled", op)
		}
		return nil, fmt.Errorf("empty rule expression")
	}
	var failed []string
	for _, name := range slices.Sorted(maps.Keys(d.Rules)) {
		r := d.Rules[name]
		if r.RuleCondition != nil {
			if v, err := eval(r.RuleCondition); err != nil || v != true {
				if err != nil {
					failed = append(failed, name+": "+err.Error())
				}
				continue
			}
		}
		for _, a := range r.Assertions {
			if v, err := eval(a.Assert); err != nil || v != true {
				failed = append(failed, fmt.Sprintf("%s: %s (%v)", name, a.AssertDescription, err))
			}
		}
	}
	return failed
}

// IAM's limits (IAM and AWS STS quotas): a managed policy 6,144
// characters, a role's inline policies together 10,240, a trust policy
// 2,048 (the default), white space not counted.
const (
	managedPolicyLimit = 6144
	inlinePolicyLimit  = 10240
	trustPolicyLimit   = 2048
)

// iamSize is the size IAM counts for a policy document: its JSON
// characters, white space not counted.
func iamSize(doc any) int {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
	n := 0
	for _, r := range b.String() {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

var (
	functionName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	queueName     = regexp.MustCompile(`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`)
	tableNameRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	bucketName    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	ruleName      = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)
	aliasName     = regexp.MustCompile(`^alias/[A-Za-z0-9/_-]{1,250}$`)
	topicName     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
	dashboardName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	exportName    = regexp.MustCompile(`^[A-Za-z0-9:-]{1,255}$`)
	stageName     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	scheduleExpr  = regexp.MustCompile(`^(rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)|cron\([^()]+\))$`)
	// CloudWatch Logs' retention values (PutRetentionPolicy).
	logRetentions = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)

// functionConfigs parse a function's environment as its init does, by the
// suffix of its name (<stack>-<suffix>).
var functionConfigs = map[string]func(getenv func(string) string) error{
	"ingest":  func(g func(string) string) error { _, err := ingest.ConfigFromEnv(g); return err },
	"redrive": func(g func(string) string) error { _, err := redrive.ConfigFromEnv(g); return err },
	// The operator function (<stack>-operate) is built on the redrive
	// function's configuration (functions/operator: wire.Init("operator",
	// redrive.ConfigFromEnv, …)).
	"operate": func(g func(string) string) error { _, err := redrive.ConfigFromEnv(g); return err },
	"sweeper": func(g func(string) string) error { _, err := sweeper.ConfigFromEnv(g); return err },
	"metrics": func(g func(string) string) error { _, err := metrics.ConfigFromEnv(g); return err },
	"ledger":  func(g func(string) string) error { _, err := ledger.StreamConfigFromEnv(g); return err },
	"digest":  func(g func(string) string) error { _, err := ledger.DigestConfigFromEnv(g); return err },
}

// deployLimits are the problems AWS would refuse the rendered template
// with, limit by limit.
func deployLimits(tpl *cloudformation.Template, e template.Env, extra map[string]map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// created reports whether a resource with Condition cond is created
	// (the limits below that depend on it hold for what is created).
	created := func(cond string) bool {
		b, _ := tpl.Conditions[cond].(bool)
		return cond == "" || b
	}
	if raw, err := json.Marshal(tpl.Resources); err != nil || strings.Contains(string(raw), "unresolved:") {
		bad("a reference does not resolve (%v)", err)
	}

	// IAM.
	// A role's inline policies together: its own Policies and every
	// AWS::IAM::Policy attached to it (Roles holds what Ref on the role
	// resolves to: its name).
	inline, roleID := map[string]int{}, map[string]string{}
	for id, r := range tpl.GetAllIAMRoleResources() {
		if n := iamSize(r.AssumeRolePolicyDocument); n > trustPolicyLimit {
			bad("role %s: trust policy of %d characters, IAM allows %d", id, n, trustPolicyLimit)
		}
		roleID[template.CloudFormationName(e.StackName, id, 64)] = id
		for _, p := range r.Policies {
			inline[id] += iamSize(p.PolicyDocument)
		}
	}
	for id, p := range tpl.GetAllIAMPolicyResources() {
		for _, role := range p.Roles {
			rid, ok := roleID[role]
			if !ok {
				bad("policy %s is attached to %q, no role of the template", id, role)
				continue
			}
			inline[rid] += iamSize(p.PolicyDocument)
		}
	}
	for role, n := range inline {
		if n > inlinePolicyLimit {
			bad("role %s: inline policies of %d characters together, IAM allows %d", role, n, inlinePolicyLimit)
		}
	}
	for id, p := range tpl.GetAllIAMManagedPolicyResources() {
		if n := iamSize(p.PolicyDocument); n > managedPolicyLimit {
			bad("managed policy %s: %d characters, IAM allows %d", id, n, managedPolicyLimit)
		}
		if n := len(aws.ToString(p.Description)); n > 1000 {
			bad("managed policy %s: description of %d characters, IAM allows 1,000", id, n)
		}
	}

	// Lambda.
	timeouts := map[string]int{}
	for id, f := range tpl.GetAllServerlessFunctionResources() {
		name := aws.ToString(f.FunctionName)
		if !functionName.MatchString(name) {
			bad("function %s: name %q (Lambda: 1 to 64 of A-Z a-z 0-9 - _)", id, name)
		}
		timeout := aws.ToInt(f.Timeout)
		timeouts[id] = timeout
		if timeout < 1 || timeout > 900 {
			bad("function %s: timeout %d, Lambda allows 1 to 900", id, timeout)
		}
		if m := aws.ToInt(f.MemorySize); m < 128 || m > 10240 {
			bad("function %s: memory %d MB, Lambda allows 128 to 10,240", id, m)
		}
		if r := f.ReservedConcurrentExecutions; r != nil && *r != 1 {
			bad("function %s: reserved concurrency %d (only the redrive function reserves, 1)", id, *r)
		}
		vars := map[string]string{}
		if f.Environment != nil {
			vars = f.Environment.Variables
		}
		size := 0
		for k, v := range vars {
			size += len(k) + len(v)
		}
		if size > 4096 {
			bad("function %s: environment of %d bytes, Lambda allows 4 KB", id, size)
		}
		suffix := strings.TrimPrefix(name, e.StackName+"-")
		parse, ok := functionConfigs[suffix]
		if !ok {
			bad("function %s (%s): no configuration check for it in functionConfigs", id, name)
			continue
		}
		getenv := func(k string) string {
			if k == "AWS_LAMBDA_FUNCTION_NAME" {
				return name
			}
			return vars[k]
		}
		if err := parse(getenv); err != nil {
			bad("function %s refuses its environment at init: %v", id, err)
		}
	}

	// Lambda function URLs (CloudFormation reference, AWS::Lambda::Url:
	// AuthType AWS_IAM or NONE, InvokeMode BUFFERED or RESPONSE_STREAM;
	// one URL per function and qualifier, CreateFunctionUrlConfig), only
	// where Lambda offers them (noFunctionURLRegions), and the
	// permissions' function URL properties on the action they belong to
	// (FunctionUrlAuthType on lambda:InvokeFunctionUrl,
	// InvokedViaFunctionUrl on lambda:InvokeFunction only).
	urls := map[string]string{}
	for id, u := range tpl.GetAllLambdaUrlResources() {
		if !created(u.AWSCloudFormationCondition) {
			continue
		}
		if !functionURLsOffered(e) {
			bad("function URL %s in %s (%s): Lambda offers no function URLs there", id, e.Region, e.Partition)
		}
		if u.AuthType != "AWS_IAM" && u.AuthType != "NONE" {
			bad("function URL %s: AuthType %q", id, u.AuthType)
		}
		if m := aws.ToString(u.InvokeMode); m != "" && m != "BUFFERED" && m != "RESPONSE_STREAM" {
			bad("function URL %s: InvokeMode %q", id, m)
		}
		target := u.TargetFunctionArn + ":" + aws.ToString(u.Qualifier)
		if other, ok := urls[target]; ok {
			bad("function URLs %s and %s on the same function and qualifier", id, other)
		}
		urls[target] = id
	}
	for id, p := range tpl.GetAllLambdaPermissionResources() {
		if !created(p.AWSCloudFormationCondition) {
			continue
		}
		if p.FunctionUrlAuthType != nil && p.Action != "lambda:InvokeFunctionUrl" {
			bad("permission %s: FunctionUrlAuthType on %s (it is lambda:InvokeFunctionUrl's)", id, p.Action)
		}
		if v, ok := extra[id]["InvokedViaFunctionUrl"]; ok && (v != true || p.Action != "lambda:InvokeFunction") {
			bad("permission %s: InvokedViaFunctionUrl %v on %s (a Boolean, lambda:InvokeFunction's only)", id, v, p.Action)
		}
	}
	for id, props := range extra {
		for k := range props {
			if r, ok := tpl.Resources[id]; !ok || r.AWSCloudFormationType() != "AWS::Lambda::Permission" || k != "InvokedViaFunctionUrl" {
				bad("%s: property %s is not in goformation's model and this test does not check it", id, k)
			}
		}
	}

	// API Gateway HTTP APIs (HTTP API quotas: 300 routes and 300
	// integrations per API, 10 stages per API, an integration timeout of
	// at most 30 seconds; the CloudFormation reference: ProtocolType HTTP
	// or WEBSOCKET, PayloadFormatVersion 1.0 or 2.0 for an HTTP API's
	// Lambda proxy, TimeoutInMillis 50 to 30,000, AuthorizationType
	// NONE, AWS_IAM, CUSTOM or JWT for an HTTP API's route).
	perAPI := map[string]map[string]int{}
	count := func(api, what string) {
		if perAPI[api] == nil {
			perAPI[api] = map[string]int{}
		}
		perAPI[api][what]++
	}
	for id, a := range tpl.GetAllApiGatewayV2ApiResources() {
		if created(a.AWSCloudFormationCondition) && aws.ToString(a.ProtocolType) != "HTTP" && aws.ToString(a.ProtocolType) != "WEBSOCKET" {
			bad("API %s: ProtocolType %q", id, aws.ToString(a.ProtocolType))
		}
	}
	for id, r := range tpl.GetAllApiGatewayV2RouteResources() {
		if !created(r.AWSCloudFormationCondition) {
			continue
		}
		count(r.ApiId, "routes")
		if !slices.Contains([]string{"NONE", "AWS_IAM", "CUSTOM", "JWT"}, aws.ToString(r.AuthorizationType)) {
			bad("route %s: AuthorizationType %q", id, aws.ToString(r.AuthorizationType))
		}
	}
	for id, in := range tpl.GetAllApiGatewayV2IntegrationResources() {
		if !created(in.AWSCloudFormationCondition) {
			continue
		}
		count(in.ApiId, "integrations")
		if v := aws.ToString(in.PayloadFormatVersion); v != "1.0" && v != "2.0" {
			bad("integration %s: PayloadFormatVersion %q", id, v)
		}
		if ms := in.TimeoutInMillis; ms != nil && (*ms < 50 || *ms > 30000) {
			bad("integration %s: timeout %d ms, an HTTP API allows 50 to 30,000", id, *ms)
		}
	}
	for id, st := range tpl.GetAllApiGatewayV2StageResources() {
		if !created(st.AWSCloudFormationCondition) {
			continue
		}
		count(st.ApiId, "stages")
		if st.StageName != "$default" && !stageName.MatchString(st.StageName) {
			bad("stage %s: name %q", id, st.StageName)
		}
	}
	for api, n := range perAPI {
		if n["routes"] > 300 || n["integrations"] > 300 || n["stages"] > 10 {
			bad("HTTP API %s: %d routes, %d integrations, %d stages (300, 300, 10)", api, n["routes"], n["integrations"], n["stages"])
		}
	}

	// Event source mappings: the SQS trigger's and the stream's limits,
	// and the function timeout within the queue's visibility timeout
	// (Lambda refuses the mapping otherwise).
	queues := tpl.GetAllSQSQueueResources()
	for id, m := range tpl.GetAllLambdaEventSourceMappingResources() {
		fn := strings.TrimPrefix(m.FunctionName, e.StackName+"-")
		var fnID string
		for fid, f := range tpl.GetAllServerlessFunctionResources() {
			if aws.ToString(f.FunctionName) == m.FunctionName || fid == fn {
				fnID = fid
			}
		}
		src := aws.ToString(m.EventSourceArn)
		switch {
		case strings.Contains(src, ":sqs:"):
			if b := aws.ToInt(m.BatchSize); b < 1 || b > 10 && aws.ToInt(m.MaximumBatchingWindowInSeconds) < 1 || b > 10000 {
				bad("mapping %s: SQS batch size %d", id, b)
			}
			if m.ScalingConfig != nil {
				if c := aws.ToInt(m.ScalingConfig.MaximumConcurrency); c < 2 || c > 1000 {
					bad("mapping %s: maximum concurrency %d, Lambda allows 2 to 1,000", id, c)
				}
			}
			for qid, q := range queues {
				if strings.HasSuffix(src, ":"+aws.ToString(q.QueueName)) && aws.ToInt(q.VisibilityTimeout) < timeouts[fnID] {
					bad("mapping %s: function timeout %d s exceeds queue %s's visibility timeout %d s: Lambda refuses the mapping",
						id, timeouts[fnID], qid, aws.ToInt(q.VisibilityTimeout))
				}
			}
		case strings.Contains(src, ":dynamodb:"):
			if b := aws.ToInt(m.BatchSize); b < 1 || b > 10000 {
				bad("mapping %s: stream batch size %d", id, b)
			}
			if p := aws.ToInt(m.ParallelizationFactor); p < 1 || p > 10 {
				bad("mapping %s: parallelization factor %d", id, p)
			}
			if w := aws.ToInt(m.TumblingWindowInSeconds); w < 0 || w > 900 {
				bad("mapping %s: tumbling window %d", id, w)
			}
			if a := aws.ToInt(m.MaximumRecordAgeInSeconds); a != -1 && (a < 60 || a > 604800) {
				bad("mapping %s: maximum record age %d", id, a)
			}
			if r := aws.ToInt(m.MaximumRetryAttempts); r < -1 || r > 10000 {
				bad("mapping %s: maximum retry attempts %d", id, r)
			}
		}
	}
	for id, c := range tpl.GetAllLambdaEventInvokeConfigResources() {
		if a := aws.ToInt(c.MaximumEventAgeInSeconds); a < 60 || a > 21600 {
			bad("invoke config %s: maximum event age %d, Lambda allows 60 to 21,600", id, a)
		}
		if r := aws.ToInt(c.MaximumRetryAttempts); r < 0 || r > 2 {
			bad("invoke config %s: maximum retry attempts %d, Lambda allows 0 to 2", id, r)
		}
	}

	// SQS.
	for id, q := range queues {
		if n := q.QueueName; n != nil && !queueName.MatchString(*n) {
			bad("queue %s: name %q (SQS: 1 to 80 of A-Z a-z 0-9 - _, .fifo)", id, *n)
		}
		if v := aws.ToInt(q.VisibilityTimeout); v < 0 || v > 43200 {
			bad("queue %s: visibility timeout %d, SQS allows 0 to 43,200", id, v)
		}
		if r := q.MessageRetentionPeriod; r != nil && (*r < 60 || *r > 1209600) {
			bad("queue %s: retention %d, SQS allows 60 to 1,209,600", id, *r)
		}
		if rp, ok := q.RedrivePolicy.(map[string]any); ok {
			if n, _ := rp["maxReceiveCount"].(float64); n < 1 || n > 1000 {
				bad("queue %s: maxReceiveCount %v, SQS allows 1 to 1,000", id, rp["maxReceiveCount"])
			}
		}
	}

	// DynamoDB and S3 names (set only with legacy names), Object Lock,
	// lifecycle.
	for id, tb := range tpl.GetAllDynamoDBTableResources() {
		if !tableNameRE.MatchString(aws.ToString(tb.TableName)) {
			bad("table %s: name %q", id, aws.ToString(tb.TableName))
		}
	}
	for id, b := range tpl.GetAllS3BucketResources() {
		if !bucketName.MatchString(aws.ToString(b.BucketName)) {
			bad("bucket %s: name %q, which S3 refuses", id, aws.ToString(b.BucketName))
		}
		if l := b.ObjectLockConfiguration; l != nil && l.Rule != nil && l.Rule.DefaultRetention != nil {
			if days := aws.ToInt(l.Rule.DefaultRetention.Days); days < 1 || days > 36500 {
				bad("bucket %s: Object Lock retention %d days, S3 allows 1 to 36,500", id, days)
			}
		}
		if lc := b.LifecycleConfiguration; lc != nil {
			for _, r := range lc.Rules {
				for _, tr := range r.Transitions {
					if d := aws.ToInt(tr.TransitionInDays); d < 0 {
						bad("bucket %s: rule %s transitions after %d days", id, aws.ToString(r.Id), d)
					}
				}
			}
		}
	}
	for id, p := range tpl.GetAllS3BucketPolicyResources() {
		if raw, _ := json.Marshal(p.PolicyDocument); len(raw) > 20480 {
			bad("bucket policy %s: %d bytes, S3 allows 20 KB", id, len(raw))
		}
	}

	// KMS, SNS, Logs, CloudWatch, EventBridge.
	for id, k := range tpl.GetAllKMSKeyResources() {
		if raw, _ := json.Marshal(k.KeyPolicy); len(raw) > 32768 {
			bad("key %s: policy of %d bytes, KMS allows 32 KB", id, len(raw))
		}
		if n := len(aws.ToString(k.Description)); n > 8192 {
			bad("key %s: description of %d characters", id, n)
		}
	}
	for id, a := range tpl.GetAllKMSAliasResources() {
		if !aliasName.MatchString(a.AliasName) || strings.HasPrefix(a.AliasName, "alias/aws/") {
			bad("alias %s: %q", id, a.AliasName)
		}
	}
	for id, tp := range tpl.GetAllSNSTopicResources() {
		if n := tp.TopicName; n != nil && !topicName.MatchString(*n) {
			bad("topic %s: name %q", id, *n)
		}
	}
	for id, lg := range tpl.GetAllLogsLogGroupResources() {
		if n := len(aws.ToString(lg.LogGroupName)); n < 1 || n > 512 {
			bad("log group %s: name of %d characters", id, n)
		}
		if r := lg.RetentionInDays; r != nil && !slices.Contains(logRetentions, *r) {
			bad("log group %s: retention %d days is not a value CloudWatch Logs takes", id, *r)
		}
	}
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		name := aws.ToString(a.AlarmName)
		if len(name) < 1 || len(name) > 255 {
			bad("alarm %s: name of %d characters, CloudWatch allows 255", id, len(name))
		}
		if n := len(aws.ToString(a.AlarmDescription)); n > 1024 {
			bad("alarm %s: description of %d characters, CloudWatch allows 1,024", id, n)
		}
		if len(a.AlarmActions) > 5 || len(a.OKActions) > 5 || len(a.InsufficientDataActions) > 5 {
			bad("alarm %s: more than 5 actions for one state", id)
		}
		period := aws.ToInt(a.Period)
		if a.Metrics != nil {
			for _, m := range a.Metrics {
				if m.MetricStat != nil {
					period = m.MetricStat.Period
				}
				if m.Period != nil {
					period = *m.Period
				}
			}
		}
		if period != 10 && period != 30 && (period < 60 || period%60 != 0) {
			bad("alarm %s: period %d (10, 30 or a multiple of 60)", id, period)
		}
		if ev := a.EvaluationPeriods; ev < 1 || ev*period > 86400 {
			bad("alarm %s: %d periods of %d s, CloudWatch evaluates at most a day", id, ev, period)
		}
		if dp := a.DatapointsToAlarm; dp != nil && (*dp < 1 || *dp > a.EvaluationPeriods) {
			bad("alarm %s: %d datapoints to alarm of %d periods", id, *dp, a.EvaluationPeriods)
		}
		if len(a.Dimensions) > 30 {
			bad("alarm %s: %d dimensions", id, len(a.Dimensions))
		}
	}
	for id, db := range tpl.GetAllCloudWatchDashboardResources() {
		if !dashboardName.MatchString(aws.ToString(db.DashboardName)) {
			bad("dashboard %s: name %q", id, aws.ToString(db.DashboardName))
		}
		var body any
		if err := json.Unmarshal([]byte(db.DashboardBody), &body); err != nil {
			bad("dashboard %s: body is not JSON: %v", id, err)
		}
	}
	for id, r := range tpl.GetAllEventsRuleResources() {
		if n := r.Name; n != nil && !ruleName.MatchString(*n) {
			bad("rule %s: name %q (EventBridge: 1 to 64 of . - _ A-Z a-z 0-9)", id, *n)
		}
		if r.EventPattern != nil {
			raw, _ := json.Marshal(r.EventPattern)
			if len(raw) > 2048 {
				bad("rule %s: event pattern of %d characters, EventBridge allows 2,048 by default", id, len(raw))
			}
		}
		if s := aws.ToString(r.ScheduleExpression); s != "" && !scheduleExpr.MatchString(s) {
			bad("rule %s: schedule %q", id, s)
		}
		if len(r.Targets) > 5 {
			bad("rule %s: %d targets, EventBridge allows 5", id, len(r.Targets))
		}
		for _, tg := range r.Targets {
			if n := len(aws.ToString(tg.Input)); n > 8192 {
				bad("rule %s: target %s input of %d characters", id, tg.Id, n)
			}
			if rp := tg.RetryPolicy; rp != nil {
				if a := aws.ToInt(rp.MaximumEventAgeInSeconds); a < 60 || a > 86400 {
					bad("rule %s: target %s maximum event age %d", id, tg.Id, a)
				}
				if n := aws.ToInt(rp.MaximumRetryAttempts); n < 0 || n > 185 {
					bad("rule %s: target %s %d retries", id, tg.Id, n)
				}
			}
		}
	}
	for id, o := range tpl.Outputs {
		raw, _ := json.Marshal(o)
		var out struct{ Export struct{ Name string } }
		_ = json.Unmarshal(raw, &out)
		if out.Export.Name != "" && !exportName.MatchString(out.Export.Name) {
			bad("output %s: export name %q", id, out.Export.Name)
		}
	}
	return problems
}

// CloudFormation refuses a template whose resources depend on each other
// in a cycle (through Ref, Fn::GetAtt, Fn::Sub or DependsOn), whatever the
// parameters; the resolver here resolves such a template without a word.
// (Review of issue 26: LedgerDigestSchedule's DependsOn named
// WatchGuardrailPolicy, which named the schedule's ARN.)
func TestTheTemplateHasNoDependencyCycle(t *testing.T) {
	var doc struct{ Resources map[string]map[string]any }
	if err := json.Unmarshal(longTemplate(t), &doc); err != nil {
		t.Fatal(err)
	}
	deps := dependencies(doc.Resources)
	if len(deps["LedgerDigestSchedule"]) == 0 || !slices.Contains(deps["LedgerFunction"], "LedgerRole") {
		t.Fatalf("the dependency reader finds nothing: %v", deps["LedgerFunction"])
	}
	if cycle := findCycle(deps); cycle != nil {
		t.Fatalf("dependency cycle, which CloudFormation refuses: %s", strings.Join(cycle, " → "))
	}
}

// dependencies maps each resource to the resources it references or
// depends on.
func dependencies(resources map[string]map[string]any) map[string][]string {
	subVar := regexp.MustCompile(`\$\{([^}!.]+)(\.[^}]*)?\}`)
	out := map[string][]string{}
	for id, r := range resources {
		seen := map[string]bool{}
		add := func(target string) {
			if _, ok := resources[target]; ok && !seen[target] {
				seen[target] = true
				out[id] = append(out[id], target)
			}
		}
		for _, d := range strs(r["DependsOn"]) {
			add(d)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, sub := range x {
					switch k {
					case "Ref":
						add(fmt.Sprint(sub))
					case "Fn::GetAtt":
						switch g := sub.(type) {
						case []any:
							if len(g) > 0 {
								add(fmt.Sprint(g[0]))
							}
						case string:
							target, _, _ := strings.Cut(g, ".")
							add(target)
						}
					case "Fn::Sub":
						var tmpl string
						vars := map[string]any{}
						switch s := sub.(type) {
						case string:
							tmpl = s
						case []any:
							if len(s) == 2 {
								tmpl, _ = s[0].(string)
								vars, _ = s[1].(map[string]any)
								walk(s[1])
							}
						}
						for _, m := range subVar.FindAllStringSubmatch(tmpl, -1) {
							if _, isVar := vars[m[1]]; !isVar {
								add(m[1])
							}
						}
						continue
					}
					walk(sub)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(r["Properties"])
		walk(r["Condition"])
	}
	return out
}

// findCycle returns one dependency cycle, or nil.
func findCycle(deps map[string][]string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string) []string
	visit = func(id string) []string {
		state[id] = open
		stack = append(stack, id)
		for _, d := range slices.Sorted(slices.Values(deps[id])) {
			switch state[d] {
			case open:
				i := slices.Index(stack, d)
				return append(slices.Clone(stack[i:]), d)
			case unseen:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(deps)) {
		if state[id] == unseen {
			if c := visit(id); c != nil {
				return c
			}
		}
	}
	return nil
}

// A SchemaName the functions cannot compile deploys and then fails every
// function's init: the parameter allows exactly the schemas embedded in the
// binary (review of issue 26: a pattern let inventory-movement.v2 through).
func TestSchemaNameAllowsExactlyTheEmbeddedSchemas(t *testing.T) {
	var allowed []string
	for _, v := range readDecl(t).Parameters["SchemaName"].AllowedValues {
		allowed = append(allowed, fmt.Sprint(v))
	}
	slices.Sort(allowed)
	if embedded := schemas.Embedded(); len(embedded) == 0 || !slices.Equal(allowed, embedded) {
		t.Fatalf("SchemaName allows %v; the binary embeds %v", allowed, embedded)
	}
	for _, name := range allowed {
		if _, _, err := schemas.CompileEmbedded(name); err != nil {
			t.Errorf("SchemaName %s: %v", name, err)
		}
	}
}
