package drivertest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/docs"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/yamldecode"
)

// section is one place in a plan where the driver's keys go.
type section struct {
	name   string // target, produce, consume
	config any    // a fresh config of the section (a pointer), nil if none
	fields []docs.Field
}

func (r *runner) sections(t *testing.T) []section {
	t.Helper()
	cs, err := docs.Find([]string{"driver", r.Driver})
	if err != nil || len(cs) != 1 {
		t.Fatalf("explain driver %s: %v", r.Driver, err)
	}
	var out []section
	for _, name := range []string{"target", "produce", "consume"} {
		s := section{name: name}
		if sec, ok := cs[0].Section(name); ok {
			s.fields = sec.Fields
		}
		switch name {
		case "target":
			s.config = r.drv.NewTargetConfig()
		case "produce":
			if o, ok := r.drv.(interface{ NewProduceOptions() any }); ok {
				s.config = o.NewProduceOptions()
			}
		case "consume":
			if o, ok := r.drv.(interface{ NewConsumeOptions() any }); ok {
				s.config = o.NewConsumeOptions()
			}
		}
		out = append(out, s)
	}
	return out
}

// options checks that every key of the driver's target, produce and
// consume sections is documented (a doc, a default that decodes as a
// plan would write it), listed by `planrun explain` and in the JSON
// schema.
func (r *runner) options(t *testing.T) {
	secs := r.sections(t)
	for _, s := range secs {
		if s.config == nil {
			continue
		}
		checkTags(t, r.Driver+" "+s.name, reflect.TypeOf(s.config))
		explained := map[string]bool{}
		for _, f := range s.fields {
			explained[f.Key] = true
		}
		for _, k := range yamlKeys(reflect.TypeOf(s.config)) {
			if !explained[k] {
				t.Errorf("%s key %q is not in `planrun explain %s`", s.name, k, r.Driver)
			}
		}
	}
	raw, err := docs.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	props := schemaProps(t, schema, r.Driver)
	for _, s := range secs {
		for _, f := range s.fields {
			p, ok := props[s.name][f.Key].(map[string]any)
			if !ok {
				t.Errorf("%s key %q is not in the JSON schema", s.name, f.Key)
				continue
			}
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s key %q has no description in the JSON schema", s.name, f.Key)
			}
		}
	}
}

// schemaProps returns the schema's properties of the driver's target and
// of the produce and consume sections.
func schemaProps(t *testing.T, schema map[string]any, driver string) map[string]map[string]any {
	t.Helper()
	get := func(v any, path ...string) any {
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return v
	}
	out := map[string]map[string]any{}
	defs := get(schema, "$defs")
	cases, _ := get(defs, "target", "allOf").([]any)
	for _, c := range cases {
		if get(c, "if", "properties", "driver", "const") == driver {
			out["target"], _ = get(c, "then", "properties").(map[string]any)
		}
	}
	if out["target"] == nil {
		t.Fatalf("the JSON schema has no case for driver: %s", driver)
	}
	out["produce"], _ = get(defs, "workload", "properties", "produce", "properties").(map[string]any)
	out["consume"], _ = get(defs, "workload", "properties", "consume", "properties").(map[string]any)
	return out
}

// checkTags checks that every key has a doc tag and that its default
// decodes as a plan would write it.
func checkTags(t *testing.T, where string, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue
		}
		what := where + "." + key
		if f.Tag.Get("doc") == "" {
			t.Errorf("%s has no doc tag", what)
		}
		if def, ok := f.Tag.Lookup("default"); ok {
			d := yamldecode.NewDecoder("tags", nil)
			d.Decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}, reflect.New(f.Type).Interface(), what)
			if err := d.Errs.Err(); err != nil {
				t.Errorf("%s: default %q does not decode: %v", what, def, err)
			}
		}
		if ft := f.Type; ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), "github.com/planrun/") {
			checkTags(t, what, ft)
		}
	}
}

// yamlKeys lists the top-level keys of a config struct.
func yamlKeys(typ reflect.Type) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				keys = append(keys, yamlKeys(f.Type)...)
			}
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

// malformed gives every key of the driver's sections a value of the
// wrong shape, and an unknown key: the plan does not load and the error
// points at the value, file:line:col.
func (r *runner) malformed(t *testing.T) {
	env := r.Start(t)
	for _, s := range r.sections(t) {
		keys := []docs.Field{{Key: "planrun_no_such_key", Type: "unknown"}}
		keys = append(keys, s.fields...)
		for _, f := range keys {
			bad := "{malformed: 1}"
			if f.Type == "mapping" || f.Type == "name: mapping" {
				bad = "7" // {malformed: 1} is a well-formed name: mapping
			}
			if f.Type == "value" {
				continue // takes any YAML
			}
			t.Run(s.name+"."+f.Key, func(t *testing.T) {
				target := Options{"driver": r.Driver}.merge(env.Target)
				produce := Options{"topic": "x"}.merge(r.Produce)
				consume := Options{"topic": "x"}.merge(r.Consume)
				var sec Options
				switch s.name {
				case "target":
					sec = target
				case "produce":
					sec = produce
				case "consume":
					sec = consume
				}
				delete(sec, f.Key)
				lines := []string{
					"name: malformed",
					"targets:",
					"  t:",
				}
				block := func(o Options, indent string) (line, col int) {
					for _, kv := range o.entries() {
						lines = append(lines, indent+kv)
					}
					if o.equal(sec) {
						lines = append(lines, indent+f.Key+": "+bad)
						if f.Type == "unknown" {
							return len(lines), len(indent) + 1 // the key is wrong
						}
						return len(lines), len(indent) + len(f.Key) + 3
					}
					return 0, 0
				}
				var line, col int
				if l, c := block(target, "    "); l > 0 {
					line, col = l, c
				}
				lines = append(lines, "workloads:", "  producer:", "    produce:")
				if l, c := block(produce, "      "); l > 0 {
					line, col = l, c
				}
				lines = append(lines, "  consumer:", "    consume:")
				if l, c := block(consume, "      "); l > 0 {
					line, col = l, c
				}
				lines = append(lines, "steps:", "  - start: all")
				y := strings.Join(lines, "\n") + "\n"
				_, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
				if err == nil {
					t.Fatalf("%s: %s loads:\n%s", s.name, f.Key+": "+bad, y)
				}
				want := fmt.Sprintf("plan.yaml:%d:%d", line, col)
				// A mapping of names to sections (name: mapping) takes
				// {malformed: ...}: the error points at the section's value.
				inner := fmt.Sprintf("plan.yaml:%d:%d", line, col+len("{malformed: "))
				if strings.HasPrefix(f.Type, "name:") && strings.Contains(err.Error(), inner) {
					return
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not point at %s:\n%v\nplan:\n%s", want, err, y)
				}
			})
		}
	}
}

// equal reports whether o and p are the same map (not the same contents).
func (o Options) equal(p Options) bool {
	return reflect.ValueOf(o).UnsafePointer() == reflect.ValueOf(p).UnsafePointer()
}
