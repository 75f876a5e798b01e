package quarantine

import "github.com/santhosh-tekuri/jsonschema/v6"

// DeclaredProperties returns the property names declared anywhere in the
// graph of sch (every "properties" key of every schema reachable from it):
// the names the gate's reasons print, all other object keys being payload
// data. The map is shared: do not modify it.
func DeclaredProperties(sch *jsonschema.Schema) map[string]bool { return declaredProperties(sch) }
