package template_test

// Issue 27: operator actions reach the operator function (<stack>-operate)
// only through an endpoint where AWS authenticates the caller with IAM (a
// Lambda function URL with AuthType AWS_IAM, or an HTTP API route with IAM
// authorization), so that the sealed history names a principal AWS
// verified. A direct invoke could write any requestContext.authorizer.iam:
// nobody holding the stack's managed policies may make one, no function
// role may, and nobody may change the URL, the API or the function's
// resource policy. Each test here fails on the template of 49bea2d, which
// has no operator function.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// operatorIn is the template and the IAM checker's stack in region (the
// aws partition, the test account, stack "prod").
func operatorIn(t *testing.T, region string, params map[string]any) (*cloudformation.Template, *stack) {
	t.Helper()
	e := env
	e.Region, e.Params = region, params
	tpl, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStack(tpl, e)
	if err != nil {
		t.Fatal(err)
	}
	return tpl, s
}

// operatorARN is the operator function's ARN in region.
func operatorARN(region string) string {
	return "arn:aws:lambda:" + region + ":111122223333:function:prod-operate"
}

// The endpoint's ids, as the template reader gives them (template.ServiceID).
var (
	operatorAPI         = template.ServiceID("prod", "OperatorHttpApi", 10)
	operatorRoute       = template.ServiceID("prod", "OperatorHttpApiRoute", 7)
	operatorIntegration = template.ServiceID("prod", "OperatorHttpApiIntegration", 7)
)

// routeARN is the execute-api ARN of the HTTP API's one route (POST / in
// the $default stage: <api>/<stage>/<method>/<path>, API Gateway's
// "Control access for invoking an API").
func routeARN(region string) string {
	return "arn:aws:execute-api:" + region + ":111122223333:" + operatorAPI + "/$default/POST/"
}

// urlCall is what Lambda authorizes for one request to the function URL
// (AuthType AWS_IAM) of fn, for its caller ("Control access to Lambda
// function URLs": lambda:InvokeFunctionUrl and, for a URL created since
// October 2025, lambda:InvokeFunction), with the condition keys the
// Service Authorization Reference gives those actions.
func urlCall(fn string) []request {
	return []request{
		{Action: "lambda:InvokeFunctionUrl", Resource: fn, Context: map[string]string{"lambda:functionurlauthtype": "AWS_IAM", "lambda:functionarn": fn}},
		{Action: "lambda:InvokeFunction", Resource: fn, Context: map[string]string{"lambda:invokedviafunctionurl": "true"}},
	}
}

// directInvokes are invokes of fn that do not come through its URL: the
// invoke with no lambda:InvokedViaFunctionUrl in the request (and with it
// false, should Lambda send it so), of the function, of $LATEST, and the
// old asynchronous InvokeAsync.
func directInvokes(fn string) []request {
	return []request{
		{Action: "lambda:InvokeFunction", Resource: fn},
		{Action: "lambda:InvokeFunction", Resource: fn, Context: map[string]string{"lambda:invokedviafunctionurl": "false"}},
		{Action: "lambda:InvokeFunction", Resource: fn + ":$LATEST"},
		{Action: "lambda:InvokeAsync", Resource: fn},
	}
}

// urlChanges open or remove the URL or the function's resource policy:
// an AuthType of NONE (lambda:FunctionUrlAuthType is the request's),
// a new or deleted URL, a permission added or removed.
func urlChanges(fn string) []request {
	none := map[string]string{"lambda:functionurlauthtype": "NONE", "lambda:functionarn": fn}
	return []request{
		{Action: "lambda:UpdateFunctionUrlConfig", Resource: fn, Context: none},
		{Action: "lambda:CreateFunctionUrlConfig", Resource: fn, Context: none},
		{Action: "lambda:CreateFunctionUrlConfig", Resource: fn + ":live", Context: none},
		{Action: "lambda:DeleteFunctionUrlConfig", Resource: fn, Context: map[string]string{"lambda:functionurlauthtype": "AWS_IAM", "lambda:functionarn": fn}},
		{Action: "lambda:AddPermission", Resource: fn},
		{Action: "lambda:RemovePermission", Resource: fn},
	}
}

