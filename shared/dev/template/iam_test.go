package template_test

// An IAM evaluator for the resolved template, small enough to read: it
// decides whether a role's policies allow one request (action, resource
// ARN, request context), the way IAM does for a principal and a resource in
// the same account:
//
//   - an explicit Deny in the identity policies, the bucket or queue policy
//     or the key policy wins;
//   - otherwise an identity policy must Allow (bucket and queue policies'
//     Allows are not counted: the roles must not depend on them);
//   - a KMS action also needs the key policy to allow it, either to the
//     role itself or to the account (which delegates to IAM policies).
//
// Action and Resource use IAM's wildcards (* any run, ? one character;
// actions case-insensitive). Conditions are evaluated against the keys the
// checker models (see modeled); a condition on any other key, or an
// operator it does not implement, makes the statement undecidable: it then
// grants nothing and, as a Deny, denies, and the finding names the key so
// the checker can be taught it.
//
// Besides the roles, decideService checks what AWS services acting as
// their own principals (CloudWatch alarms, EventBridge rules) need from the
// resource policies of the topic, queue and key the template wires them to.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// request is one authorization IAM makes: the function's own SDK call, a
// KMS use the service makes with the caller's credentials on its behalf
// (For names that call), or a call Lambda makes with the function's role
// (an event source mapping's polling, the runtime's logs).
type request struct {
	Function string
	// Op is the API operation ("" for a KMS use or a call on the
	// function's behalf); the key uses depend on it.
	Op       string
	Action   string
	Resource string
	Context  map[string]string
	For      string
}

func (q request) String() string {
	s := fmt.Sprintf("%s on %s", q.Action, q.Resource)
	if q.For != "" {
		s += " (for " + q.For + ")"
	}
	return s
}

// modeledKeys are the condition keys the checker knows the value (or the
// absence) of in every request it builds.
var modeledKeys = map[string]bool{
	"aws:securetransport": true, "aws:principalarn": true, "aws:principalaccount": true,
	"aws:principaltype": true, "aws:sourceaccount": true, "aws:sourcearn": true,
	"cloudwatch:namespace": true,
	"s3:if-none-match":     true, "s3:if-match": true,
	"s3:x-amz-server-side-encryption": true, "s3:x-amz-server-side-encryption-aws-kms-key-id": true,
	"s3:object-lock-mode": true, "s3:object-lock-legal-hold": true,
	"kms:viaservice": true, "kms:calleraccount": true,
	"s3:prefix":          true,
	"lambda:functionarn": true, "iam:policyarn": true,
	// Lambda function URLs (Service Authorization Reference, AWS Lambda:
	// lambda:FunctionUrlAuthType on InvokeFunctionUrl and the URL
	// configuration calls, the AuthType of the URL or of the request;
	// lambda:InvokedViaFunctionUrl, a Bool, on InvokeFunction, true when
	// the invoke comes through a function URL). A direct invoke the
	// checker builds carries no lambda:InvokedViaFunctionUrl (the tests
	// also try it false).
	"lambda:functionurlauthtype": true, "lambda:invokedviafunctionurl": true,
}

// stack is the resolved template as plain JSON values, with what the
// checker derives from it.
type stack struct {
	env       template.Env
	resources map[string]map[string]any
	cond      map[string]bool
	// keyIDs maps every way the template names a key (Ref, Arn, alias) to
	// the key's ARN; keyOf maps a queue, table or bucket ARN to the ARN of
	// the key that encrypts it.
	keyIDs map[string]string
	keyOf  map[string]string
	// keyLogical maps a key ARN to its logical id.
	keyLogical map[string]string
	// external declares keys of queues outside the template (ExtraDLQArn).
	external map[string]string
	// tags are the tags of resources outside the template (a tagged
	// source's queue and key), by ARN: aws:ResourceTag/<key> of a request
	// on them. A template resource has none here: an Allow on a resource
	// tag never matches it (conservative), and the template holds no Deny
	// on one (TestNoDenyRestsOnAResourceTag).
	tags map[string]map[string]string
	// realKeys maps the ARN a running stack's KMS gave one of the
	// template's keys to the key's alias (the embedded stack puts the real
	// ARN in the functions' environments).
	realKeys map[string]string
	// keyNames maps a key's logical id to what Ref on it resolves to (its
	// alias).
	keyNames map[string]string
}

