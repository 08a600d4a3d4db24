package plan_test

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/docs"
	"github.com/planrun/planrun/docs/schematest"
)

// The loader's broken plans whose mistake is one of shape (an unknown key,
// a value of the wrong type, no or two kinds) are rejected by the schema
// too, so an editor marks them before the plan is run; the good plan passes.
func TestSchemaRejectsShapeMistakes(t *testing.T) {
	raw, err := docs.Schema()
	if err != nil {
		t.Fatal(err)
	}
	s := schematest.Compile(t, raw)
	if err := s.Validate(good); err != nil {
		t.Fatalf("the good plan does not validate: %v", err)
	}
	detectable := map[string]bool{"unknown step": true, "unknown key": true, "bad duration": true, "unknown driver": true,
		"unknown top key": true, "several errors at once": true, "two kinds": true, "not a mapping": true,
		"two workload kinds": true, "bad size": true, "matrix and set": false}
	seen := 0
	for _, c := range loadErrors {
		if !detectable[c.name] {
			continue
		}
		seen++
		if err := s.Validate(c.yaml); err == nil {
			t.Errorf("%s: the schema accepts the plan", c.name)
		}
	}
	if seen < 9 {
		t.Errorf("only %d of the loader's broken plans were tried", seen)
	}
	// Values of the wrong type, which the loader rejects as it decodes.
	for _, c := range []struct{ from, to string }{
		{"threads: 2", "threads: lots"},
		{"threads: 2", "threads: [2]"},
		{"timeout: 10s", "timeout: soon"},
		{"phase: warm", "phase: {name: warm}"},
		{"size: 1KiB", "size: true"},
		{"driver: memory }", "driver: memory, partitions: many }"},
		{"produce: { topic: a,", "produce: { rate: [{to: 5, hold: x}], topic: a,"},
	} {
		y := strings.Replace(good, c.from, c.to, 1)
		if y == good {
			t.Fatalf("%q is not in the good plan", c.from)
		}
		if err := s.Validate(y); err == nil {
			t.Errorf("%s: the schema accepts it", c.to)
		}
	}
}