// apiChanges reconfigure the HTTP API (apigateway:<HTTP method> on the
// API's resources, API Gateway's ARN reference for HTTP APIs): the route's
// authorization, the integration's target, the stage, a new route, the
// API replaced or deleted.
func apiChanges(region string) []request {
	api := "arn:aws:apigateway:" + region + "::/apis/" + operatorAPI
	return []request{
		{Action: "apigateway:PATCH", Resource: api + "/routes/" + operatorRoute},
		{Action: "apigateway:DELETE", Resource: api + "/routes/" + operatorRoute},
		{Action: "apigateway:POST", Resource: api + "/routes"},
		{Action: "apigateway:PATCH", Resource: api + "/integrations/" + operatorIntegration},
		{Action: "apigateway:POST", Resource: api + "/integrations"},
		{Action: "apigateway:PATCH", Resource: api + "/stages/$default"},
		{Action: "apigateway:DELETE", Resource: api + "/stages/$default"},
		{Action: "apigateway:POST", Resource: api + "/authorizers"},
		{Action: "apigateway:PATCH", Resource: api},
		{Action: "apigateway:PUT", Resource: api},
		{Action: "apigateway:DELETE", Resource: api},
	}
}

// The endpoint OperatorEndpoint chooses: auto takes a function URL where
// Lambda offers them and the HTTP API in the Regions the Lambda developer
// guide lists without them, in AWS GovCloud (US) and in the China Regions;
// function-url and http-api are what they say. Exactly one endpoint's
// resources are created, and the outputs name it.
func TestOperatorEndpointChoice(t *testing.T) {
	type where struct{ partition, region string }
	var cases []struct {
		where
		endpoint, want string
	}
	add := func(w where, endpoint, want string) {
		cases = append(cases, struct {
			where
			endpoint, want string
		}{w, endpoint, want})
	}
	for _, r := range noFunctionURLRegions {
		add(where{"aws", r}, "", "http-api")
	}
	for _, r := range []string{"us-east-1", "eu-west-1", "eu-central-1", "ap-southeast-2", "ap-southeast-1", "ap-south-1", "ap-east-1", "ca-central-1", "me-south-1", "sa-east-1"} {
		add(where{"aws", r}, "", "function-url")
	}
	for _, w := range []where{{"aws-us-gov", "us-gov-west-1"}, {"aws-us-gov", "us-gov-east-1"}, {"aws-cn", "cn-north-1"}, {"aws-cn", "cn-northwest-1"}} {
		add(w, "", "http-api")
	}
	add(where{"aws", "eu-central-2"}, "auto", "http-api")
	add(where{"aws", "eu-west-1"}, "auto", "function-url")
	add(where{"aws", "eu-west-1"}, "http-api", "http-api")
	add(where{"aws-us-gov", "us-gov-west-1"}, "http-api", "http-api")
	// Chosen explicitly, a function URL is rendered where Lambda offers
	// none; Lambda refuses it there (docs/template.md), and the deploy
	// test holds a rendering to it.
	add(where{"aws", "eu-central-2"}, "function-url", "function-url")
	urlResources := []string{"OperatorFunctionUrl", "OperatorUrlPermission", "OperatorUrlInvokePermission"}
	apiResources := []string{"OperatorHttpApi", "OperatorHttpApiIntegration", "OperatorHttpApiRoute", "OperatorHttpApiStage", "OperatorHttpApiPermission"}
	for _, c := range cases {
		e := template.Env{StackName: "prod", Region: c.region, Partition: c.partition, Account: "111122223333"}
		if c.endpoint != "" {
			e.Params = map[string]any{"OperatorEndpoint": c.endpoint}
		}
		tpl, err := template.Open(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s %s OperatorEndpoint=%q", c.partition, c.region, c.endpoint)
		httpAPI, _ := tpl.Conditions["OperatorUsesHttpApi"].(bool)
		if got := map[bool]string{true: "http-api", false: "function-url"}[httpAPI]; got != c.want {
			t.Errorf("%s: the template chooses %s, want %s", name, got, c.want)
			continue
		}
		want, other := urlResources, apiResources
		if c.want == "http-api" {
			want, other = apiResources, urlResources
		}
		for _, id := range want {
			if r, ok := tpl.Resources[id]; !ok || !conditionHolds(tpl, r) {
				t.Errorf("%s: %s is not created", name, id)
			}
		}
		for _, id := range other {
			if r, ok := tpl.Resources[id]; ok && conditionHolds(tpl, r) {
				t.Errorf("%s: %s is created too", name, id)
			}
		}
		kind, url := fmt.Sprint(tpl.Outputs["OperatorEndpointKind"].Value), fmt.Sprint(tpl.Outputs["OperatorEndpointUrl"].Value)
		suffix := map[string]string{"aws-cn": "amazonaws.com.cn"}[c.partition]
		if suffix == "" {
			suffix = "amazonaws.com"
		}
		wantURL := regexp.MustCompile(`^https://[a-z0-9]{32}\.lambda-url\.` + regexp.QuoteMeta(c.region) + `\.on\.aws/$`)
		if c.want == "http-api" {
			wantURL = regexp.MustCompile(`^https://` + operatorAPI + `\.execute-api\.` + regexp.QuoteMeta(c.region) + `\.` + regexp.QuoteMeta(suffix) + `/$`)
		}
		if kind != c.want || !wantURL.MatchString(url) {
			t.Errorf("%s: outputs OperatorEndpointKind %q, OperatorEndpointUrl %q; want %s at %s", name, kind, url, c.want, wantURL)
		}
	}
	if d := readDecl(t).Parameters["OperatorEndpoint"]; d == nil || fmt.Sprint(d.Default) != "auto" || fmt.Sprint(d.AllowedValues) != "[auto function-url http-api]" {
		t.Errorf("OperatorEndpoint: %+v, want auto (the default), function-url and http-api", d)
	}
}

// conditionHolds reports whether a resource's Condition holds (or it has none).
func conditionHolds(tpl *cloudformation.Template, r cloudformation.Resource) bool {
	raw, err := json.Marshal(r)
	if err != nil {
		return false
	}
	var res struct{ Condition string }
	_ = json.Unmarshal(raw, &res)
	v, _ := tpl.Conditions[res.Condition].(bool)
	return res.Condition == "" || v
}

// The operator function: the redrive code (built from ./functions/operator
// by the Makefile, as SAM's makefile builder calls it), with the redrive
// function's role, writer key and environment, both with the approvals'
// time to live and the trusted session roles; its own log group; no
// reserved concurrency, no event source, no schedule; and only the
// endpoint's resources name it, besides its alarms and a Deny.
func TestOperatorFunction(t *testing.T) {
	params := map[string]any{"ApprovalTTLSeconds": 3600.0, "TrustedSessionRoles": "AWSReservedSSO_Operators_0123456789abcdef,SAMLOps"}
	for _, c := range []struct {
		region   string
		endpoint string
	}{{"eu-west-1", ""}, {"eu-central-2", ""}, {"eu-west-1", "http-api"}} {
		p := maps.Clone(params)
		if c.endpoint != "" {
			p["OperatorEndpoint"] = c.endpoint
		}
		tpl, s := operatorIn(t, c.region, p)
		op := lookup(t, tpl.GetServerlessFunctionWithName, "OperatorFunction")
		rd := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
		if aws.ToString(op.FunctionName) != "prod-operate" || aws.ToString(op.Handler) != "bootstrap" || aws.ToString(op.Runtime) != "provided.al2023" ||
			!slices.Equal(op.Architectures, []string{"arm64"}) || op.AWSCloudFormationMetadata["BuildMethod"] != "makefile" {
			t.Errorf("%s: name %s handler %s runtime %s arch %v build %v", c.region, aws.ToString(op.FunctionName), aws.ToString(op.Handler), aws.ToString(op.Runtime), op.Architectures, op.AWSCloudFormationMetadata["BuildMethod"])
		}
		if aws.ToString(op.Role) != aws.ToString(rd.Role) || aws.ToInt(op.Timeout) != aws.ToInt(rd.Timeout) {
			t.Errorf("%s: role %s, timeout %d; want the redrive function's, %s and %d", c.region, aws.ToString(op.Role), aws.ToInt(op.Timeout), aws.ToString(rd.Role), aws.ToInt(rd.Timeout))
		}
		if !maps.Equal(op.Environment.Variables, rd.Environment.Variables) {
			t.Errorf("%s: environment %v, want the redrive function's %v", c.region, op.Environment.Variables, rd.Environment.Variables)
		}
		for _, fn := range []string{"OperatorFunction", "RedriveFunction"} {
			vars := lookup(t, tpl.GetServerlessFunctionWithName, fn).Environment.Variables
			if vars["APPROVAL_TTL_SECONDS"] != "3600" || vars["TRUSTED_SESSION_ROLES"] != p["TrustedSessionRoles"] {
				t.Errorf("%s: APPROVAL_TTL_SECONDS %q, TRUSTED_SESSION_ROLES %q; want the parameters'", fn, vars["APPROVAL_TTL_SECONDS"], vars["TRUSTED_SESSION_ROLES"])
			}
		}
		if op.ReservedConcurrentExecutions != nil || op.Events != nil || op.FunctionUrlConfig != nil {
			t.Errorf("%s: reserved concurrency %v, SAM events %v, SAM function URL %v: want none", c.region, op.ReservedConcurrentExecutions, op.Events, op.FunctionUrlConfig)
		}
		if !slices.Contains(meta(t, tpl, "OperatorFunction").DependsOn, "RedriveWriterMacPolicy") {
			t.Errorf("%s: the operator function does not depend on RedriveWriterMacPolicy: its first write could not prove its writer", c.region)
		}
		lg := lookup(t, tpl.GetLogsLogGroupWithName, "OperatorLogGroup")
		if aws.ToString(lg.LogGroupName) != "/aws/lambda/prod-operate" || aws.ToInt(lg.RetentionInDays) == 0 || aws.ToString(lg.KmsKeyId) == "" {
			t.Errorf("%s: log group %s retention %v key %q", c.region, aws.ToString(lg.LogGroupName), lg.RetentionInDays, aws.ToString(lg.KmsKeyId))
		}
		// Nothing but the endpoint invokes it: no mapping, no schedule,
		// no other permission, and every place that names it is the
		// function itself, its endpoint, an alarm watching it or a Deny.
		for _, r := range references(s, "prod-operate") {
			switch {
			case r.id == "OperatorFunction" && r.path == "Properties.FunctionName":
			case slices.Contains([]string{"OperatorFunctionUrl", "OperatorUrlPermission", "OperatorUrlInvokePermission", "OperatorHttpApi", "OperatorHttpApiIntegration", "OperatorHttpApiPermission"}, r.id):
			case r.typ == "AWS::CloudWatch::Alarm":
			case r.id == "OperatorPolicy" && !r.deny: // its grants: checked by TestOnlyTheOperatorEndpointReachesTheOperator
			case r.deny:
			default:
				t.Errorf("%s: %s (%s) names the operator function at %s: only its endpoint may reach it", c.region, r.id, r.typ, r.path)
			}
		}
		for _, id := range s.of("AWS::Lambda::EventSourceMapping") {
			if functionRef("prod-operate").MatchString(str(props(s.resources[id])["FunctionName"])) {
				t.Errorf("%s: mapping %s feeds the operator function", c.region, id)
			}
		}
		// Every function URL and every API integration of the stack is
		// the operator function's.
		for _, id := range s.of("AWS::Lambda::Url") {
			if got := str(props(s.resources[id])["TargetFunctionArn"]); got != operatorARN(c.region) {
				t.Errorf("%s: function URL %s targets %s", c.region, id, got)
			}
		}
		for _, id := range s.of("AWS::ApiGatewayV2::Integration") {
			if got := str(props(s.resources[id])["IntegrationUri"]); got != operatorARN(c.region) {
				t.Errorf("%s: integration %s targets %s", c.region, id, got)
			}
		}
	}
	// sam build calls make build-OperatorFunction; make build zips it.
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "build-OperatorFunction:\n\tCGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/operator\n") {
		t.Error("the Makefile has no build-OperatorFunction target building ./functions/operator")
	}
	if !regexp.MustCompile(`(?m)^FUNCTIONS := .*\boperator\b`).Match(raw) || !regexp.MustCompile(`(?m)^\.PHONY: (.*\\\n)*.*\bbuild-OperatorFunction\b`).Match(raw) {
		t.Error("the Makefile's FUNCTIONS (make build) or .PHONY lacks the operator function")
	}
}

