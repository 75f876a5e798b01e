// Package template reads infra/template.yaml with goformation and resolves
// its intrinsic functions against a concrete environment (stack name, region,
// account, parameter values), so the embedded stack, the local runner and
// the tests build exactly what the template declares.
package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"
)

// Env is the environment the template is resolved against.
type Env struct {
	StackName string
	Region    string
	Account   string
	// Endpoint is used to build queue URLs (Ref on a queue).
	Endpoint string
	// Params overrides parameter defaults.
	Params map[string]any
	// Partition is what AWS::Partition resolves to and every ARN starts
	// with ("aws" when empty; "aws-us-gov", "aws-cn", …); AWS::URLSuffix
	// follows it ("amazonaws.com.cn" in aws-cn).
	Partition string
	// CloudFormationNames gives what CloudFormation names (roles, managed
	// policies, unnamed rules, KMS keys) the shape and length a deployed
	// stack's have: <stack>-<logical id>-<13-character suffix> cut to the
	// service's limit, and key/<uuid> for a key's ARN. Off, they keep the
	// short stable forms the IAM checker's tests spell out
	// (role/<stack>-<logical id>, the key's alias). Deploy-limit tests,
	// where every character counts, turn it on.
	CloudFormationNames bool
}

// partition is the environment's partition, "aws" by default.
func (e Env) partition() string {
	if e.Partition == "" {
		return "aws"
	}
	return e.Partition
}

