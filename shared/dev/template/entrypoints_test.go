package template_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// Issue 26: the digest runs from a function of its own, so that nothing
// but the stream's event source mapping can invoke the stream handler.
// Before, the ledger function served both the stream and the schedule's
// {"action":"digest"}; LedgerDigestPermission let EventBridge invoke it,
// and whoever may events:PutTargets on the rule could set the target's
// Input to a forged stream batch, which the function took and locked into
// a segment for years.
//
// A function's resource policy is made of AWS::Lambda::Permission
// resources (SAM's Events and FunctionUrlConfig on a function generate
// them). An event source mapping invokes its function through Lambda's
// own service with the function's execution role, and needs none (the
// Lambda developer guide, "Lambda resource access permissions"). So the
// stream function must have no permission at all; EventBridge invokes a
// Lambda target through the function's resource policy, or through the
// target's RoleArn: no role of the stack may invoke the stream function.

// functionRef matches a string that names the function called name: its
// name, its ARN or partial ARN, with a qualifier or a wildcard after it.
func functionRef(name string) *regexp.Regexp {
	return regexp.MustCompile(`^(?:arn:aws[a-z-]*:lambda:[^:]*:[0-9]*:function:|[0-9]{12}:function:)?` + regexp.QuoteMeta(name) + `(?:[:*].*)?$`)
}

// reference is one place a resource names a function.
type reference struct {
	id, typ, path string
	// deny is true inside a policy statement whose Effect is Deny.
	deny bool
}

