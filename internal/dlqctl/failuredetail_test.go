package dlqctl_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/message"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
)

// Every kind ValueFreeDetail handles, with a payload value in Got that must
// not appear: the line names the location, the keyword and only what the
// schema wants.
func TestValueFreeDetailPerKind(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-7731"
	secretNum := big.NewRat(987654321, 1)
	doc := map[string]any{
		"lot": secret, "qty": 5, "items": []any{map[string]any{"lot": secret}}, secret: "x",
		"tags": []any{"a", "a"},
	}
	declared := map[string]bool{"lot": true, "qty": true, "items": true, "tags": true, "note": true}
	rat := func(n, d int64) *big.Rat { return big.NewRat(n, d) }
	for _, c := range []struct {
		loc  []string
		kind jsonschema.ErrorKind
		want string
	}{
		{nil, &kind.Required{Missing: []string{"event_id", "lot"}}, "/: required: missing properties event_id, lot"},
		{nil, &kind.Required{Missing: []string{"lot"}}, "/: required: missing property lot"},
		{nil, &kind.DependentRequired{Prop: "lot", Missing: []string{"ndc"}}, "/: dependentRequired/lot: with property lot, missing ndc"},
		{nil, &kind.Dependency{Prop: "lot", Missing: []string{"ndc"}}, "/: dependency/lot: with property lot, missing ndc"},
		{[]string{"qty"}, &kind.Type{Got: "string", Want: []string{"integer", "null"}}, "/qty: type: got string, want integer or null"},
		{[]string{"lot"}, &kind.Enum{Got: secret, Want: []any{"CII", "CIII"}}, `/lot: enum: not one of "CII", "CIII"`},
		{[]string{"lot"}, &kind.Const{Got: secret, Want: "L1"}, `/lot: const: not "L1"`},
		{[]string{"lot"}, &kind.Pattern{Got: secret, Want: "^L[0-9]+$"}, "/lot: pattern: does not match ^L[0-9]+$"},
		{[]string{"lot"}, &kind.Format{Got: secret, Want: "date-time", Err: errors.New(secret)}, "/lot: format: not a valid date-time"},
		{[]string{"qty"}, &kind.Minimum{Got: secretNum, Want: rat(1, 1)}, "/qty: minimum: below the minimum 1"},
		{[]string{"qty"}, &kind.Maximum{Got: secretNum, Want: rat(1, 4)}, "/qty: maximum: above the maximum 0.25"},
		{[]string{"qty"}, &kind.ExclusiveMinimum{Got: secretNum, Want: rat(0, 1)}, "/qty: exclusiveMinimum: not above 0"},
		{[]string{"qty"}, &kind.ExclusiveMaximum{Got: secretNum, Want: rat(10, 1)}, "/qty: exclusiveMaximum: not below 10"},
		{[]string{"qty"}, &kind.MultipleOf{Got: secretNum, Want: rat(1, 100)}, "/qty: multipleOf: not a multiple of 0.01"},
		{[]string{"lot"}, &kind.MinLength{Got: 987654321, Want: 1}, "/lot: minLength: shorter than 1 characters"},
		{[]string{"lot"}, &kind.MaxLength{Got: 987654321, Want: 64}, "/lot: maxLength: longer than 64 characters"},
		{[]string{"items"}, &kind.MinItems{Got: 987654321, Want: 2}, "/items: minItems: fewer than 2 items"},
		{[]string{"items"}, &kind.MaxItems{Got: 987654321, Want: 1}, "/items: maxItems: more than 1 items"},
		{nil, &kind.MinProperties{Got: 987654321, Want: 9}, "/: minProperties: fewer than 9 properties"},
		{nil, &kind.MaxProperties{Got: 987654321, Want: 2}, "/: maxProperties: more than 2 properties"},
		{nil, &kind.AdditionalProperties{Properties: []string{secret, "note"}}, "/: additionalProperties: not allowed: (an undeclared property), note"},
		{[]string{"items"}, &kind.AdditionalItems{Count: 1}, "/items: additionalItems: more items than the schema allows"},
		{nil, &kind.PropertyNames{Property: secret}, "/: propertyNames: a property name fails it: (an undeclared property)"},
		{[]string{"tags"}, &kind.UniqueItems{Duplicates: [2]int{0, 1}}, "/tags: uniqueItems: items 0 and 1 are equal"},
		{[]string{"items"}, &kind.Contains{}, "/items: contains: no item matches"},
		{[]string{"items"}, &kind.MinContains{Got: []int{0}, Want: 2}, "/items: minContains: fewer than 2 items match contains"},
		{[]string{"items"}, &kind.MaxContains{Got: []int{0, 1}, Want: 1}, "/items: maxContains: more than 1 items match contains"},
		{[]string{"lot"}, &kind.ContentEncoding{Want: "base64", Err: errors.New(secret)}, "/lot: contentEncoding: not valid base64"},
		{[]string{"lot"}, &kind.ContentMediaType{Got: []byte(secret), Want: "application/json", Err: errors.New(secret)}, "/lot: contentMediaType: not valid application/json"},
		{[]string{"qty"}, &kind.Not{}, "/qty: not: matches the schema it must not match"},
		{[]string{"lot"}, &kind.FalseSchema{}, "/lot: false: no value is allowed here"},
		{[]string{"lot"}, &kind.AnyOf{}, "/lot: anyOf: matches none of the subschemas"},
		{[]string{"lot"}, &kind.OneOf{}, "/lot: oneOf: matches none of the subschemas"},
		{[]string{"lot"}, &kind.OneOf{Subschemas: []int{0, 2}}, "/lot: oneOf: matches more than one subschema (0, 2)"},
		// Locations: indices stay, undeclared keys are masked, a key that
		// cannot be followed is masked.
		{[]string{"items", "0", "lot"}, &kind.Pattern{Got: secret, Want: "^L"}, "/items/0/lot: pattern: does not match ^L"},
		{[]string{secret}, &kind.Type{Got: "string", Want: []string{"number"}}, "/(an undeclared property): type: got string, want number"},
		{[]string{"note", "lot"}, &kind.Type{Got: "string", Want: []string{"number"}}, "/note/(an undeclared property): type: got string, want number"},
		// A kind not known here prints its keyword location alone.
		{[]string{"lot"}, unknown{secret}, "/lot: #/properties/lot/x-custom"},
	} {
		ve := &jsonschema.ValidationError{SchemaURL: "mem:///s.json#/properties/lot", InstanceLocation: c.loc, ErrorKind: c.kind}
		lines := dlqctl.ValueFreeDetail(ve, doc, declared)
		if len(lines) != 1 || lines[0].String() != c.want {
			t.Errorf("%T at %v: got %q, want %q", c.kind, c.loc, lines, c.want)
			continue
		}
		if s := fmt.Sprint(lines); strings.Contains(s, secret) || strings.Contains(s, "987654321") {
			t.Errorf("%T: a payload value in %s", c.kind, s)
		}
	}
}