// URLSuffix is what AWS::URLSuffix resolves to in the partition.
func (e Env) URLSuffix() string {
	if strings.HasPrefix(e.partition(), "aws-cn") {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// Path returns the absolute path of infra/template.yaml in this repository.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "infra", "template.yaml")
}

// Open parses the template at path and resolves Ref, Fn::Sub and Fn::GetAtt
// against env. Unresolvable references become the string
// "unresolved:<expression>" so that a test can see them.
func Open(path string, env Env) (*cloudformation.Template, error) {
	t, _, err := OpenNamed(path, env)
	return t, err
}

// OpenNamed is Open that also returns the physical names references
// resolved to, by logical id: a queue's, table's, bucket's, function's or
// alarm's name, and a KMS key's alias (the AliasName of the AWS::KMS::Alias that names it).
func OpenNamed(path string, env Env) (*cloudformation.Template, map[string]string, error) {
	t, r, err := open(path, env)
	if err != nil {
		return nil, nil, err
	}
	return t, maps.Clone(r.names), nil
}

// Unmodeled returns, by resource logical id, the resolved properties of
// the template that goformation's typed resources drop: a property its
// structs do not know (AWS::Lambda::Permission's InvokedViaFunctionUrl in
// goformation v7.14.9) is otherwise lost without a word. Each value is
// the property as CloudFormation would receive it, intrinsic functions
// resolved as Open resolves them.
func Unmodeled(path string, env Env) (map[string]map[string]any, error) {
	_, u, err := OpenWithUnmodeled(path, env)
	return u, err
}

// OpenWithUnmodeled is Open and Unmodeled from one parse.
func OpenWithUnmodeled(path string, env Env) (*cloudformation.Template, map[string]map[string]any, error) {
	t, r, err := open(path, env)
	if err != nil {
		return nil, nil, err
	}
	return t, r.unmodeled, nil
}

func open(path string, env Env) (*cloudformation.Template, *resolver, error) {
	// goformation registers its YAML tags in package state on every parse:
	// parses must not overlap.
	parseMu.Lock()
	defer parseMu.Unlock()
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read template: %w", err)
	}
	long, err := yamlToJSON(raw)
	if err != nil {
		return nil, nil, err
	}
	var probe struct {
		Parameters map[string]struct {
			Type    string
			Default any
		}
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
		Conditions map[string]any
	}
	if err := json.Unmarshal(long, &probe); err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	r := &resolver{env: env, types: map[string]string{}, names: map[string]string{}, params: map[string]any{}, conditions: probe.Conditions}
	for id, res := range probe.Resources {
		r.types[id] = res.Type
	}
	for name, p := range probe.Parameters {
		r.params[name] = p.Default
	}
	for k, v := range env.Params {
		r.params[k] = v
	}
	// Ref on a CommaDelimitedList is a list of strings, as CloudFormation
	// gives it ("" is [""]); a test may give the value as a string or a
	// list.
	for name, p := range probe.Parameters {
		if p.Type == "CommaDelimitedList" {
			r.params[name] = commaList(r.params[name])
		}
	}
	// CloudFormation removes a list element that resolves to AWS::NoValue
	// (an Fn::If whose chosen branch is Ref AWS::NoValue, such as an
	// optional rule target); goformation would keep it as null.
	var doc any
	if err := json.Unmarshal(long, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	pruned, err := json.Marshal(r.pruneNoValue(doc))
	if err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	// goformation refuses a resource with a property its struct does not
	// know (it decodes with DisallowUnknownFields): such properties are
	// taken out before the typed parse and kept, resolved, for Unmodeled.
	if pruned, r.unmodeled, err = r.splitUnmodeled(pruned); err != nil {
		return nil, nil, err
	}
	// Physical names come from the Name properties, resolved in a first pass.
	if err := r.physicalNames(pruned, probe.Resources); err != nil {
		return nil, nil, err
	}
	t, err := parse(pruned, r.options())
	if err != nil {
		return nil, nil, fmt.Errorf("resolve template: %w", err)
	}
	// goformation evaluates a condition made of Fn::Equals, Fn::Not,
	// Fn::And and Fn::Or of those, but leaves one that names another
	// condition ({"Condition": name}) unevaluated: the resolver's own
	// evaluation, which Fn::If uses, fills it in.
	for name, v := range t.Conditions {
		if _, ok := v.(bool); !ok {
			if b, ok := r.condition(name, 0); ok {
				t.Conditions[name] = b
			}
		}
	}
	// A queue, table, bucket or alarm without a name is named by CloudFormation (the
	// stack name, the logical id and a suffix); here it gets the name the
	// references above resolved to, so the embedded stack creates it so.
	for id, tb := range t.GetAllDynamoDBTableResources() {
		if tb.TableName == nil {
			tb.TableName = &[]string{r.names[id]}[0]
		}
	}
	for id, q := range t.GetAllSQSQueueResources() {
		if q.QueueName == nil {
			q.QueueName = &[]string{r.names[id]}[0]
		}
	}
	for id, b := range t.GetAllS3BucketResources() {
		if b.BucketName == nil {
			b.BucketName = &[]string{r.names[id]}[0]
		}
	}
	for id, a := range t.GetAllCloudWatchAlarmResources() {
		if a.AlarmName == nil {
			a.AlarmName = &[]string{r.names[id]}[0]
		}
	}
	for id, a := range t.GetAllCloudWatchCompositeAlarmResources() {
		if a.AlarmName == nil {
			a.AlarmName = &[]string{r.names[id]}[0]
		}
	}
	return t, r, nil
}

var parseMu sync.Mutex

// converted holds yamlToJSON's results by the SHA-256 of the YAML (under
// parseMu): a test run opens the same template hundreds of times.
var converted = map[[sha256.Size]byte][]byte{}

// yamlToJSON is the template's JSON form, intrinsic functions in their
// long form and not yet processed. The caller must not change it.
func yamlToJSON(raw []byte) ([]byte, error) {
	sum := sha256.Sum256(raw)
	if long, ok := converted[sum]; ok {
		return long, nil
	}
	long, err := intrinsics.ProcessYAML(raw, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	converted[sum] = long
	return long, nil
}

// nameProperty is, by resource type, the property that names a resource,
// and the longest name CloudFormation generates for one without it (0: no
// generated name of that shape).
var nameProperty = map[string]struct {
	prop string
	max  int
}{
	"AWS::SQS::Queue":                 {"QueueName", 80},
	"AWS::DynamoDB::Table":            {"TableName", 255},
	"AWS::S3::Bucket":                 {"BucketName", 63},
	"AWS::Logs::LogGroup":             {"LogGroupName", 0},
	"AWS::Serverless::Function":       {"FunctionName", 0},
	"AWS::CloudWatch::Alarm":          {"AlarmName", 255},
	"AWS::CloudWatch::CompositeAlarm": {"AlarmName", 255},
	"AWS::Events::Rule":               {"Name", 0},
}

// physicalNames fills r.names from the resolved Name properties of the
// pruned template (a first pass: references to names resolve in the
// second), without a typed parse. A log group without a name is its
// function's (/aws/lambda/<id>), a function without one <stack>-<id>, a
// key its alias's name, and a rule without a name has none here.
func (r *resolver) physicalNames(pruned []byte, raw map[string]struct {
	Type       string
	Properties map[string]any
}) error {
	resolved, err := intrinsics.ProcessJSON(pruned, r.options())
	if err != nil {
		return fmt.Errorf("resolve template: %w", err)
	}
	var first struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(resolved, &first); err != nil {
		return fmt.Errorf("resolve template: %w", err)
	}
	name := func(props map[string]any, prop string) *string {
		if s, ok := props[prop].(string); ok {
			return &s
		}
		return nil
	}
	env := r.env
	for id, res := range first.Resources {
		np, ok := nameProperty[res.Type]
		if !ok {
			continue
		}
		given := name(res.Properties, np.prop)
		switch res.Type {
		case "AWS::Logs::LogGroup":
			r.names[id] = deref(given, "/aws/lambda/"+id)
		case "AWS::Serverless::Function":
			r.names[id] = deref(given, env.StackName+"-"+id)
		case "AWS::Events::Rule":
			if given != nil { // a named rule's ARN ends with its name
				r.names[id] = *given
			}
		default:
			r.names[id] = deref(given, GeneratedName(env.StackName, id, np.max))
		}
	}
	aliasOf := keyAliases(raw)
	for id, res := range first.Resources {
		if res.Type != "AWS::KMS::Key" {
			continue
		}
		r.names[id] = KeyAlias(env.StackName, id)
		if a, ok := first.Resources[aliasOf[id]]; ok && a.Type == "AWS::KMS::Alias" {
			if n := name(a.Properties, "AliasName"); n != nil && *n != "" && !strings.HasPrefix(*n, "unresolved:") {
				r.names[id] = *n
			}
		}
	}
	return nil
}

// splitUnmodeled returns the template without the properties
// goformation's struct for their resource type does not declare, and
// those properties by logical id, resolved as the rest of the template.
// A resource type goformation does not know is left as it is.
func (r *resolver) splitUnmodeled(pruned []byte) ([]byte, map[string]map[string]any, error) {
	var doc map[string]any
	if err := json.Unmarshal(pruned, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	resources, _ := doc["Resources"].(map[string]any)
	known := resourceTypes()
	taken := map[string]any{}
	for id, v := range resources {
		res, _ := v.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		typ, _ := res["Type"].(string)
		model, ok := known[typ]
		if !ok || props == nil {
			continue
		}
		fields := jsonFields(model)
		for k, p := range props {
			if !fields[k] {
				if taken[id] == nil {
					taken[id] = map[string]any{}
				}
				taken[id].(map[string]any)[k] = p
				delete(props, k)
			}
		}
	}
	out := map[string]map[string]any{}
	if len(taken) > 0 {
		raw, err := json.Marshal(map[string]any{"Parameters": doc["Parameters"], "Conditions": doc["Conditions"], "Resources": map[string]any{}, "Unmodeled": taken})
		if err != nil {
			return nil, nil, fmt.Errorf("parse template: %w", err)
		}
		resolved, err := intrinsics.ProcessJSON(raw, r.options())
		if err != nil {
			return nil, nil, fmt.Errorf("resolve template: %w", err)
		}
		var got struct{ Unmodeled map[string]map[string]any }
		if err := json.Unmarshal(resolved, &got); err != nil {
			return nil, nil, fmt.Errorf("resolve template: %w", err)
		}
		out = got.Unmodeled
	}
	stripped, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	return stripped, out, nil
}

// jsonFields are the JSON names of a goformation resource's properties
// (t is its struct).
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// GeneratedName is the name a resource without one gets, shaped as
// CloudFormation generates it: the stack name and the logical id,
// lowercased and shortened to fit max with a suffix unique to the pair
// (CloudFormation's suffix is random; this one is stable, so a test can
// tell a generated name from a declared one).
func GeneratedName(stack, logicalID string, max int) string {
	sum := sha256.Sum256([]byte(stack + "\x00" + logicalID))
	suffix := "-" + hex.EncodeToString(sum[:])[:12]
	base := strings.ToLower(stack + "-" + logicalID)
	if len(base) > max-len(suffix) {
		base = strings.TrimRight(base[:max-len(suffix)], "-")
	}
	return base + suffix
}

// StreamLabel is the label of the stream ARN Fn::GetAtt Table.StreamArn
// resolves to. DynamoDB gives a stream its creation time as label, which
// only the running table knows: the embedded stack replaces the resolved
// ARN with its table's real one (embedded.Stack.StreamARNs).
const StreamLabel = "1970-01-01T00:00:00.000"

// StreamARN is what Fn::GetAtt StreamArn on the named table resolves to.
func StreamARN(region, account, table string) string {
	return streamARN("aws", region, account, table)
}

func streamARN(partition, region, account, table string) string {
	return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s/stream/%s", partition, region, account, table, StreamLabel)
}

// CloudFormationName is the name CloudFormation generates for a resource
// of the stack without one: the stack name and the logical id, cut so that
// with a 13-character suffix the whole fits max (CloudFormation's suffix
// is random; this one is stable).
func CloudFormationName(stack, logicalID string, max int) string {
	sum := sha256.Sum256([]byte(stack + "\x00" + logicalID))
	suffix := "-" + strings.ToUpper(hex.EncodeToString(sum[:]))[:13]
	base := stack + "-" + logicalID
	if len(base) > max-len(suffix) {
		base = base[:max-len(suffix)]
	}
	return base + suffix
}

// ServiceID is a stable identifier of the shape a service gives a
// resource it names itself (n lowercase letters and digits: an HTTP API's
// id has 10, a route's or an integration's 7, a function URL's id 32).
func ServiceID(stack, logicalID string, n int) string {
	sum := sha256.Sum256([]byte("id\x00" + stack + "\x00" + logicalID))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, n)
	for i := range out {
		out[i] = alphabet[int(sum[i%len(sum)]+byte(i/len(sum)))%len(alphabet)]
	}
	return string(out)
}

// keyUUID is a stable key id of the shape KMS gives a key.
func keyUUID(stack, logicalID string) string {
	sum := sha256.Sum256([]byte("key\x00" + stack + "\x00" + logicalID))
	h := hex.EncodeToString(sum[:])
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// keyAliases maps a KMS key's logical id to the logical id of the
// AWS::KMS::Alias that names it (TargetKeyId !Ref Key or !GetAtt Key.Arn,
// in the long form), the first by logical id when several do.
func keyAliases(resources map[string]struct {
	Type       string
	Properties map[string]any
}) map[string]string {
	out := map[string]string{}
	ids := slices.Sorted(maps.Keys(resources))
	for _, id := range ids {
		res := resources[id]
		if res.Type != "AWS::KMS::Alias" {
			continue
		}
		key := refTarget(res.Properties["TargetKeyId"])
		if _, taken := out[key]; key != "" && !taken {
			out[key] = id
		}
	}
	return out
}

// refTarget is the logical id a {"Ref": id} or {"Fn::GetAtt": [id, attr]}
// (or "id.attr") names; "" for anything else.
func refTarget(v any) string {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return ""
	}
	if id, ok := m["Ref"].(string); ok {
		return id
	}
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) == 2 {
			id, _ := g[0].(string)
			return id
		}
	case string:
		id, _, _ := strings.Cut(g, ".")
		return id
	}
	return ""
}

