package dlqctl

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The failure detail without payload values. A record's failure_detail is
// the schema validator's own message, which quotes payload values (a
// pattern's, a const's, a minimum's): it is shown only on the audited path
// (show --payload). Elsewhere show re-validates the stored body and prints
// each failing leaf as its location and what the schema wants.

// Undeclared stands for an object key the schema does not declare: a
// payload key, which is data.
const Undeclared = "(an undeclared property)"

// DetailLine is one failing leaf of a validation: where, which keyword, and
// a description from the schema (or the structure) only.
type DetailLine struct {
	Location string `json:"location"`
	Keyword  string `json:"keyword"`
	Problem  string `json:"problem,omitempty"`
}

func (l DetailLine) String() string {
	if l.Problem == "" {
		return l.Location + ": " + l.Keyword
	}
	return l.Location + ": " + l.Keyword + ": " + l.Problem
}

// maxSchemaText bounds what a line quotes from the schema (an enum, a const).
const maxSchemaText = 200

// ValueFreeDetail describes the failing leaves of ve, a validation of doc,
// sorted and without duplicates. Locations name array indices and the
// object keys in declared (quarantine.DeclaredProperties); any other key
// prints as Undeclared. Descriptions carry only what the schema says or
// the structure shows (types, counts of nothing payload-made), never a
// string or number of the payload; a kind it does not know prints its
// keyword location alone.
func ValueFreeDetail(ve *jsonschema.ValidationError, doc any, declared map[string]bool) []DetailLine {
	var out []DetailLine
	seen := map[DetailLine]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		l := describeLeaf(e, declared)
		l.Location = pointer(quarantine.MaskLocation(e.InstanceLocation, doc, declared, Undeclared))
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	if ve != nil {
		walk(ve)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Location != out[j].Location {
			return out[i].Location < out[j].Location
		}
		return out[i].Keyword+out[i].Problem < out[j].Keyword+out[j].Problem
	})
	return out
}

// describeLeaf names e's keyword and what the schema wants there.
func describeLeaf(e *jsonschema.ValidationError, declared map[string]bool) DetailLine {
	kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
	l := DetailLine{Keyword: kw}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		word := "properties"
		if len(k.Missing) == 1 {
			word = "property"
		}
		l.Problem = "missing " + word + " " + strings.Join(k.Missing, ", ")
	case *kind.DependentRequired:
		l.Problem = fmt.Sprintf("with property %s, missing %s", k.Prop, strings.Join(k.Missing, ", "))
	case *kind.Dependency:
		l.Problem = fmt.Sprintf("with property %s, missing %s", k.Prop, strings.Join(k.Missing, ", "))
	case *kind.Type:
		l.Problem = fmt.Sprintf("got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, schemaJSON(w))
		}
		l.Problem = "not one of " + quarantine.Clip(strings.Join(want, ", "), maxSchemaText)
	case *kind.Const:
		l.Problem = "not " + quarantine.Clip(schemaJSON(k.Want), maxSchemaText)
	case *kind.Pattern:
		l.Problem = "does not match " + k.Want
	case *kind.Format:
		l.Problem = "not a valid " + k.Want
	case *kind.Minimum:
		l.Problem = "below the minimum " + ratString(k.Want)
	case *kind.Maximum:
		l.Problem = "above the maximum " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		l.Problem = "not above " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		l.Problem = "not below " + ratString(k.Want)
	case *kind.MultipleOf:
		l.Problem = "not a multiple of " + ratString(k.Want)
	case *kind.MinLength:
		l.Problem = fmt.Sprintf("shorter than %d characters", k.Want)
	case *kind.MaxLength:
		l.Problem = fmt.Sprintf("longer than %d characters", k.Want)
	case *kind.MinItems:
		l.Problem = fmt.Sprintf("fewer than %d items", k.Want)
	case *kind.MaxItems:
		l.Problem = fmt.Sprintf("more than %d items", k.Want)
	case *kind.MinProperties:
		l.Problem = fmt.Sprintf("fewer than %d properties", k.Want)
	case *kind.MaxProperties:
		l.Problem = fmt.Sprintf("more than %d properties", k.Want)
	case *kind.AdditionalProperties:
		names := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			names[i] = Undeclared
			if declared[p] {
				names[i] = p
			}
		}
		sort.Strings(names)
		l.Problem = "not allowed: " + strings.Join(names, ", ")
	case *kind.AdditionalItems:
		l.Problem = "more items than the schema allows"
	case *kind.PropertyNames:
		name := Undeclared
		if declared[k.Property] {
			name = k.Property
		}
		l.Problem = "a property name fails it: " + name
	case *kind.UniqueItems:
		l.Problem = fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		l.Problem = "no item matches"
	case *kind.MinContains:
		l.Problem = fmt.Sprintf("fewer than %d items match contains", k.Want)
	case *kind.MaxContains:
		l.Problem = fmt.Sprintf("more than %d items match contains", k.Want)
	case *kind.ContentEncoding:
		l.Problem = "not valid " + k.Want
	case *kind.ContentMediaType:
		l.Problem = "not valid " + k.Want
	case *kind.Not:
		l.Keyword, l.Problem = "not", "matches the schema it must not match"
	case *kind.FalseSchema:
		l.Keyword, l.Problem = "false", "no value is allowed here"
	case *kind.AnyOf:
		l.Problem = "matches none of the subschemas"
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			l.Problem = fmt.Sprintf("matches more than one subschema (%s)", joinInts(k.Subschemas))
		} else {
			l.Problem = "matches none of the subschemas"
		}
	default:
		// A kind not known here: only where in the schema it failed.
		l.Keyword, l.Problem = keywordLocation(e), ""
	}
	if l.Keyword == "" {
		l.Keyword = keywordLocation(e)
	}
	return l
}

// keywordLocation is the schema location of e's keyword: the fragment of
// its schema URL and its keyword path (the schema's, never the payload's).
func keywordLocation(e *jsonschema.ValidationError) string {
	loc := "#"
	if _, frag, ok := strings.Cut(e.SchemaURL, "#"); ok {
		loc += frag
	}
	if kw := e.ErrorKind.KeywordPath(); len(kw) > 0 {
		loc += "/" + strings.Join(kw, "/")
	}
	return loc
}

// pointer writes segments as a JSON pointer ("/" for the document itself).
func pointer(segs []string) string {
	if len(segs) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		if s == Undeclared {
			b.WriteString(s)
			continue
		}
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
	}
	return b.String()
}

// schemaJSON prints a value the schema holds (an enum member, a const).
func schemaJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// ratString prints a schema bound: an integer as such, else a decimal.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := new(big.Float).SetPrec(128).SetRat(r).Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
