// Package schemas holds the JSON Schemas payloads are validated against, and
// compiles them by name. A name is either an embedded schema
// ("inventory-movement.v1") or a path to a schema file shipped beside the
// function ("schemas/orders.v2.json").
package schemas

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed *.json
var embedded embed.FS

// Embedded lists the names of the schemas embedded in the binary, sorted
// (the template's SchemaName allows exactly these).
func Embedded() []string {
	entries, _ := embedded.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

// Compile returns the compiled schema called name and its version, the part
// of the name after the last dot ("v1" for "inventory-movement.v1").
func Compile(name string) (*jsonschema.Schema, string, error) {
	raw, err := embedded.ReadFile(name + ".json")
	if err != nil {
		raw, err = os.ReadFile(name)
		if err != nil {
			return nil, "", fmt.Errorf("schema %q: neither embedded nor a readable file", name)
		}
	}
	s, err := Parse(name, raw)
	if err != nil {
		return nil, "", err
	}
	return s, Version(name), nil
}

// CompileEmbedded is Compile for the schemas embedded in the binary only:
// a name that is not one of them is refused, never read from a file.
// dlqctl derives what it shows from a schema, so it must not take one from
// whoever runs it.
func CompileEmbedded(name string) (*jsonschema.Schema, string, error) {
	raw, err := embedded.ReadFile(name + ".json")
	if err != nil {
		return nil, "", fmt.Errorf("schema %q is not one embedded in this binary", name)
	}
	s, err := Parse(name, raw)
	if err != nil {
		return nil, "", err
	}
	return s, Version(name), nil
}

// Parse compiles the schema document raw called name (formats asserted,
// as for every schema Compile returns).
func Parse(name string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "mem:///" + filepath.Base(name)
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	return s, nil
}

// Version returns the version part of a schema name.
func Version(name string) string {
	base := strings.TrimSuffix(filepath.Base(name), ".json")
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		return base[i+1:]
	}
	return base
}

// IsEmbedded reports whether name is a schema embedded in the binary.
func IsEmbedded(name string) bool {
	_, err := embedded.ReadFile(name + ".json")
	return err == nil
}
