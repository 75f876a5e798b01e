package template

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7"
)

// The typed parse decodes the template, and the embedded stack's alarm
// fixture, exactly as goformation.ParseJSONWithOptions does.
func TestParseMatchesGoformation(t *testing.T) {
	env := Env{StackName: "dlqq-parse", Region: "us-east-1", Account: "123456789012"}
	for _, path := range []string{Path(), filepath.Join("..", "embedded", "testdata", "alarms.yaml")} {
		ours, err := Open(path, env)
		if err != nil {
			t.Fatal(err)
		}
		parse = goformation.ParseJSONWithOptions
		theirs, err := Open(path, env)
		parse = parseJSON
		if err != nil {
			t.Fatal(err)
		}
		if len(ours.Resources) == 0 || len(ours.Resources) != len(theirs.Resources) {
			t.Fatalf("%s: %d resources, goformation %d", path, len(ours.Resources), len(theirs.Resources))
		}
		for id, r := range theirs.Resources {
			if !reflect.DeepEqual(ours.Resources[id], r) {
				t.Errorf("%s: resource %s decodes differently:\n ours %#v\n goformation %#v", path, id, ours.Resources[id], r)
			}
		}
		ours.Resources, theirs.Resources = nil, nil
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s: the template decodes differently:\n ours %#v\n goformation %#v", path, ours, theirs)
		}
	}
}

// A resource without a type, or of a type goformation does not know, is
// refused; a custom resource keeps its type.
func TestParseRefusesUnknownTypes(t *testing.T) {
	for doc, want := range map[string]string{
		`{"Resources":{"A":{"Properties":{}}}}`:                                  "resource A: no Type",
		`{"Resources":{"A":{"Type":"AWS::No::Such"}}}`:                           "resource A: goformation does not know type AWS::No::Such",
		`{"Resources":{"A":{"Type":"AWS::SQS::Queue","Properties":{"Nope":1}}}}`: "unknown field",
	} {
		_, err := parseJSON([]byte(doc), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", doc, err, want)
		}
	}
	tpl, err := parseJSON([]byte(`{"Resources":{"C":{"Type":"Custom::Thing","Properties":{"X":1}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := tpl.Resources["C"].(interface{ AWSCloudFormationType() string }); !ok || c.AWSCloudFormationType() != "Custom::Thing" {
		t.Fatalf("custom resource decoded as %#v", tpl.Resources["C"])
	}
}

// The physical names come from the Name properties as goformation's typed
// resources give them (the way they were read before physicalNames read
// them from the resolved JSON), or the names CloudFormation would make.
// (No test of this package runs in parallel: the parse is swapped here.)
func TestPhysicalNamesMatchTheTypedTemplate(t *testing.T) {
	env := Env{StackName: "dlqq-names", Region: "us-east-1", Account: "123456789012"}
	_, names, err := OpenNamed(Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	parse = goformation.ParseJSONWithOptions
	typed, err := Open(Path(), env)
	parse = parseJSON
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for id, q := range typed.GetAllSQSQueueResources() {
		want[id] = deref(q.QueueName, "")
	}
	for id, tb := range typed.GetAllDynamoDBTableResources() {
		want[id] = deref(tb.TableName, "")
	}
	for id, b := range typed.GetAllS3BucketResources() {
		want[id] = deref(b.BucketName, "")
	}
	for id, lg := range typed.GetAllLogsLogGroupResources() {
		want[id] = deref(lg.LogGroupName, "/aws/lambda/"+id)
	}
	for id, f := range typed.GetAllServerlessFunctionResources() {
		want[id] = deref(f.FunctionName, env.StackName+"-"+id)
	}
	for id, a := range typed.GetAllCloudWatchAlarmResources() {
		want[id] = deref(a.AlarmName, "")
	}
	for id, a := range typed.GetAllCloudWatchCompositeAlarmResources() {
		want[id] = deref(a.AlarmName, "")
	}
	for id, rule := range typed.GetAllEventsRuleResources() {
		if rule.Name != nil {
			want[id] = *rule.Name
		}
	}
	// A key's alias, by the alias's own logical id (keyAliases reads the
	// template's unresolved TargetKeyId).
	raw, err := os.ReadFile(Path())
	if err != nil {
		t.Fatal(err)
	}
	long, err := yamlToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(long, &doc); err != nil {
		t.Fatal(err)
	}
	aliasOf, aliases := keyAliases(doc.Resources), typed.GetAllKMSAliasResources()
	for id := range typed.GetAllKMSKeyResources() {
		want[id] = KeyAlias(env.StackName, id)
		if a, ok := aliases[aliasOf[id]]; ok && a.AliasName != "" {
			want[id] = a.AliasName
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d named resources", len(want))
	}
	for id, w := range want {
		if names[id] != w {
			t.Errorf("%s: named %q, the typed template says %q", id, names[id], w)
		}
	}
}