func newStack(tpl *cloudformation.Template, env template.Env) (*stack, error) {
	raw, err := json.Marshal(map[string]any{"Resources": tpl.Resources, "Conditions": tpl.Conditions})
	if err != nil {
		return nil, err
	}
	var doc struct {
		Resources  map[string]map[string]any
		Conditions map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	_, names, err := template.OpenNamed(template.Path(), env)
	if err != nil {
		return nil, err
	}
	// The properties goformation does not model (AWS::Lambda::Permission's
	// InvokedViaFunctionUrl), as the template gives them.
	extra, err := template.Unmodeled(template.Path(), env)
	if err != nil {
		return nil, err
	}
	for id, ps := range extra {
		p := props(doc.Resources[id])
		if p == nil {
			continue
		}
		for k, v := range ps {
			if _, ok := p[k]; !ok {
				p[k] = v
			}
		}
	}
	s := &stack{env: env, resources: doc.Resources, cond: map[string]bool{}, external: map[string]string{}, tags: map[string]map[string]string{}, keyNames: names}
	for k, v := range doc.Conditions {
		b, _ := v.(bool)
		s.cond[k] = b
	}
	s.derive()
	return s, nil
}

// clone returns a deep copy a test may mutate.
func (s *stack) clone() *stack {
	raw, _ := json.Marshal(s.resources)
	c := &stack{env: s.env, cond: s.cond, external: maps.Clone(s.external), tags: maps.Clone(s.tags), realKeys: maps.Clone(s.realKeys), keyNames: s.keyNames}
	_ = json.Unmarshal(raw, &c.resources)
	c.derive()
	return c
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func str(v any) string { s, _ := v.(string); return s }

// strs reads a policy element that may be a string or a list.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if e != nil {
				out = append(out, fmt.Sprint(e))
			}
		}
		return out
	case bool, float64:
		return []string{fmt.Sprint(v)}
	}
	return nil
}

// exists reports whether a resource is created (its Condition holds).
func (s *stack) exists(r map[string]any) bool {
	c, ok := r["Condition"].(string)
	return !ok || s.cond[c]
}

func (s *stack) of(typ string) []string {
	var ids []string
	for id, r := range s.resources {
		if r["Type"] == typ && s.exists(r) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *stack) arn(service, rest string) string {
	return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, s.env.Region, s.env.Account, rest)
}

func (s *stack) derive() {
	s.keyIDs, s.keyOf, s.keyLogical = map[string]string{}, map[string]string{}, map[string]string{}
	for _, id := range s.of("AWS::KMS::Key") {
		alias := s.keyNames[id]
		a := s.arn("kms", alias) // what !GetAtt Key.Arn resolves to
		s.keyIDs[a], s.keyIDs[alias], s.keyLogical[a] = a, a, id
	}
	for _, id := range s.of("AWS::KMS::Alias") {
		p := props(s.resources[id])
		if k, ok := s.keyIDs[str(p["TargetKeyId"])]; ok {
			name := str(p["AliasName"])
			s.keyIDs[name], s.keyIDs[s.arn("kms", name)], s.keyIDs[s.env.StackName+"-"+id] = k, k, k
		}
	}
	for real, alias := range s.realKeys {
		if k, ok := s.keyIDs[alias]; ok {
			s.keyIDs[real] = k
		}
	}
	for _, id := range s.of("AWS::SQS::Queue") {
		p := props(s.resources[id])
		if k := str(p["KmsMasterKeyId"]); k != "" {
			s.keyOf[s.arn("sqs", s.queueName(id))] = s.key(k)
		}
	}
	for _, id := range s.of("AWS::SNS::Topic") {
		if k := str(props(s.resources[id])["KmsMasterKeyId"]); k != "" {
			s.keyOf[s.topicARN(id)] = s.key(k)
		}
	}
	for _, id := range s.of("AWS::DynamoDB::Table") {
		p := props(s.resources[id])
		sse, _ := p["SSESpecification"].(map[string]any)
		if sse != nil && sse["SSEEnabled"] == true && str(sse["KMSMasterKeyId"]) != "" {
			s.keyOf[s.arn("dynamodb", "table/"+str(p["TableName"]))] = s.key(str(sse["KMSMasterKeyId"]))
		}
	}
	for _, id := range s.of("AWS::S3::Bucket") {
		p := props(s.resources[id])
		enc, _ := p["BucketEncryption"].(map[string]any)
		rules, _ := enc["ServerSideEncryptionConfiguration"].([]any)
		for _, r := range rules {
			def, _ := r.(map[string]any)["ServerSideEncryptionByDefault"].(map[string]any)
			if strings.HasPrefix(str(def["SSEAlgorithm"]), "aws:kms") && str(def["KMSMasterKeyID"]) != "" {
				s.keyOf["arn:aws:s3:::"+str(p["BucketName"])] = s.key(str(def["KMSMasterKeyID"]))
			}
		}
	}
}

// key returns the ARN of the key an identifier names.
func (s *stack) key(id string) string {
	if k, ok := s.keyIDs[id]; ok {
		return k
	}
	return id
}

// topicARN is what Ref on a topic resolves to.
func (s *stack) topicARN(id string) string {
	return s.arn("sns", s.env.StackName+"-"+strings.ToLower(id))
}

func (s *stack) queueName(id string) string {
	if n := str(props(s.resources[id])["QueueName"]); n != "" {
		return n
	}
	return strings.ToLower(s.env.StackName + "-" + id)
}

// encryptionKey returns the key that encrypts a queue, table (or index) or
// bucket (or object) ARN, "" when none of the template's.
func (s *stack) encryptionKey(arn string) string {
	if k, ok := s.external[arn]; ok {
		return k
	}
	switch {
	case strings.HasPrefix(arn, "arn:aws:s3:::"):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(arn, "arn:aws:s3:::"), "/")
		return s.keyOf["arn:aws:s3:::"+bucket]
	case strings.HasPrefix(arn, "arn:aws:dynamodb:"):
		table, _, _ := strings.Cut(arn, "/index/")
		table, _, _ = strings.Cut(table, "/stream/")
		return s.keyOf[table]
	}
	return s.keyOf[arn]
}