// KeyAlias is the alias the embedded stack gives a KMS key with the given
// logical id that no AWS::KMS::Alias of the template names (a key the
// template aliases is named by that alias: see OpenNamed).
func KeyAlias(stack, logicalID string) string {
	return "alias/" + stack + "-" + strings.ToLower(logicalID)
}

func deref(s *string, def string) string {
	if s == nil || *s == "" || strings.HasPrefix(*s, "unresolved:") {
		return def
	}
	return *s
}

type resolver struct {
	env        Env
	types      map[string]string
	names      map[string]string
	params     map[string]any
	conditions map[string]any
	unmodeled  map[string]map[string]any
}

func (r *resolver) options() *intrinsics.ProcessorOptions {
	return &intrinsics.ProcessorOptions{
		ParameterOverrides: r.params,
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
			"Ref":        func(_ string, in, _ any) any { return r.ref(in) },
			"Fn::GetAtt": func(_ string, in, _ any) any { return r.getAtt(in) },
			"Fn::Sub":    func(_ string, in, _ any) any { return r.sub(in) },
			"Fn::If":     func(_ string, in, _ any) any { return r.fnIf(in) },
			// goformation's own Fn::Split returns a []string, which its
			// Fn::Select does not take.
			"Fn::Split": func(_ string, in, _ any) any { return split(in) },
		},
	}
}

