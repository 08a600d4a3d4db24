// Package schematest validates plan YAML against the plan schema in tests,
// with a JSON Schema library, as an editor would.
package schematest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/docs"
)

// Validator checks plans against one compiled schema.
type Validator struct{ s *jsonschema.Schema }

// Compile compiles a schema document (what `planrun schema` prints).
func Compile(t testing.TB, raw []byte) *Validator {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(docs.SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(docs.SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return &Validator{s: s}
}

// Validate checks a plan's YAML; nil means the schema accepts it.
func (v *Validator) Validate(y string) error {
	var x any
	if err := yaml.Unmarshal([]byte(y), &x); err != nil {
		return err
	}
	j, err := json.Marshal(x)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	return v.s.Validate(inst)
}