// references walks every resource's properties for strings that name the
// function.
func references(s *stack, name string) []reference {
	ref := functionRef(name)
	var out []reference
	var walk func(id, typ, path string, v any, deny bool)
	walk = func(id, typ, path string, v any, deny bool) {
		switch x := v.(type) {
		case map[string]any:
			if x["Effect"] == "Deny" {
				deny = true
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(id, typ, path+"."+k, x[k], deny)
			}
		case []any:
			for i, e := range x {
				walk(id, typ, fmt.Sprintf("%s[%d]", path, i), e, deny)
			}
		case string:
			if ref.MatchString(x) {
				out = append(out, reference{id, typ, path, deny})
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.resources)) {
		r := s.resources[id]
		walk(id, str(r["Type"]), "Properties", r["Properties"], false)
	}
	return out
}

func TestOnlyTheStreamMappingInvokesTheStreamFunction(t *testing.T) {
	const stream, digest = "prod-ledger", "prod-digest"
	const streamARN = "arn:aws:lambda:eu-west-1:111122223333:function:" + stream
	for _, params := range []map[string]any{
		nil,
		{"LedgerMappingEnabled": "false"},
		{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "ExtraSourceQueueArn": "arn:aws:sqs:eu-west-1:111122223333:legacy"},
	} {
		t.Run(fmt.Sprint(params), func(t *testing.T) {
			s := openStack(t, params)
			if n := str(props(s.resources["LedgerFunction"])["FunctionName"]); n != stream {
				t.Fatalf("the stream function is named %q", n)
			}
			if n := str(props(s.resources["DigestFunction"])["FunctionName"]); n != digest {
				t.Errorf("the digest function is named %q", n)
			}

			// No resource policy names the stream function: no
			// AWS::Lambda::Permission, no SAM event or function URL that
			// would generate one.
			for _, id := range s.of("AWS::Lambda::Permission") {
				if fn := str(props(s.resources[id])["FunctionName"]); functionRef(stream).MatchString(fn) {
					t.Errorf("%s (AWS::Lambda::Permission) lets %s invoke the stream function %s: only its mapping may", id, str(props(s.resources[id])["Principal"]), fn)
				}
			}
			for _, k := range []string{"Events", "FunctionUrlConfig"} {
				if v, ok := props(s.resources["LedgerFunction"])[k]; ok && v != nil {
					t.Errorf("LedgerFunction has %s %v: SAM makes a resource policy for it", k, v)
				}
			}
			for _, id := range s.of("AWS::Lambda::Url") {
				if fn := str(props(s.resources[id])["TargetFunctionArn"]); functionRef(stream).MatchString(fn) {
					t.Errorf("%s is a function URL of the stream function", id)
				}
			}

			// Every other place that names it is the function itself, its
			// one mapping, an alarm watching it, the digest function's
			// STREAM_FUNCTION_NAME, or a Deny: none of them can invoke it.
			var mappings []string
			for _, r := range references(s, stream) {
				switch {
				case r.id == "LedgerFunction" && r.path == "Properties.FunctionName":
				case r.typ == "AWS::Lambda::EventSourceMapping" && r.path == "Properties.FunctionName":
					mappings = append(mappings, r.id)
				case r.typ == "AWS::CloudWatch::Alarm":
				case r.id == "DigestFunction" && r.path == "Properties.Environment.Variables.STREAM_FUNCTION_NAME":
				case r.deny:
				default:
					t.Errorf("%s (%s) names the stream function at %s: nothing but its stream mapping may reach it", r.id, r.typ, r.path)
				}
			}
			if !slices.Equal(mappings, []string{"LedgerStreamMapping"}) {
				t.Errorf("the event source mappings of the stream function are %v, want LedgerStreamMapping alone", mappings)
			}
			if m := props(s.resources["LedgerStreamMapping"]); !strings.Contains(str(m["EventSourceArn"]), "/stream/") {
				t.Errorf("LedgerStreamMapping reads %s, not the table's stream", str(m["EventSourceArn"]))
			}

			// No role of the stack may invoke it (an EventBridge target's
			// RoleArn, a function calling it).
			for _, role := range s.of("AWS::IAM::Role") {
				for _, res := range []string{streamARN, streamARN + ":$LATEST"} {
					q := request{Action: "lambda:InvokeFunction", Resource: res, Context: map[string]string{"aws:securetransport": "true"}}
					if why := s.decide(role, q); why == "" {
						t.Errorf("%s may lambda:InvokeFunction the stream function (%s)", role, res)
					}
				}
			}

			// Every EventBridge target that names one of the ledger's
			// functions names the digest function, with the digest's input.
			ledgerTargets := 0
			for _, id := range append(s.of("AWS::Events::Rule"), s.of("AWS::Scheduler::Schedule")...) {
				p := props(s.resources[id])
				targets, _ := p["Targets"].([]any)
				if tg, ok := p["Target"].(map[string]any); ok {
					targets = append(targets, tg)
				}
				for _, tg := range targets {
					m, _ := tg.(map[string]any)
					arn := str(m["Arn"])
					if !functionRef(stream).MatchString(arn) && !functionRef(digest).MatchString(arn) {
						continue
					}
					ledgerTargets++
					if arn != "arn:aws:lambda:eu-west-1:111122223333:function:"+digest || str(m["Input"]) != `{"action":"digest"}` {
						t.Errorf("%s targets %s with input %q: a ledger target must be the digest function with {\"action\":\"digest\"}", id, arn, str(m["Input"]))
					}
					if str(m["RoleArn"]) != "" {
						t.Errorf("%s invokes the digest function with role %s: EventBridge needs only the function's permission", id, str(m["RoleArn"]))
					}
				}
			}
			if ledgerTargets == 0 {
				t.Error("no EventBridge rule targets the digest function: no digest would be signed")
			}

			// The digest function: no mapping feeds it, and only the
			// digest schedule may invoke it.
			for _, id := range s.of("AWS::Lambda::EventSourceMapping") {
				if fn := str(props(s.resources[id])["FunctionName"]); functionRef(digest).MatchString(fn) {
					t.Errorf("%s maps %s to the digest function: it takes no stream batch", id, str(props(s.resources[id])["EventSourceArn"]))
				}
			}
			perms := 0
			for _, id := range s.of("AWS::Lambda::Permission") {
				p := props(s.resources[id])
				if !functionRef(digest).MatchString(str(p["FunctionName"])) {
					continue
				}
				perms++
				if str(p["Action"]) != "lambda:InvokeFunction" || str(p["Principal"]) != "events.amazonaws.com" ||
					str(p["SourceArn"]) != "arn:aws:events:eu-west-1:111122223333:rule/prod-digest" {
					t.Errorf("%s lets %s %s the digest function from %q: only the digest schedule may invoke it", id, str(p["Principal"]), str(p["Action"]), str(p["SourceArn"]))
				}
			}
			if perms != 1 {
				t.Errorf("%d permissions name the digest function, want LedgerDigestPermission alone", perms)
			}
		})
	}
}

// No command the docs show sends the digest's or the baseline's event to
// the stream function, which refuses them: they go to the digest function.
func TestDocsInvokeTheDigestFunctionForActions(t *testing.T) {
	root := filepath.Join(filepath.Dir(template.Path()), "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "events", "README.md"))
	stream := regexp.MustCompile(`--function-name\s+\S*-ledger(\s|$)`)
	action := regexp.MustCompile(`"action"|ledger-digest\.json`)
	invokes := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// Commands may wrap across lines in prose: join each paragraph.
		for _, para := range strings.Split(string(raw), "\n\n") {
			para = strings.Join(strings.Fields(para), " ")
			for _, cmd := range strings.Split(para, "aws lambda invoke")[1:] {
				cmd, _, _ = strings.Cut(cmd, "`")
				if !action.MatchString(cmd) {
					continue
				}
				invokes++
				if stream.MatchString(cmd) {
					t.Errorf("%s: aws lambda invoke%s: the stream function refuses an action; invoke the digest function", filepath.Base(doc), cmd)
				}
			}
		}
	}
	if invokes == 0 {
		t.Fatal("no doc invokes the digest function: the check checks nothing")
	}

	// The alarms' descriptions, which a person paged reads first: every
	// function one names is one of the stack's (since the split there is
	// no "ledger function": the stream function refuses every action, the
	// digest function runs them), and one that gives an action's event
	// names the function that takes it, the digest function, and no
	// other by name. With every alarm there (an attached DLQ, the upgrade
	// window's reminder).
	tpl := openWith(t, map[string]any{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "LedgerMappingEnabled": "false"})
	names := map[string]string{} // the word a description calls a function by → its name
	for word, id := range map[string]string{"ingest": "IngestFunction", "sweeper": "SweeperFunction", "metrics": "MetricsFunction",
		"redrive": "RedriveFunction", "stream": "LedgerFunction", "digest": "DigestFunction", "operator": "OperatorFunction"} {
		names[word] = aws.ToString(lookup(t, tpl.GetServerlessFunctionWithName, id).FunctionName)
	}
	if fns := tpl.GetAllServerlessFunctionResources(); len(fns) != len(names) {
		t.Fatalf("the template has %d functions, the check knows %d: name the new one", len(fns), len(names))
	}
	named := regexp.MustCompile(`(\w+)(?:'s)? function\b`)
	actions := regexp.MustCompile(`\{"action":"(\w+)"\}`)
	withActions := 0
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		desc := aws.ToString(a.AlarmDescription)
		for _, m := range named.FindAllStringSubmatch(desc, -1) {
			if _, ok := names[m[1]]; !ok && m[1] != "the" && m[1] != "a" {
				t.Errorf("%s: its description names the %q function, which the stack does not have (%v): %s", id, m[1], slices.Sorted(maps.Keys(names)), desc)
			}
		}
		if !actions.MatchString(desc) {
			continue
		}
		withActions++
		if !strings.Contains(desc, "digest function") {
			t.Errorf("%s: its description gives an action's event (%v) without naming the digest function, which takes it: %s", id, actions.FindAllString(desc, -1), desc)
		}
		for word, name := range names {
			if word != "digest" && regexp.MustCompile(`(^|[^\w-])`+regexp.QuoteMeta(name)+`($|[^\w-])`).MatchString(desc) {
				t.Errorf("%s: its description gives an action's event and names %s, the %s function: %s", id, name, word, desc)
			}
		}
	}
	if withActions == 0 {
		t.Fatal("no alarm description gives an action's event: the check checks nothing")
	}
	// FailedInvocationsAlarm names the runs of every function whose
	// failures Lambda sends to the failed-invocations queue.
	failed := aws.ToString(lookup(t, tpl.GetCloudWatchAlarmWithName, "FailedInvocationsAlarm").AlarmDescription)
	queue := aws.ToString(lookup(t, tpl.GetSQSQueueWithName, "FailedInvocationsQueue").QueueName)
	runs := map[string]string{names["redrive"]: "policies", names["sweeper"]: "sweeper", names["metrics"]: "metrics", names["digest"]: "digest"}
	configs := 0
	for id, c := range tpl.GetAllLambdaEventInvokeConfigResources() {
		if c.DestinationConfig == nil || c.DestinationConfig.OnFailure == nil || !strings.HasSuffix(c.DestinationConfig.OnFailure.Destination, ":"+queue) {
			continue
		}
		configs++
		if word, ok := runs[c.FunctionName]; !ok || !strings.Contains(failed, word) {
			t.Errorf("%s sends %s's failures to %s; FailedInvocationsAlarm's description does not name its runs (%q): %s", id, c.FunctionName, queue, word, failed)
		}
	}
	if configs == 0 {
		t.Error("no function sends its failures to the failed-invocations queue: the check checks nothing")
	}
}