func (r *resolver) ref(in any) any {
	name, ok := in.(string)
	if !ok {
		return "unresolved:Ref"
	}
	switch name {
	case "AWS::StackName":
		return r.env.StackName
	case "AWS::Region":
		return r.env.Region
	case "AWS::AccountId":
		return r.env.Account
	case "AWS::Partition":
		return r.env.partition()
	case "AWS::URLSuffix":
		return r.env.URLSuffix()
	case "AWS::NoValue":
		return nil
	}
	if v, ok := r.params[name]; ok {
		return v
	}
	switch r.types[name] {
	case "AWS::SQS::Queue":
		return strings.TrimRight(r.env.Endpoint, "/") + "/" + r.env.Account + "/" + r.names[name]
	case "AWS::SNS::Topic":
		return fmt.Sprintf("arn:%s:sns:%s:%s:%s-%s", r.env.partition(), r.env.Region, r.env.Account, r.env.StackName, strings.ToLower(name))
	case "AWS::IAM::Role":
		if r.env.CloudFormationNames {
			return CloudFormationName(r.env.StackName, name, 64)
		}
	case "AWS::ApiGatewayV2::Api":
		return ServiceID(r.env.StackName, name, 10) // the API's id
	case "AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Route":
		return ServiceID(r.env.StackName, name, 7) // the integration's or route's id
	case "AWS::IAM::ManagedPolicy":
		if r.env.CloudFormationNames {
			return fmt.Sprintf("arn:%s:iam::%s:policy/%s", r.env.partition(), r.env.Account, CloudFormationName(r.env.StackName, name, 128))
		}
	case "":
		return "unresolved:" + name
	}
	if n, ok := r.names[name]; ok {
		return n
	}
	// Other resources (roles, policies, mappings): a stable physical id.
	return r.env.StackName + "-" + name
}