// unknown is an ErrorKind this package does not know.
type unknown struct{ got string }

func (unknown) KeywordPath() []string { return []string{"x-custom"} }
func (u unknown) LocalizedString(*message.Printer) string {
	return u.got
}

// On a real validation (the embedded inventory schema) every failing leaf
// is named by location and keyword, and no payload value or payload key
// appears, though the validator's own message quotes them.
func TestValueFreeDetailOfARealValidation(t *testing.T) {
	t.Parallel()
	sch, _, err := schemas.Compile("inventory-movement.v1")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"event_id":"e1","ndc":"SECRET-NDC-9","quantity_delta":0,"schedule":"SECRET-SCHED","facility":"F",` +
		`"occurred_at":"SECRET-TIME","SECRET-KEY":1,"note":42}`
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	var ve *jsonschema.ValidationError
	if err := sch.Validate(doc); !errors.As(err, &ve) {
		t.Fatalf("want a validation error, got %v", err)
	}
	for _, s := range []string{"SECRET-NDC-9", "SECRET-TIME", "SECRET-KEY"} {
		if !strings.Contains(ve.Error(), s) {
			t.Fatalf("the test needs the validator to quote %s: %s", s, ve.Error())
		}
	}
	var got []string
	lines := dlqctl.ValueFreeDetail(ve, doc, quarantine.DeclaredProperties(sch))
	if s := fmt.Sprint(lines); strings.Contains(s, "SECRET") {
		t.Fatalf("a payload value in %s", s)
	}
	for _, l := range dlqctl.ValueFreeDetail(ve, doc, quarantine.DeclaredProperties(sch)) {
		got = append(got, l.String())
	}
	want := []string{
		"/: additionalProperties: not allowed: (an undeclared property)",
		"/: required: missing property lot",
		"/ndc: pattern: does not match ^[0-9]{4,5}-[0-9]{3,4}-[0-9]{1,2}$",
		"/note: type: got number, want string",
		"/occurred_at: format: not a valid date-time",
		"/quantity_delta: not: matches the schema it must not match",
		`/schedule: enum: not one of "CII", "CIII", "CIV", "CV"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