// The endpoint renders as documented: the function URL with AuthType
// AWS_IAM on the operator function ($LATEST, no qualifier); the HTTP API
// (in a Region without function URLs under auto, and by choice) with one
// route, POST /, IAM-authorized, a Lambda proxy integration with payload
// format 2.0 (the function receives events.APIGatewayV2HTTPRequest), the
// $default stage deployed automatically, no access log.
func TestOperatorEndpointRenders(t *testing.T) {
	tpl, _ := operatorIn(t, "eu-west-1", nil)
	u := lookup(t, tpl.GetLambdaUrlWithName, "OperatorFunctionUrl")
	if u.AuthType != "AWS_IAM" || u.TargetFunctionArn != operatorARN("eu-west-1") || u.Qualifier != nil || u.Cors != nil {
		t.Errorf("function URL: AuthType %s, target %s, qualifier %v, CORS %v", u.AuthType, u.TargetFunctionArn, u.Qualifier, u.Cors)
	}
	for _, c := range []struct {
		region string
		params map[string]any
	}{{"eu-central-2", nil}, {"eu-west-1", map[string]any{"OperatorEndpoint": "http-api"}}} {
		tpl, _ := operatorIn(t, c.region, c.params)
		api := lookup(t, tpl.GetApiGatewayV2ApiWithName, "OperatorHttpApi")
		if aws.ToString(api.ProtocolType) != "HTTP" || api.Target != nil || api.RouteKey != nil || api.Body != nil || api.CredentialsArn != nil {
			t.Errorf("%s: API %+v: an HTTP API without a quick-create route, body or credentials", c.region, api)
		}
		routes := tpl.GetAllApiGatewayV2RouteResources()
		if len(routes) != 1 {
			t.Errorf("%s: %d routes, want POST / alone", c.region, len(routes))
		}
		r := lookup(t, tpl.GetApiGatewayV2RouteWithName, "OperatorHttpApiRoute")
		if r.ApiId != operatorAPI || r.RouteKey != "POST /" || aws.ToString(r.AuthorizationType) != "AWS_IAM" || aws.ToString(r.Target) != "integrations/"+operatorIntegration {
			t.Errorf("%s: route %s on %s, authorization %s, target %s", c.region, r.RouteKey, r.ApiId, aws.ToString(r.AuthorizationType), aws.ToString(r.Target))
		}
		in := lookup(t, tpl.GetApiGatewayV2IntegrationWithName, "OperatorHttpApiIntegration")
		if in.ApiId != operatorAPI || in.IntegrationType != "AWS_PROXY" || aws.ToString(in.IntegrationUri) != operatorARN(c.region) ||
			aws.ToString(in.PayloadFormatVersion) != "2.0" || in.CredentialsArn != nil {
			t.Errorf("%s: integration %+v", c.region, in)
		}
		st := lookup(t, tpl.GetApiGatewayV2StageWithName, "OperatorHttpApiStage")
		if st.ApiId != operatorAPI || st.StageName != "$default" || !aws.ToBool(st.AutoDeploy) || st.AccessLogSettings != nil {
			t.Errorf("%s: stage %s on %s, auto-deploy %v, access log %+v", c.region, st.StageName, st.ApiId, st.AutoDeploy, st.AccessLogSettings)
		}
	}
}