func (r *resolver) getAtt(in any) any {
	var id, attr string
	switch v := in.(type) {
	case []any:
		if len(v) == 2 {
			id, _ = v[0].(string)
			attr, _ = v[1].(string)
		}
	case string:
		id, attr, _ = strings.Cut(v, ".")
	}
	return r.attr(id, attr)
}

func (r *resolver) attr(id, attr string) string {
	name := r.names[id]
	if name == "" {
		name = strings.ToLower(r.env.StackName + "-" + id)
	}
	p := r.env.partition()
	switch r.types[id] + "." + attr {
	case "AWS::SQS::Queue.Arn":
		return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, r.env.Region, r.env.Account, name)
	case "AWS::SQS::Queue.QueueName":
		return name
	case "AWS::SQS::Queue.QueueUrl":
		return strings.TrimRight(r.env.Endpoint, "/") + "/" + r.env.Account + "/" + name
	case "AWS::DynamoDB::Table.Arn":
		return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p, r.env.Region, r.env.Account, name)
	case "AWS::DynamoDB::Table.StreamArn":
		return streamARN(p, r.env.Region, r.env.Account, name)
	case "AWS::S3::Bucket.Arn":
		return "arn:" + p + ":s3:::" + name
	case "AWS::KMS::Key.Arn":
		if r.env.CloudFormationNames {
			return fmt.Sprintf("arn:%s:kms:%s:%s:key/%s", p, r.env.Region, r.env.Account, keyUUID(r.env.StackName, id))
		}
		return fmt.Sprintf("arn:%s:kms:%s:%s:%s", p, r.env.Region, r.env.Account, name)
	case "AWS::Logs::LogGroup.Arn":
		return fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s", p, r.env.Region, r.env.Account, name)
	case "AWS::IAM::Role.Arn":
		if r.env.CloudFormationNames {
			return fmt.Sprintf("arn:%s:iam::%s:role/%s", p, r.env.Account, CloudFormationName(r.env.StackName, id, 64))
		}
		return fmt.Sprintf("arn:%s:iam::%s:role/%s-%s", p, r.env.Account, r.env.StackName, id)
	case "AWS::Events::Rule.Arn":
		if n := r.names[id]; n != "" {
			return fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, r.env.Region, r.env.Account, n)
		}
		if r.env.CloudFormationNames {
			return fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, r.env.Region, r.env.Account, CloudFormationName(r.env.StackName, id, 64))
		}
		return fmt.Sprintf("arn:%s:events:%s:%s:rule/%s-%s", p, r.env.Region, r.env.Account, r.env.StackName, id)
	case "AWS::CloudWatch::Alarm.Arn", "AWS::CloudWatch::CompositeAlarm.Arn":
		return fmt.Sprintf("arn:%s:cloudwatch:%s:%s:alarm:%s", p, r.env.Region, r.env.Account, name)
	case "AWS::Serverless::Function.Arn":
		return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, r.env.Region, r.env.Account, name)
	case "AWS::Lambda::Url.FunctionUrl":
		// https://<url-id>.lambda-url.<region>.on.aws/ (Lambda developer
		// guide, "Creating and managing Lambda function URLs").
		return fmt.Sprintf("https://%s.lambda-url.%s.on.aws/", ServiceID(r.env.StackName, id, 32), r.env.Region)
	case "AWS::ApiGatewayV2::Api.ApiId":
		return ServiceID(r.env.StackName, id, 10)
	case "AWS::ApiGatewayV2::Api.ApiEndpoint":
		return fmt.Sprintf("https://%s.execute-api.%s.%s", ServiceID(r.env.StackName, id, 10), r.env.Region, r.env.URLSuffix())
	}
	return "unresolved:" + id + "." + attr
}

