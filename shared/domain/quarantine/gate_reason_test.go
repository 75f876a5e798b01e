package quarantine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// A schema reason names only what the schema declares: map keys (under
// additionalProperties or patternProperties) are "*", whatever they hold;
// array indices and declared properties stay, through $ref and recursion.
func TestSchemaReasonMasksUndeclaredKeys(t *testing.T) {
	t.Parallel()
	items := compileSchema(t, `{
		"type":"object",
		"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},
		"$defs":{"item":{"type":"object","properties":{
			"ndc":{"type":"string","pattern":"^x"},
			"attrs":{"type":"object","patternProperties":{"^a":{"type":"integer"}},"additionalProperties":{"type":"string"}}}}}}`)
	tree := compileSchema(t, `{
		"$ref":"#/$defs/node",
		"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":{"type":"integer"}}}}`)
	secret := "SECRET" + strings.Repeat("k", 1000)
	for _, c := range []struct {
		name   string
		sch    *jsonschema.Schema
		body   string
		reason string
	}{
		{"declared path", items, `{"items":[{"ndc":"y"}]}`, "schema /items/0/ndc pattern"},
		{"digits as a map key", items, `{"items":[{"ndc":"x","attrs":{"98765":5}}]}`, "schema /items/0/attrs/* type"},
		{"pattern property", items, `{"items":[{"ndc":"x","attrs":{"a` + secret + `":"s"}}]}`, "schema /items/0/attrs/* type"},
		{"additional property", items, `{"items":[{"ndc":"x","attrs":{"` + secret + `":5}}]}`, "schema /items/0/attrs/* type"},
		{"recursive schema", tree, `{"kids":[{"kids":[{"` + secret + `":"s"}]}]}`, "schema /kids/0/kids/0/* type"},
	} {
		src := &quarantine.Source{Name: "s", Schema: c.sch, SchemaVersion: "s.v1"}
		v := src.Check([]byte(c.body))
		cl := quarantine.Classify(src, nil, v)
		if v.Valid || v.Reason != c.reason || strings.Contains(cl.Signature, "secret") || strings.Contains(cl.Signature, "98765") {
			t.Errorf("%s: reason %q, signature %q; want %q", c.name, v.Reason, cl.Signature, c.reason)
		}
	}
}
