package quarantine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// MaxJSONDepth is the deepest JSON nesting the gate accepts. Deeper bodies are
// quarantined as validation failures without being decoded recursively.
const MaxJSONDepth = 64

// StageGate is the stage recorded for failures found by the validation gate.
const StageGate = "gate"

// Gate reasons. They are low-cardinality on purpose: they become part of the
// failure signature and appear in logs, so they never carry payload values.
const (
	ReasonEmpty        = "empty body"
	ReasonNotUTF8      = "body is not valid utf-8"
	ReasonNotJSON      = "body is not json"
	ReasonTooDeep      = "json nesting too deep"
	ReasonDuplicateKey = "duplicate json key"
)

// Source describes one source queue: where its messages come from, how their
// idempotency key is found and which schema they must pass.
type Source struct {
	// Name is the source queue name.
	Name string
	// ARN is the source queue ARN.
	ARN string
	// DLQName is the dead-letter queue that receives this source's failures.
	DLQName string
	// IdempotencyPointer is an RFC 6901 JSON pointer to the payload field that
	// holds the idempotency key ("" to skip this step).
	IdempotencyPointer string
	// Schema validates payloads; nil means any well-formed JSON passes.
	Schema *jsonschema.Schema
	// SchemaVersion names the schema in failure signatures.
	SchemaVersion string
	// Opaque marks bodies that are not JSON (no JSON checks at all).
	Opaque bool
	// RedriveCap is the number of redrives before a record is parked as poison.
	RedriveCap int
	// SettleWindow, when set, is the shortest a replay into this source's
	// queue must stay out of the DLQ before its record is RESOLVED: a run
	// settles with the longest of it, the function's window and the one
	// the queue's attributes require.
	SettleWindow time.Duration
	// FourEyes holds the risks whose actions need a second, different
	// verified principal's approval on this source (nil: every risk).
	// A risk that always needs one (Risk.AlwaysFourEyes) does whatever
	// it holds.
	FourEyes map[Risk]bool
}

// NeedsSecondPerson reports whether an action of risk r on s needs a
// second principal's approval: always for RiskRetarget.
func (s *Source) NeedsSecondPerson(r Risk) bool {
	if s.FourEyes == nil || r.AlwaysFourEyes() {
		return true
	}
	return s.FourEyes[r]
}

// Verdict is the outcome of the validation gate for one body.
type Verdict struct {
	Valid bool
	// Stage and Reason are low-cardinality; Detail may quote the payload and
	// is stored only in the record, never logged.
	Stage  string
	Reason string
	Detail string
	// Failing names every failing leaf of a schema validation, sorted, by
	// instance location and keyword, with the names a "required" misses
	// (the schema's own words, never payload values): "schema /ndc
	// pattern", "schema / required: lot, event_id".
	Failing []string
	// Doc is the decoded JSON document when the body is well-formed JSON.
	Doc any
}

func invalid(reason, detail string) Verdict {
	return Verdict{Stage: StageGate, Reason: reason, Detail: detail}
}

// Check runs the validation gate: the same checks at ingest and before every
// redrive. It never panics on any input.
func (s *Source) Check(body []byte) Verdict {
	if len(body) == 0 {
		return invalid(ReasonEmpty, "")
	}
	if !utf8.Valid(body) {
		return invalid(ReasonNotUTF8, "")
	}
	if s.Opaque {
		return Verdict{Valid: true}
	}
	doc, reason, detail := decodeJSON(body)
	if reason != "" {
		return invalid(reason, detail)
	}
	if s.Schema == nil {
		return Verdict{Valid: true, Doc: doc}
	}
	if err := s.Schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Verdict{Stage: StageGate, Reason: "schema error", Detail: err.Error(), Doc: doc}
		}
		leaves, failing := schemaLeaves(s.Schema, ve, doc)
		return Verdict{Stage: StageGate, Reason: Clip(leaves[0], MaxReasonBytes), Detail: ve.Error(), Failing: failing, Doc: doc}
	}
	return Verdict{Valid: true, Doc: doc}
}

// schemaLeaves names each failing leaf by instance location and keyword,
// never by value, sorted: the first is the Reason, so the signature stays
// low-cardinality. The location names only what the schema itself names:
// an object key that no "properties" of the schema declares (a map key,
// under additionalProperties or patternProperties) is payload data and
// becomes "*"; array indices stay. failing is the same with the property
// names a "required" misses (the schema's words), without duplicates
// (Verdict.Failing).
func schemaLeaves(sch *jsonschema.Schema, ve *jsonschema.ValidationError, doc any) (leaves, failing []string) {
	names := declaredProperties(sch)
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
			if kw == "" {
				// Some kinds (not) report no keyword path; their type names it.
				kind := fmt.Sprintf("%T", e.ErrorKind)
				kw = strings.ToLower(kind[strings.LastIndexByte(kind, '.')+1:])
			}
			leaf := "schema /" + strings.Join(MaskLocation(e.InstanceLocation, doc, names, "*"), "/") + " " + kw
			leaves = append(leaves, leaf)
			if req, ok := e.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
				leaf += ": " + strings.Join(req.Missing, ", ") // the schema's required names
			}
			failing = append(failing, leaf)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	sort.Strings(failing)
	return leaves, slices.Compact(failing)
}

