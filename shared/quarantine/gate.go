package quarantine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
}

// Verdict is the outcome of the validation gate for one body.
type Verdict struct {
	Valid bool
	// Stage and Reason are low-cardinality; Detail may quote the payload and
	// is stored only in the record, never logged.
	Stage  string
	Reason string
	Detail string
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
	if reason, detail := scanJSON(body); reason != "" {
		return invalid(reason, detail)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return invalid(ReasonNotJSON, err.Error())
	}
	if s.Schema == nil {
		return Verdict{Valid: true, Doc: doc}
	}
	if err := s.Schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Verdict{Stage: StageGate, Reason: "schema error", Detail: err.Error(), Doc: doc}
		}
		return Verdict{Stage: StageGate, Reason: schemaReason(ve), Detail: ve.Error(), Doc: doc}
	}
	return Verdict{Valid: true, Doc: doc}
}

// schemaReason names the first failing leaf by instance location and
// keyword, never by value, so the signature stays low-cardinality.
func schemaReason(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
			if kw == "" {
				// Some kinds (not) report no keyword path; their type names it.
				kind := fmt.Sprintf("%T", e.ErrorKind)
				kw = strings.ToLower(kind[strings.LastIndexByte(kind, '.')+1:])
			}
			leaves = append(leaves, "schema /"+strings.Join(e.InstanceLocation, "/")+" "+kw)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	return leaves[0]
}

// scanJSON checks syntax, nesting depth and duplicate object keys with the
// streaming tokenizer, so hostile nesting never recurses.
func scanJSON(body []byte) (reason, detail string) {
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return ReasonNotJSON, "unexpected end of input"
			}
			return "", ""
		}
		if err != nil {
			return ReasonNotJSON, err.Error()
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxJSONDepth {
					return ReasonTooDeep, fmt.Sprintf("deeper than %d levels", MaxJSONDepth)
				}
				stack = append(stack, &frame{object: t == '{', wantKey: t == '{'})
			case '}', ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
		default:
			if top != nil && top.object && top.wantKey {
				key, _ := t.(string)
				if top.keys == nil {
					top.keys = make(map[string]struct{})
				}
				if _, dup := top.keys[key]; dup {
					return ReasonDuplicateKey, ""
				}
				top.keys[key] = struct{}{}
				top.wantKey = false
				continue
			}
			valueDone()
		}
		if len(stack) == 0 && dec.More() {
			return ReasonNotJSON, "more than one top-level value"
		}
	}
}
