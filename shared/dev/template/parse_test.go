package template

import (
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