// MaskLocation returns loc (a JSON pointer's segments) with every object
// key not in names (the properties the schema declares) replaced by mask.
// It follows loc through doc to tell object keys from array indices; a
// segment it cannot follow is masked too. What is left comes from the
// schema or the document's shape, never from payload values.
func MaskLocation(loc []string, doc any, names map[string]bool, mask string) []string {
	out := make([]string, len(loc))
	cur, known := doc, true
	for i, seg := range loc {
		out[i] = mask
		if !known {
			continue
		}
		switch v := cur.(type) {
		case []any:
			if n, err := strconv.Atoi(seg); err == nil && n >= 0 && n < len(v) && strconv.Itoa(n) == seg {
				out[i], cur = seg, v[n]
				continue
			}
		case map[string]any:
			if names[seg] {
				out[i] = seg
			}
			if next, ok := v[seg]; ok {
				cur = next
				continue
			}
		}
		known = false
	}
	return out
}

// declared caches, per compiled schema, the property names its graph
// declares.
var declared sync.Map // *jsonschema.Schema → map[string]bool

// declaredProperties returns the property names declared anywhere in the
// graph of sch (every "properties" key of every schema reachable from it),
// walked once per schema with cycle protection.
func declaredProperties(sch *jsonschema.Schema) map[string]bool {
	if v, ok := declared.Load(sch); ok {
		return v.(map[string]bool)
	}
	names := map[string]bool{}
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{sch}
	push := func(ss ...*jsonschema.Schema) {
		for _, s := range ss {
			if s != nil && !seen[s] {
				seen[s] = true
				stack = append(stack, s)
			}
		}
	}
	pushAny := func(v any) {
		switch t := v.(type) {
		case *jsonschema.Schema:
			push(t)
		case []*jsonschema.Schema:
			push(t...)
		}
	}
	seen[sch] = true
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for name, p := range s.Properties {
			names[name] = true
			push(p)
		}
		push(s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames, s.UnevaluatedProperties,
			s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
		if s.DynamicRef != nil {
			push(s.DynamicRef.Ref)
		}
		push(s.AllOf...)
		push(s.AnyOf...)
		push(s.OneOf...)
		push(s.PrefixItems...)
		for _, p := range s.PatternProperties {
			push(p)
		}
		for _, p := range s.DependentSchemas {
			push(p)
		}
		for _, d := range s.Dependencies {
			pushAny(d)
		}
		pushAny(s.AdditionalProperties)
		pushAny(s.Items)
		pushAny(s.AdditionalItems)
	}
	v, _ := declared.LoadOrStore(sch, names)
	return v.(map[string]bool)
}

// decodeJSON decodes body in one streaming pass, checking syntax, nesting
// depth and duplicate object keys as it goes, with an explicit stack so that
// hostile nesting never recurses. Numbers stay json.Number, as the schema
// validator expects.
func decodeJSON(body []byte) (doc any, reason, detail string) {
	type frame struct {
		obj map[string]any
		arr []any
		key string
		// wantKey is true in an object when the next token is a key.
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	var root any
	done := false
	// put stores a finished value in its parent, or as the root.
	put := func(v any) {
		if len(stack) == 0 {
			root, done = v, true
			return
		}
		top := stack[len(stack)-1]
		if top.obj != nil {
			top.obj[top.key] = v
			top.wantKey = true
		} else {
			top.arr = append(top.arr, v)
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if !done {
				return nil, ReasonNotJSON, "unexpected end of input"
			}
			return root, "", ""
		}
		if err != nil {
			return nil, ReasonNotJSON, err.Error()
		}
		if done {
			return nil, ReasonNotJSON, "more than one top-level value"
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.obj != nil && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				put(top.obj)
				continue
			}
			key, _ := tok.(string)
			if _, dup := top.obj[key]; dup {
				return nil, ReasonDuplicateKey, ""
			}
			top.key, top.wantKey = key, false
			top.obj[key] = nil
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxJSONDepth {
					return nil, ReasonTooDeep, fmt.Sprintf("deeper than %d levels", MaxJSONDepth)
				}
				f := &frame{}
				if t == '{' {
					f.obj, f.wantKey = map[string]any{}, true
				} else {
					f.arr = []any{}
				}
				stack = append(stack, f)
			case ']':
				stack = stack[:len(stack)-1]
				put(top.arr)
			}
		default:
			put(t)
		}
	}
}