// pruneNoValue returns v without the list elements that are an Fn::If
// whose chosen branch is Ref AWS::NoValue (an element whose condition
// does not resolve is kept).
func (r *resolver) pruneNoValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.pruneNoValue(e)
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if r.isNoValue(e) {
				continue
			}
			out = append(out, r.pruneNoValue(e))
		}
		return out
	}
	return v
}

// isNoValue reports whether v is an Fn::If that resolves to Ref
// AWS::NoValue.
func (r *resolver) isNoValue(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	args, ok := m["Fn::If"].([]any)
	if !ok || len(args) != 3 {
		return false
	}
	name, _ := args[0].(string)
	cond, ok := r.condition(name, 0)
	if !ok {
		return false
	}
	chosen, _ := args[2].(map[string]any)
	if cond {
		chosen, _ = args[1].(map[string]any)
	}
	return len(chosen) == 1 && chosen["Ref"] == "AWS::NoValue"
}

func split(in any) any {
	args, ok := in.([]any)
	if !ok || len(args) != 2 {
		return "unresolved:Fn::Split"
	}
	delim, ok1 := args[0].(string)
	str, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return "unresolved:Fn::Split"
	}
	var out []any
	for _, p := range strings.Split(str, delim) {
		out = append(out, p)
	}
	return out
}