// statement is one policy statement with where it came from.
type statement struct {
	from string
	st   map[string]any
}

// namedStatements reads the statements of a policy document: one statement
// named from, or a list whose entries are named from/Sid (from/#i for one
// without a Sid when numbered).
func namedStatements(from string, doc any, numbered bool) []statement {
	d, _ := doc.(map[string]any)
	switch st := d["Statement"].(type) {
	case map[string]any:
		return []statement{{from, st}}
	case []any:
		var out []statement
		for i, e := range st {
			if m, ok := e.(map[string]any); ok {
				sid := str(m["Sid"])
				if sid == "" && numbered {
					sid = fmt.Sprint("#", i)
				}
				out = append(out, statement{from + "/" + sid, m})
			}
		}
		return out
	}
	return nil
}

// identityPolicies returns every statement attached to a role: its inline
// policies, AWS::IAM::Policy / RolePolicy / ManagedPolicy resources naming
// it, and the inline statements of SAM Policies on functions that use it.
func (s *stack) identityPolicies(roleID string) ([]statement, []string) {
	var out []statement
	var problems []string
	add := func(from string, doc any) { out = append(out, namedStatements(from, doc, true)...) }
	role := s.resources[roleID]
	p := props(role)
	pols, _ := p["Policies"].([]any)
	for _, e := range pols {
		m, _ := e.(map[string]any)
		add(roleID+"/"+str(m["PolicyName"]), m["PolicyDocument"])
	}
	roleRef := s.env.StackName + "-" + roleID // what the resolver gives Ref on a role
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::RolePolicy", "AWS::IAM::ManagedPolicy"} {
		for _, id := range s.of(typ) {
			pp := props(s.resources[id])
			roles := strs(pp["Roles"])
			if r := str(pp["RoleName"]); r != "" {
				roles = append(roles, r)
			}
			if slices.Contains(roles, roleRef) || slices.Contains(strs(p["ManagedPolicyArns"]), s.env.StackName+"-"+id) {
				add(id, pp["PolicyDocument"])
			}
		}
	}
	if p["PermissionsBoundary"] != nil {
		problems = append(problems, fmt.Sprintf("%s has a permissions boundary, which the checker does not evaluate", roleID))
	}
	for _, m := range strs(p["ManagedPolicyArns"]) {
		if !strings.HasPrefix(m, s.env.StackName+"-") {
			problems = append(problems, fmt.Sprintf("%s attaches managed policy %s, which the checker cannot read", roleID, m))
		}
	}
	for _, fn := range s.functionsOf(roleID) {
		fp := props(s.resources[fn])
		sam, _ := fp["Policies"].(map[string]any)
		for k, v := range sam {
			switch k {
			case "PolicyDocument":
				add(fn+"/Policies", v)
			case "PolicyDocumentArray", "Statements":
				arr, _ := v.([]any)
				for _, e := range arr {
					add(fn+"/Policies", e)
				}
			case "String", "StringArray", "SAMPolicyTemplate", "SAMPolicyTemplateArray":
				if v != nil {
					problems = append(problems, fmt.Sprintf("%s uses SAM policy %s %v: expand it into the role so it can be checked", fn, k, v))
				}
			}
		}
	}
	return out, problems
}