// The function's resource policy, statement by statement as Lambda writes
// each AWS::Lambda::Permission: with the function URL, the stack's own
// account (its root: its IAM policies decide) and nobody else, the URL
// only while its AuthType is AWS_IAM, the invoke only through the URL;
// with the HTTP API, API Gateway for the one route alone.
func TestOperatorResourcePolicy(t *testing.T) {
	const mallory = "arn:aws:iam::444455556666:user/mallory"
	const alice = "arn:aws:iam::111122223333:user/alice"
	for _, c := range []struct {
		region string
		params map[string]any
		want   []string
	}{
		{"eu-west-1", nil, []string{"OperatorUrlInvokePermission", "OperatorUrlPermission"}},
		{"eu-central-2", nil, []string{"OperatorHttpApiPermission"}},
		{"eu-west-1", map[string]any{"OperatorEndpoint": "http-api"}, []string{"OperatorHttpApiPermission"}},
	} {
		_, s := operatorIn(t, c.region, c.params)
		fn := operatorARN(c.region)
		statements := s.resourcePolicies(fn)
		var ids []string
		for _, st := range statements {
			ids = append(ids, st.from)
			if st.st["Principal"] == "*" {
				t.Errorf("%s: %s grants %s to everyone", c.region, st.from, st.st["Action"])
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, c.want) {
			t.Errorf("%s: the operator function's resource policy is %v, want %v", c.region, ids, c.want)
			continue
		}
		matches := func(q request, principal string) bool {
			for _, st := range statements {
				if o, key := applies(st.st, q, principal, env.Account); o == undecidable {
					t.Fatalf("%s: condition on %s not modeled", st.from, key)
				} else if o == matches {
					return true
				}
			}
			return false
		}
		withPrincipal := func(q request, p string) request {
			ctx := map[string]string{"aws:principalarn": p, "aws:securetransport": "true"}
			maps.Copy(ctx, q.Context)
			q.Context = ctx
			return q
		}
		if c.want[0] == "OperatorHttpApiPermission" {
			gw := "service:apigateway.amazonaws.com"
			call := request{Action: "lambda:InvokeFunction", Resource: fn, Context: map[string]string{"aws:sourcearn": routeARN(c.region), "aws:sourceaccount": env.Account}}
			if !matches(call, gw) {
				t.Errorf("%s: API Gateway may not invoke the function for the route %s", c.region, routeARN(c.region))
			}
			for _, other := range []string{
				"arn:aws:execute-api:" + c.region + ":111122223333:" + operatorAPI + "/$default/GET/",
				"arn:aws:execute-api:" + c.region + ":111122223333:" + operatorAPI + "/$default/POST/admin",
				"arn:aws:execute-api:" + c.region + ":111122223333:abcdefghij/$default/POST/",
				"arn:aws:execute-api:" + c.region + ":444455556666:" + operatorAPI + "/$default/POST/",
			} {
				q := call
				q.Context = map[string]string{"aws:sourcearn": other, "aws:sourceaccount": env.Account}
				if matches(q, gw) {
					t.Errorf("%s: API Gateway may invoke the function for %s", c.region, other)
				}
			}
			if matches(call, "service:events.amazonaws.com") || matches(withPrincipal(call, alice), alice) {
				t.Errorf("%s: the API's permission lets another principal than API Gateway invoke the function", c.region)
			}
			continue
		}
		for _, q := range urlCall(fn) {
			if !matches(withPrincipal(q, alice), alice) {
				t.Errorf("%s: the resource policy does not cover the account's %s through the URL", c.region, q)
			}
			if matches(withPrincipal(q, mallory), mallory) {
				t.Errorf("%s: the resource policy lets another account's principal %s", c.region, q)
			}
		}
		open := request{Action: "lambda:InvokeFunctionUrl", Resource: fn, Context: map[string]string{"lambda:functionurlauthtype": "NONE", "lambda:functionarn": fn}}
		if matches(withPrincipal(open, alice), alice) {
			t.Errorf("%s: the resource policy covers the URL with AuthType NONE", c.region)
		}
		for _, q := range directInvokes(fn) {
			if matches(withPrincipal(q, alice), alice) {
				t.Errorf("%s: the resource policy covers a direct %s", c.region, q)
			}
		}
	}
}

// Who may reach the operator function, and how: an OperatorPolicy holder
// (with the guardrail policies it goes with) calls the endpoint and
// nothing else, never invokes the function directly, never changes the
// URL, the API or the function's resource policy; an AuditorPolicy holder
// does none of it; no role of the stack may do any of it. Both endpoints,
// the HTTP API both where auto chooses it (eu-central-2) and by choice.
func TestOnlyTheOperatorEndpointReachesTheOperator(t *testing.T) {
	for _, c := range []struct {
		region string
		params map[string]any
		http   bool
	}{
		{"eu-west-1", nil, false},
		{"eu-central-2", nil, true},
		{"eu-west-1", map[string]any{"OperatorEndpoint": "http-api"}, true},
	} {
		name := fmt.Sprint(c.region, " ", c.params)
		_, s := operatorIn(t, c.region, c.params)
		fn := operatorARN(c.region)
		redrive := "arn:aws:lambda:" + c.region + ":111122223333:function:prod-redrive"
		route := request{Action: "execute-api:Invoke", Resource: routeARN(c.region)}
		otherRoutes := []request{
			{Action: "execute-api:Invoke", Resource: "arn:aws:execute-api:" + c.region + ":111122223333:" + operatorAPI + "/$default/GET/"},
			{Action: "execute-api:Invoke", Resource: "arn:aws:execute-api:" + c.region + ":111122223333:" + operatorAPI + "/$default/POST/admin"},
		}
		var endpoint, notAllowed []request
		if c.http {
			endpoint = []request{route}
			notAllowed = append(slices.Clone(otherRoutes), urlCall(fn)...)
		} else {
			endpoint = urlCall(fn)
			notAllowed = append(slices.Clone(otherRoutes), route,
				request{Action: "lambda:InvokeFunctionUrl", Resource: fn, Context: map[string]string{"lambda:functionurlauthtype": "NONE", "lambda:functionarn": fn}})
		}
		denied := slices.Concat(directInvokes(fn), urlChanges(fn))
		if c.http {
			denied = append(denied, apiChanges(c.region)...)
		}
		for _, q := range endpoint {
			if got := managedEffect(t, s, "OperatorPolicy", q); got != "allow" {
				t.Errorf("%s: OperatorPolicy: %s gives %q, want allow", name, q, got)
			}
			if got := managedEffect(t, s, "AuditorPolicy", q); got != "deny" {
				t.Errorf("%s: AuditorPolicy: %s gives %q, want an explicit deny (auditors do not act)", name, q, got)
			}
		}
		for _, q := range notAllowed {
			if got := managedEffect(t, s, "OperatorPolicy", q); got == "allow" {
				t.Errorf("%s: OperatorPolicy allows %s", name, q)
			}
		}
		for _, q := range denied {
			for _, policy := range []string{"OperatorPolicy", "AuditorPolicy"} {
				if got := managedEffect(t, s, policy, q); got != "deny" {
					t.Errorf("%s: %s (with %s): %s gives %q, want an explicit deny", name, policy, strings.Join(attachedWith(policy)[1:], ", "), q, got)
				}
			}
		}
		// What the denies leave alone: the redrive function's direct
		// invoke (unverified, for what needs no approval), reading the
		// API's configuration, another API.
		for _, q := range []request{
			{Action: "lambda:InvokeFunction", Resource: redrive},
			{Action: "apigateway:GET", Resource: "arn:aws:apigateway:" + c.region + "::/apis/" + operatorAPI + "/routes/" + operatorRoute},
			{Action: "apigateway:PATCH", Resource: "arn:aws:apigateway:" + c.region + "::/apis/abcdefghij/routes/abcdefg"},
		} {
			if got := managedEffect(t, s, "OperatorPolicy", q); got == "deny" {
				t.Errorf("%s: OperatorPolicy denies %s", name, q)
			}
		}
		// No role of the stack reaches the operator function or changes
		// its endpoint: no grant, whatever the resource policy names.
		for _, role := range s.of("AWS::IAM::Role") {
			for _, q := range slices.Concat(urlCall(fn), directInvokes(fn), urlChanges(fn), apiChanges(c.region), []request{route}, otherRoutes) {
				ctx := map[string]string{"aws:principalarn": s.roleARN(role), "aws:principalaccount": env.Account, "aws:securetransport": "true"}
				maps.Copy(ctx, q.Context)
				q.Context = ctx
				if why := s.decide(role, q); why == "" {
					t.Errorf("%s: %s may %s", name, role, q)
				}
			}
		}
	}
}

// Every function's errors and throttles page (the operator function's
// among them, TestFailuresThatNobodyWouldSee), its log group is encrypted
// with the key CloudWatch Logs may use for it, and the operator's alarms
// are named in the stack's alarm namespace.
func TestOperatorAlarmsAndLogs(t *testing.T) {
	tpl := open(t)
	for _, m := range []struct{ id, metric, name string }{
		{"OperatorErrorsAlarm", "Errors", "prod.operator-errors"},
		{"OperatorThrottlesAlarm", "Throttles", "prod.operator-throttles"},
	} {
		a := lookup(t, tpl.GetCloudWatchAlarmWithName, m.id)
		if aws.ToString(a.AlarmName) != m.name || aws.ToString(a.Namespace) != "AWS/Lambda" || aws.ToString(a.MetricName) != m.metric ||
			len(a.Dimensions) != 1 || a.Dimensions[0].Value != "prod-operate" || len(a.AlarmActions) == 0 {
			t.Errorf("%s: %s %s/%s on %v, actions %v", m.id, aws.ToString(a.AlarmName), aws.ToString(a.Namespace), aws.ToString(a.MetricName), a.Dimensions, a.AlarmActions)
		}
	}
	s := openStack(t, nil)
	found := false
	for _, st := range namedStatements("QuarantineKey", props(s.resources["QuarantineKey"])["KeyPolicy"], true) {
		if st.st["Sid"] == "LogsEncryptTheFunctionLogGroups" {
			found = strings.Contains(fmt.Sprint(st.st["Condition"]), "log-group:/aws/lambda/prod-operate")
		}
	}
	if !found {
		t.Error("the key policy does not let CloudWatch Logs encrypt /aws/lambda/prod-operate")
	}
}

// The deploy limits know where Lambda offers function URLs: a function
// URL chosen (OperatorEndpoint function-url) where it offers none is a
// problem the deploy test names, the same choice where it offers them is
// not; so is a permission's InvokedViaFunctionUrl on another action than
// lambda:InvokeFunction.
func TestDeployLimitsKnowWhereFunctionURLsAre(t *testing.T) {
	for _, c := range []struct {
		env  template.Env
		want bool
	}{
		{template.Env{Partition: "aws", Region: "eu-central-2"}, true},
		{template.Env{Partition: "aws-us-gov", Region: "us-gov-west-1"}, true},
		{template.Env{Partition: "aws", Region: "eu-central-1"}, false},
	} {
		e := deployEnv(c.env, "prod", map[string]any{"NamingMode": "generated", "AlarmEmail": "oncall@example.com", "OperatorEndpoint": "function-url"})
		tpl, extra, err := template.OpenWithUnmodeled(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(deployLimits(tpl, e, extra), func(p string) bool { return strings.Contains(p, "Lambda offers no function URLs there") })
		if found != c.want {
			t.Errorf("%s %s: a function URL named as a problem: %v, want %v", c.env.Partition, c.env.Region, found, c.want)
		}
		if !c.want {
			extra["OperatorUrlPermission"] = map[string]any{"InvokedViaFunctionUrl": true}
			if !slices.ContainsFunc(deployLimits(tpl, e, extra), func(p string) bool {
				return strings.Contains(p, "InvokedViaFunctionUrl true on lambda:InvokeFunctionUrl")
			}) {
				t.Errorf("InvokedViaFunctionUrl on lambda:InvokeFunctionUrl is not named as a problem")
			}
		}
	}
}
