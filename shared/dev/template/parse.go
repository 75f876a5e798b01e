package template

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"
)

// parse is the typed parse open uses (a test compares it with
// goformation's own).
var parse = parseJSON

// parseJSON is goformation.ParseJSONWithOptions (intrinsics.ProcessJSON,
// then the typed unmarshal) with the resource registry built once.
// goformation's Resources.UnmarshalJSON calls cloudformation.AllResources,
// which builds a map of every resource type CloudFormation has, once for
// each resource of the template: most of a parse's time, and the template
// is parsed once per test. Each resource is decoded by its own type's
// UnmarshalJSON as goformation decodes it (TestParseMatchesGoformation).
func parseJSON(data []byte, opts *intrinsics.ProcessorOptions) (*cloudformation.Template, error) {
	resolved, err := intrinsics.ProcessJSON(data, opts)
	if err != nil {
		return nil, err
	}
	// The outer Resources field hides the embedded template's (the less
	// nested field wins in encoding/json): the rest decodes as goformation
	// decodes it.
	var doc struct {
		cloudformation.Template
		Resources map[string]json.RawMessage `json:"Resources,omitempty"`
	}
	if err := json.Unmarshal(resolved, &doc); err != nil {
		return nil, err
	}
	t := doc.Template
	t.Resources = cloudformation.Resources{}
	for name, raw := range doc.Resources {
		var head struct{ Type string }
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		var res cloudformation.Resource
		switch typ, known := resourceTypes()[head.Type]; {
		case head.Type == "":
			return nil, fmt.Errorf("resource %s: no Type", name)
		case strings.HasPrefix(head.Type, "Custom::"):
			res = &cloudformation.CustomResource{Type: head.Type}
		case !known:
			return nil, fmt.Errorf("resource %s: goformation does not know type %s", name, head.Type)
		default:
			res = reflect.New(typ).Interface().(cloudformation.Resource)
		}
		if err := json.Unmarshal(raw, res); err != nil {
			return nil, err
		}
		t.Resources[name] = res
	}
	return &t, nil
}

// resourceTypes maps each resource type goformation knows to the struct
// its value points to.
var resourceTypes = sync.OnceValue(func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for name, r := range cloudformation.AllResources() {
		out[name] = reflect.TypeOf(r).Elem()
	}
	return out
})