// functionsOf returns the functions that run with a role.
func (s *stack) functionsOf(roleID string) []string {
	arn := fmt.Sprintf("arn:aws:iam::%s:role/%s-%s", s.env.Account, s.env.StackName, roleID)
	var out []string
	for _, typ := range []string{"AWS::Serverless::Function", "AWS::Lambda::Function"} {
		for _, id := range s.of(typ) {
			if str(props(s.resources[id])["Role"]) == arn {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *stack) roleOf(fn string) string {
	for _, id := range s.of("AWS::IAM::Role") {
		if slices.Contains(s.functionsOf(id), fn) {
			return id
		}
	}
	return ""
}

func (s *stack) roleARN(roleID string) string {
	return fmt.Sprintf("arn:aws:iam::%s:role/%s-%s", s.env.Account, s.env.StackName, roleID)
}

// resourcePolicies returns the bucket, queue or key policy statements that
// apply to a resource ARN.
func (s *stack) resourcePolicies(arn string) []statement {
	var out []statement
	add := func(from string, doc any) { out = append(out, namedStatements(from, doc, false)...) }
	switch {
	case strings.HasPrefix(arn, "arn:aws:s3:::"):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(arn, "arn:aws:s3:::"), "/")
		for _, id := range s.of("AWS::S3::BucketPolicy") {
			if p := props(s.resources[id]); str(p["Bucket"]) == bucket {
				add(id, p["PolicyDocument"])
			}
		}
	case strings.HasPrefix(arn, "arn:aws:sqs:"):
		name := arn[strings.LastIndex(arn, ":")+1:]
		for _, id := range s.of("AWS::SQS::QueuePolicy") {
			p := props(s.resources[id])
			for _, u := range strs(p["Queues"]) {
				if strings.HasSuffix(u, "/"+name) {
					add(id, p["PolicyDocument"])
				}
			}
		}
	case strings.HasPrefix(arn, "arn:aws:sns:"):
		for _, id := range s.of("AWS::SNS::TopicPolicy") {
			p := props(s.resources[id])
			if slices.Contains(strs(p["Topics"]), arn) {
				add(id, p["PolicyDocument"])
			}
		}
	case strings.HasPrefix(arn, "arn:aws:kms:"):
		if id, ok := s.keyLogical[arn]; ok {
			add(id, props(s.resources[id])["KeyPolicy"])
		}
	case strings.HasPrefix(arn, "arn:aws:lambda:") && strings.Contains(arn, ":function:"):
		for _, id := range s.of("AWS::Lambda::Permission") {
			st := s.lambdaPermission(id)
			if anyMatch(strs(st["Resource"]), arn, false) {
				out = append(out, statement{id, st})
			}
		}
	}
	return out
}

// lambdaPermission is the statement an AWS::Lambda::Permission adds to its
// function's resource policy, as Lambda's AddPermission writes it (Lambda
// developer guide, "Viewing resource-based IAM policies in Lambda", and the
// AddPermission API reference): the action on the function (a qualifier in
// FunctionName narrows it to that version or alias), the principal (an
// account id becomes that account's root, which delegates to the
// account's IAM policies; a service name a Service principal), and a
// condition per property: FunctionUrlAuthType as StringEquals
// lambda:FunctionUrlAuthType, InvokedViaFunctionUrl as Bool
// lambda:InvokedViaFunctionUrl true, SourceArn as ArnLike aws:SourceArn,
// SourceAccount as StringEquals aws:SourceAccount, PrincipalOrgID as
// StringEquals aws:PrincipalOrgID and EventSourceToken as StringEquals
// lambda:EventSourceToken (the last two are not modeled: such a statement
// is undecidable).
func (s *stack) lambdaPermission(id string) map[string]any {
	p := props(s.resources[id])
	fn := str(p["FunctionName"])
	if !strings.HasPrefix(fn, "arn:") {
		fn = s.arn("lambda", "function:"+fn)
	}
	var principal any = map[string]any{"AWS": str(p["Principal"])}
	switch pr := str(p["Principal"]); {
	case pr == "*":
		principal = "*"
	case len(pr) == 12 && strings.Trim(pr, "0123456789") == "":
		principal = map[string]any{"AWS": "arn:aws:iam::" + pr + ":root"}
	case strings.Contains(pr, ".amazonaws.com"):
		principal = map[string]any{"Service": pr}
	}
	cond := map[string]any{}
	set := func(op, key string, v any) {
		m, _ := cond[op].(map[string]any)
		if m == nil {
			m = map[string]any{}
			cond[op] = m
		}
		m[key] = v
	}
	if v := str(p["FunctionUrlAuthType"]); v != "" {
		set("StringEquals", "lambda:FunctionUrlAuthType", v)
	}
	if v, ok := p["InvokedViaFunctionUrl"].(bool); ok && v {
		set("Bool", "lambda:InvokedViaFunctionUrl", "true")
	}
	if v := str(p["SourceArn"]); v != "" {
		set("ArnLike", "aws:SourceArn", v)
	}
	if v := str(p["SourceAccount"]); v != "" {
		set("StringEquals", "aws:SourceAccount", v)
	}
	if v := str(p["PrincipalOrgID"]); v != "" {
		set("StringEquals", "aws:PrincipalOrgID", v)
	}
	if v := str(p["EventSourceToken"]); v != "" {
		set("StringEquals", "lambda:EventSourceToken", v)
	}
	st := map[string]any{"Sid": id, "Effect": "Allow", "Principal": principal, "Action": str(p["Action"]), "Resource": fn}
	if len(cond) > 0 {
		st["Condition"] = cond
	}
	return st
}

// match is IAM's wildcard match: * any run (also empty), ? one character.
func match(pattern, value string) bool {
	p, v := 0, 0
	star, mark := -1, 0
	for v < len(value) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == value[v]):
			p++
			v++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, v
			p++
		case star >= 0:
			p = star + 1
			mark++
			v = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

func anyMatch(patterns []string, value string, fold bool) bool {
	for _, p := range patterns {
		if fold && match(strings.ToLower(p), strings.ToLower(value)) || !fold && match(p, value) {
			return true
		}
	}
	return false
}

// outcome of a statement for a request.
type outcome int

const (
	noMatch outcome = iota
	matches
	undecidable
)

// applies reports whether a statement covers a request (action, resource,
// principal when the statement has one, conditions); why says which
// condition key could not be decided.
func applies(st map[string]any, q request, principal string, account string) (outcome, string) {
	if a, ok := st["Action"]; ok && !anyMatch(strs(a), q.Action, true) {
		return noMatch, ""
	}
	if a, ok := st["NotAction"]; ok && anyMatch(strs(a), q.Action, true) {
		return noMatch, ""
	}
	if r, ok := st["Resource"]; ok && !anyMatch(strs(r), q.Resource, false) {
		return noMatch, ""
	}
	if r, ok := st["NotResource"]; ok && anyMatch(strs(r), q.Resource, false) {
		return noMatch, ""
	}
	if p, ok := st["Principal"]; ok && !principalMatches(p, principal, account) {
		return noMatch, ""
	}
	cond, _ := st["Condition"].(map[string]any)
	for op, m := range cond {
		kv, _ := m.(map[string]any)
		for key, want := range kv {
			o := condOutcome(op, strings.ToLower(key), strs(want), q.Context)
			if o != matches {
				return o, key
			}
		}
	}
	return matches, ""
}

func principalMatches(p any, principal, account string) bool {
	if p == "*" {
		return true
	}
	m, _ := p.(map[string]any)
	if svc, ok := strings.CutPrefix(principal, "service:"); ok {
		return slices.Contains(strs(m["Service"]), svc) || slices.Contains(strs(m["AWS"]), "*")
	}
	// An account (its id, or its root) is every principal of that
	// account: the principal's own account, from its ARN.
	if f := strings.Split(principal, ":"); strings.HasPrefix(principal, "arn:") && len(f) > 4 && f[4] != "" {
		account = f[4]
	}
	for _, v := range strs(m["AWS"]) {
		if v == "*" || v == principal || v == account || v == "arn:aws:iam::"+account+":root" {
			return true
		}
	}
	return false
}

// multiValued are the modeled keys whose value is a set; the request
// context holds it joined by "\x00" ("" for the empty set).
var multiValued = map[string]bool{"s3:requestobjecttagkeys": true, "dynamodb:leadingkeys": true, "dynamodb:attributes": true, "aws:tagkeys": true}

// modeled reports whether the checker knows a key's value or absence in
// every request it builds.
func modeled(key string) bool {
	return modeledKeys[key] || multiValued[key] || strings.HasPrefix(key, "s3:requestobjecttag/") || strings.HasPrefix(key, "aws:resourcetag/")
}

// condOutcome evaluates one condition operator on one key.
func condOutcome(op, key string, want []string, ctx map[string]string) outcome {
	if !modeled(key) {
		return undecidable
	}
	var set string
	for _, q := range []string{"ForAllValues:", "ForAnyValue:"} {
		if rest, ok := strings.CutPrefix(op, q); ok {
			set, op = q, rest
		}
	}
	if (set != "") != multiValued[key] {
		return undecidable // a set operator on a single value, or the reverse
	}
	base, ifExists := strings.CutSuffix(op, "IfExists")
	negated := strings.Contains(base, "Not")
	got, present := ctx[key]
	if set != "" {
		var values []string
		if got != "" {
			values = strings.Split(got, "\x00")
		}
		for _, v := range values {
			hit, ok := compare(base, v, want)
			switch {
			case !ok:
				return undecidable
			case set == "ForAnyValue:" && hit != negated:
				return matches
			case set == "ForAllValues:" && hit == negated:
				return noMatch
			}
		}
		if set == "ForAllValues:" {
			return matches // also for the empty set, as IAM has it
		}
		return noMatch
	}
	if base == "Null" {
		for _, w := range want {
			if (w == "true") == !present {
				return matches
			}
		}
		return noMatch
	}
	if !present {
		if ifExists || negated {
			return matches
		}
		return noMatch
	}
	hit, ok := compare(base, got, want)
	switch {
	case !ok:
		return undecidable
	case hit != negated:
		return matches
	}
	return noMatch
}

// compare reports whether a value matches any of the policy's values under
// an operator (its negation is the caller's); ok is false for an operator
// the checker does not implement.
func compare(base, got string, want []string) (hit, ok bool) {
	for _, w := range want {
		switch base {
		case "StringEquals", "StringNotEquals", "ArnEquals", "ArnNotEquals":
			hit = hit || got == w
		case "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase":
			hit = hit || strings.EqualFold(got, w)
		case "StringLike", "StringNotLike", "ArnLike", "ArnNotLike":
			hit = hit || match(w, got)
		case "Bool":
			hit = hit || strings.EqualFold(got, w)
		default:
			return false, false
		}
	}
	return hit, true
}

// decide returns "" when the role may make the request, else why not.
func (s *stack) decide(roleID string, q request) string {
	if tags := s.tags[q.Resource]; len(tags) > 0 {
		q.Context = maps.Clone(q.Context)
		if q.Context == nil {
			q.Context = map[string]string{}
		}
		for k, v := range tags {
			q.Context["aws:resourcetag/"+strings.ToLower(k)] = v
		}
	}
	ids, problems := s.identityPolicies(roleID)
	if len(problems) > 0 {
		return strings.Join(problems, "; ")
	}
	principal := s.roleARN(roleID)
	res := s.resourcePolicies(q.Resource)
	var undecided []string
	// Explicit denies anywhere win.
	for _, st := range append(slices.Clone(ids), res...) {
		if st.st["Effect"] != "Deny" {
			continue
		}
		switch o, key := applies(st.st, q, principal, s.env.Account); o {
		case matches:
			return "denied by " + st.from
		case undecidable:
			return fmt.Sprintf("%s may deny it: condition on %s is not modeled by the checker", st.from, key)
		}
	}
	identity := false
	for _, st := range ids {
		if st.st["Effect"] != "Allow" {
			continue
		}
		switch o, key := applies(st.st, q, principal, s.env.Account); o {
		case matches:
			identity = true
		case undecidable:
			undecided = append(undecided, fmt.Sprintf("%s (condition on %s not modeled)", st.from, key))
		}
	}
	if strings.HasPrefix(q.Resource, "arn:aws:kms:") {
		if _, ours := s.keyLogical[q.Resource]; ours {
			direct, delegated := false, false
			for _, st := range res {
				if st.st["Effect"] != "Allow" {
					continue
				}
				if o, _ := applies(st.st, q, principal, s.env.Account); o == matches {
					m, _ := st.st["Principal"].(map[string]any)
					if st.st["Principal"] == "*" || slices.Contains(strs(m["AWS"]), principal) || slices.Contains(strs(m["AWS"]), "*") {
						direct = true
					} else {
						delegated = true
					}
				}
			}
			switch {
			case direct:
				return ""
			case !delegated:
				return "the key policy allows it neither to the role nor to the account"
			}
		}
	}
	if identity {
		return ""
	}
	if len(undecided) > 0 {
		return "no statement allows it; undecidable: " + strings.Join(undecided, ", ")
	}
	return "no statement of the role allows it"
}

// withKMS adds the key uses AWS documents for a call on an encrypted
// resource:
//   - SQS SendMessage: kms:GenerateDataKey and kms:Decrypt; ReceiveMessage:
//     kms:Decrypt (SQS developer guide, "Configuring AWS KMS permissions");
//   - S3 PutObject with SSE-KMS: kms:GenerateDataKey; GetObject: kms:Decrypt
//     (S3 user guide, "Using server-side encryption with AWS KMS keys");
//   - DynamoDB with a customer managed key: every data-plane call needs
//     kms:Decrypt of the table key, which DynamoDB makes with the caller's
//     credentials (and caches); encrypting items uses the table key, not a
//     new data key per call.
func (s *stack) withKMS(q request) []request {
	out := []request{q}
	key := s.encryptionKey(q.Resource)
	if key == "" || strings.Contains(key, ":alias/aws/") {
		return out
	}
	var need []string
	via := ""
	switch {
	case q.Op == "SendMessage" || q.Op == "SendMessageBatch":
		need, via = []string{"kms:GenerateDataKey", "kms:Decrypt"}, "sqs"
	case q.Op == "ReceiveMessage":
		need, via = []string{"kms:Decrypt"}, "sqs"
	case q.Op == "Publish":
		need, via = []string{"kms:GenerateDataKey", "kms:Decrypt"}, "sns"
	case q.Op == "PutObject" && q.Action == "s3:PutObject":
		need, via = []string{"kms:GenerateDataKey"}, "s3"
		if k := q.Context["s3:x-amz-server-side-encryption-aws-kms-key-id"]; k != "" {
			key = s.key(k)
		}
	case q.Op == "GetObject":
		need, via = []string{"kms:Decrypt"}, "s3"
	case strings.HasPrefix(q.Action, "dynamodb:") && q.Op != "":
		need, via = []string{"kms:Decrypt"}, "dynamodb"
	}
	for _, a := range need {
		out = append(out, request{Function: q.Function, Action: a, Resource: key, For: q.String(),
			Context: map[string]string{"aws:securetransport": "true", "kms:viaservice": via + "." + s.env.Region + ".amazonaws.com", "kms:calleraccount": s.env.Account}})
	}
	return out
}

// onBehalf returns the calls Lambda makes with a function's role: the event
// source mappings' polling of their queues (AWS documents sqs:ReceiveMessage,
// sqs:DeleteMessage and sqs:GetQueueAttributes for the execution role, and
// kms:Decrypt for an encrypted queue) or DynamoDB streams
// (dynamodb:DescribeStream, GetRecords, GetShardIterator, ListStreams), a
// stream mapping's on-failure destination, and the runtime's log writes.
func (s *stack) onBehalf(fn string) []request {
	p := props(s.resources[fn])
	name := str(p["FunctionName"])
	var out []request
	for _, id := range s.of("AWS::Lambda::EventSourceMapping") {
		m := props(s.resources[id])
		target := str(m["FunctionName"])
		if target != name && !strings.HasSuffix(target, ":function:"+name) {
			continue
		}
		src := str(m["EventSourceArn"])
		var polling []string
		switch {
		case strings.HasPrefix(src, "arn:aws:sqs:"):
			polling = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
		case strings.HasPrefix(src, "arn:aws:dynamodb:") && strings.Contains(src, "/stream/"):
			// The DynamoDB developer guide's execution-role policy for a
			// function on a table's stream (and kms:Decrypt of the table's
			// key, which encrypts the stream).
			polling = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
		default:
			out = append(out, request{Function: fn, Action: "unknown", Resource: src, For: id + " (only SQS queues and DynamoDB streams are modeled)"})
			continue
		}
		for _, a := range polling {
			_, op, _ := strings.Cut(a, ":")
			out = append(out, s.withKMS(request{Function: fn, Op: op, Action: a, Resource: src, For: id, Context: map[string]string{"aws:securetransport": "true"}})...)
		}
		// A stream mapping's on-failure destination is written by Lambda
		// with the function's role, as an asynchronous invocation's is.
		if dc, ok := m["DestinationConfig"].(map[string]any); ok {
			if d, ok := dc["OnFailure"].(map[string]any); ok && strings.HasPrefix(str(d["Destination"]), "arn:aws:sqs:") {
				out = append(out, s.withKMS(request{Function: fn, Op: "SendMessage", Action: "sqs:SendMessage", Resource: str(d["Destination"]), For: id + " OnFailure",
					Context: map[string]string{"aws:securetransport": "true"}})...)
			}
		}
	}
	// Asynchronous invocations' on-failure (and on-success) destinations
	// and the function's dead-letter queue are written by Lambda with the
	// function's execution role.
	var targets []struct{ from, arn string }
	dest := func(from string, cfg any) {
		dc, _ := cfg.(map[string]any)
		for _, k := range []string{"OnFailure", "OnSuccess"} {
			if d, ok := dc[k].(map[string]any); ok && str(d["Destination"]) != "" {
				targets = append(targets, struct{ from, arn string }{from + " " + k, str(d["Destination"])})
			}
		}
	}
	if eic, ok := p["EventInvokeConfig"].(map[string]any); ok {
		dest(fn+" EventInvokeConfig", eic["DestinationConfig"])
	}
	for _, id := range s.of("AWS::Lambda::EventInvokeConfig") {
		m := props(s.resources[id])
		if t := str(m["FunctionName"]); t == name || strings.HasSuffix(t, ":function:"+name) {
			dest(id, m["DestinationConfig"])
		}
	}
	if dlq, ok := p["DeadLetterQueue"].(map[string]any); ok && str(dlq["TargetArn"]) != "" {
		targets = append(targets, struct{ from, arn string }{fn + " DeadLetterQueue", str(dlq["TargetArn"])})
	}
	if dlc, ok := p["DeadLetterConfig"].(map[string]any); ok && str(dlc["TargetArn"]) != "" {
		targets = append(targets, struct{ from, arn string }{fn + " DeadLetterConfig", str(dlc["TargetArn"])})
	}
	for _, t := range targets {
		var q request
		switch {
		case strings.HasPrefix(t.arn, "arn:aws:sqs:"):
			q = request{Op: "SendMessage", Action: "sqs:SendMessage"}
		case strings.HasPrefix(t.arn, "arn:aws:sns:"):
			q = request{Op: "Publish", Action: "sns:Publish"}
		case strings.HasPrefix(t.arn, "arn:aws:lambda:"):
			q = request{Op: "Invoke", Action: "lambda:InvokeFunction"}
		case strings.HasPrefix(t.arn, "arn:aws:events:"):
			q = request{Op: "PutEvents", Action: "events:PutEvents"}
		default:
			q = request{Action: "unknown"}
		}
		q.Function, q.Resource, q.For, q.Context = fn, t.arn, t.from, map[string]string{"aws:securetransport": "true"}
		out = append(out, s.withKMS(q)...)
	}
	group := "/aws/lambda/" + name
	if lc, ok := p["LoggingConfig"].(map[string]any); ok && str(lc["LogGroup"]) != "" {
		group = str(lc["LogGroup"])
	}
	for _, a := range []string{"logs:CreateLogStream", "logs:PutLogEvents"} {
		out = append(out, request{Function: fn, Action: a, Resource: s.arn("logs", "log-group:"+group+":log-stream:2026/12/01/[$LATEST]0123456789abcdef"), For: "the Lambda runtime",
			Context: map[string]string{"aws:securetransport": "true"}})
	}
	return out
}

// check returns one finding per request the function's role does not
// allow: "function (role): action on resource: why".
func (s *stack) check(fn string, calls []request) []string {
	role := s.roleOf(fn)
	if role == "" {
		return []string{fn + ": no role in the template runs it"}
	}
	seen := map[string]bool{}
	var out []string
	for _, q := range s.expand(fn, role, calls) {
		if why := s.decide(role, q); why != "" {
			f := fmt.Sprintf("%s (role %s): %s: %s", fn, role, q, why)
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// expand returns the authorizations behind a function's calls as IAM sees
// them: each call with the key uses it implies, the calls Lambda makes
// with the role, each with the principal's context and on the key an
// alias names.
func (s *stack) expand(fn, role string, calls []request) []request {
	var all []request
	for _, c := range calls {
		all = append(all, s.withKMS(c)...)
	}
	all = append(all, s.onBehalf(fn)...)
	for i, q := range all {
		ctx := map[string]string{"aws:principalarn": s.roleARN(role), "aws:principalaccount": s.env.Account, "aws:principaltype": "AssumedRole"}
		maps.Copy(ctx, q.Context)
		q.Context = ctx
		if strings.HasPrefix(q.Resource, "arn:aws:kms:") || strings.HasPrefix(q.Resource, "alias/") {
			q.Resource = s.key(q.Resource) // KMS authorizes on the key an alias names
		}
		all[i] = q
	}
	return all
}

// unused returns one finding per action of an Allow statement of a role
// that none of the calls of the functions running with it (calls, by
// function, as expand has them) is granted by: "role/statement grants
// action: no call uses it". A grant narrowed by a resource or a condition
// counts as used only by a call it covers. A role that several functions
// share (the ledger's stream and digest functions) is judged on all of
// their calls together.
func (s *stack) unused(role string, calls map[string][]request) []string {
	var all []request
	for _, fn := range slices.Sorted(maps.Keys(calls)) {
		if got := s.roleOf(fn); got != role {
			return []string{fmt.Sprintf("%s runs with role %q, not %s", fn, got, role)}
		}
		all = append(all, s.expand(fn, role, calls[fn])...)
	}
	for _, fn := range s.functionsOf(role) {
		if _, ok := calls[fn]; !ok {
			return []string{fmt.Sprintf("%s runs with role %s too: its calls are needed to judge the role's grants", fn, role)}
		}
	}
	ids, problems := s.identityPolicies(role)
	out := problems
	for _, st := range ids {
		if st.st["Effect"] != "Allow" {
			continue
		}
		for _, a := range strs(st.st["Action"]) {
			one := maps.Clone(st.st)
			one["Action"] = a
			if !slices.ContainsFunc(all, func(q request) bool {
				o, _ := applies(one, q, s.roleARN(role), s.env.Account)
				return o == matches
			}) {
				out = append(out, fmt.Sprintf("%s grants %s: no call uses it", st.from, a))
			}
		}
	}
	return out
}

// serviceRequest is a request an AWS service makes as its own service
// principal on the stack's resources.
type serviceRequest struct {
	request
	service string
}

// serviceRequests returns what the services the template wires up must be
// allowed to do by resource policies (no role is involved):
//   - CloudWatch publishes an alarm's notification to an encrypted topic:
//     kms:GenerateDataKey and kms:Decrypt on the topic's key (SNS developer
//     guide, "Enable compatibility between event sources from AWS services
//     and encrypted topics"), and sns:Publish when a topic policy replaces
//     the default one;
//   - EventBridge sends an event it could not deliver to a target's
//     dead-letter queue: sqs:SendMessage allowed by the queue's policy to
//     events.amazonaws.com, and the key actions on an encrypted queue's key.
func (s *stack) serviceRequests() []serviceRequest {
	var out []serviceRequest
	ctx := func(source string) map[string]string {
		return map[string]string{"aws:securetransport": "true", "aws:sourcearn": source, "aws:sourceaccount": s.env.Account}
	}
	kmsFor := func(svc, arn, source, forWhat string) {
		k := s.encryptionKey(arn)
		if k == "" || strings.Contains(k, ":alias/aws/") {
			return
		}
		for _, a := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
			out = append(out, serviceRequest{request{Function: svc, Action: a, Resource: k, Context: ctx(source), For: forWhat}, svc})
		}
	}
	for _, id := range s.of("AWS::CloudWatch::Alarm") {
		p := props(s.resources[id])
		name := str(p["AlarmName"])
		if name == "" {
			name = s.env.StackName + "-" + id + "-ABCDEFGHIJKL" // CloudFormation's generated name
		}
		alarm := s.arn("cloudwatch", "alarm:"+name)
		var actions []string
		for _, k := range []string{"AlarmActions", "OKActions", "InsufficientDataActions"} {
			actions = append(actions, strs(p[k])...)
		}
		for _, a := range actions {
			if !strings.HasPrefix(a, "arn:aws:sns:") {
				continue
			}
			forWhat := "alarm " + id + " notifying " + a
			if len(s.resourcePolicies(a)) > 0 {
				out = append(out, serviceRequest{request{Function: "cloudwatch.amazonaws.com", Action: "sns:Publish", Resource: a, Context: ctx(alarm), For: forWhat}, "cloudwatch.amazonaws.com"})
			}
			kmsFor("cloudwatch.amazonaws.com", a, alarm, forWhat)
		}
	}
	for _, id := range s.of("AWS::Events::Rule") {
		name := s.env.StackName + "-" + id
		if n := str(props(s.resources[id])["Name"]); n != "" {
			name = n // a named rule's ARN ends with its name
		}
		rule := s.arn("events", "rule/"+name)
		targets, _ := props(s.resources[id])["Targets"].([]any)
		for _, t := range targets {
			dlc, _ := t.(map[string]any)["DeadLetterConfig"].(map[string]any)
			q := str(dlc["Arn"])
			if q == "" {
				continue
			}
			forWhat := "rule " + id + "'s dead-letter queue"
			out = append(out, serviceRequest{request{Function: "events.amazonaws.com", Action: "sqs:SendMessage", Resource: q, Context: ctx(rule), For: forWhat}, "events.amazonaws.com"})
			kmsFor("events.amazonaws.com", q, rule, forWhat)
		}
	}
	return out
}

// decideService returns "" when the resource's policy lets the service
// make the request, else why not.
func (s *stack) decideService(q serviceRequest) string {
	principal := "service:" + q.service
	allowed := false
	for _, st := range s.resourcePolicies(q.Resource) {
		o, key := applies(st.st, q.request, principal, s.env.Account)
		switch {
		case st.st["Effect"] == "Deny" && o == matches:
			return "denied by " + st.from
		case st.st["Effect"] == "Deny" && o == undecidable:
			return fmt.Sprintf("%s may deny it: condition on %s is not modeled by the checker", st.from, key)
		case st.st["Effect"] == "Allow" && o == matches:
			allowed = true
		}
	}
	if !allowed {
		return "no statement of the resource's policy allows " + q.service
	}
	return ""
}

// checkServices returns one finding per service request the template's
// resource policies do not allow.
func (s *stack) checkServices() []string {
	var out []string
	seen := map[string]bool{}
	for _, q := range s.serviceRequests() {
		if why := s.decideService(q); why != "" {
			f := fmt.Sprintf("%s: %s: %s", q.service, q.request, why)
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}