// fnIf picks the branch of an Fn::If by its named condition.
func (r *resolver) fnIf(in any) any {
	args, ok := in.([]any)
	if !ok || len(args) != 3 {
		return "unresolved:Fn::If"
	}
	name, _ := args[0].(string)
	v, ok := r.condition(name, 0)
	if !ok {
		return "unresolved:Fn::If " + name
	}
	if v {
		return args[1]
	}
	return args[2]
}

// condition evaluates a named condition: Fn::Equals of references and
// literals, Fn::Not, Fn::And, Fn::Or and Condition.
func (r *resolver) condition(name string, depth int) (bool, bool) {
	expr, ok := r.conditions[name]
	if !ok || depth > 10 {
		return false, false
	}
	return r.evalCondition(expr, depth+1)
}

func (r *resolver) evalCondition(expr any, depth int) (bool, bool) {
	m, ok := expr.(map[string]any)
	if !ok || len(m) != 1 {
		return false, false
	}
	for op, arg := range m {
		args, _ := arg.([]any)
		switch op {
		case "Condition":
			name, _ := arg.(string)
			return r.condition(name, depth)
		case "Fn::Not":
			if len(args) != 1 {
				return false, false
			}
			v, ok := r.evalCondition(args[0], depth)
			return !v, ok
		case "Fn::And", "Fn::Or":
			all, anyTrue := true, false
			for _, a := range args {
				v, ok := r.evalCondition(a, depth)
				if !ok {
					return false, false
				}
				all, anyTrue = all && v, anyTrue || v
			}
			if op == "Fn::And" {
				return all, len(args) > 0
			}
			return anyTrue, len(args) > 0
		case "Fn::Equals":
			if len(args) != 2 {
				return false, false
			}
			a, okA := r.conditionValue(args[0])
			b, okB := r.conditionValue(args[1])
			return a == b, okA && okB
		}
	}
	return false, false
}

func (r *resolver) conditionValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64, bool:
		return text(x), true
	case map[string]any:
		if name, ok := x["Ref"].(string); ok && len(x) == 1 {
			return text(r.ref(name)), true
		}
		// Fn::Join of a literal delimiter and a Ref on a list (the
		// emptiness test of a CommaDelimitedList).
		if args, ok := x["Fn::Join"].([]any); ok && len(x) == 1 && len(args) == 2 {
			delim, ok := args[0].(string)
			ref, _ := args[1].(map[string]any)
			name, isRef := ref["Ref"].(string)
			if !ok || !isRef || len(ref) != 1 {
				return "", false
			}
			list, ok := r.ref(name).([]any)
			if !ok {
				return "", false
			}
			parts := make([]string, len(list))
			for i, e := range list {
				parts[i] = text(e)
			}
			return strings.Join(parts, delim), true
		}
	}
	return "", false
}

// commaList is a CommaDelimitedList parameter's value as Ref gives it.
func commaList(v any) []any {
	var parts []string
	switch x := v.(type) {
	case []string:
		parts = x
	case []any:
		for _, e := range x {
			parts = append(parts, text(e))
		}
	default:
		parts = strings.Split(text(x), ",")
	}
	if len(parts) == 0 {
		parts = []string{""}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = strings.TrimSpace(p)
	}
	return out
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (r *resolver) sub(in any) any {
	var tmpl string
	vars := map[string]any{}
	switch v := in.(type) {
	case string:
		tmpl = v
	case []any:
		if len(v) != 2 {
			return "unresolved:Fn::Sub"
		}
		tmpl, _ = v[0].(string)
		if m, ok := v[1].(map[string]any); ok {
			vars = m
		}
	default:
		return "unresolved:Fn::Sub"
	}
	return subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return text(v)
		}
		if id, attr, ok := strings.Cut(name, "."); ok {
			return r.attr(id, attr)
		}
		return text(r.ref(name))
	})
}

// text renders a value as CloudFormation substitutes it: numbers in full.
func text(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
