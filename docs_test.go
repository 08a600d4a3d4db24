package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/planrun/planrun/docs"
	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/workloads"
)

// yamlKeys lists the YAML keys of a config struct, nested structs included.
func yamlKeys(v any) []string {
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() == "" || !strings.HasPrefix(t.PkgPath(), "github.com/planrun/") {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			keys = append(keys, name)
			walk(f.Type)
		}
	}
	if v != nil {
		walk(reflect.TypeOf(v))
	}
	return keys
}

// The README is the manual: every key a plan may use must be in it.
func TestReadmeDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	check := func(where string, keys []string) {
		for _, k := range keys {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(k) + `\b`).MatchString(readme) {
				t.Errorf("README does not mention %s key %q", where, k)
			}
		}
	}
	check("produce", yamlKeys(&workloads.ProduceSpec{}))
	check("consume", yamlKeys(&workloads.ConsumeSpec{}))
	check("relay", yamlKeys(&workloads.RelaySpec{}))
	check("relay from", yamlKeys(&workloads.RelayFrom{}))
	check("relay to", yamlKeys(&workloads.RelayTo{}))
	check("step", yamlKeys(&plan.Common{}))
	check("report", yamlKeys(&plan.ReportSpec{}))
	check("topics", yamlKeys(&plan.TopicSpec{}))
	for _, k := range plan.StepKinds() {
		check("step "+k.Name, append(yamlKeys(k.New()), k.Name))
	}
	for _, k := range plan.CollectorKinds() {
		check("collector "+k.Name, append(yamlKeys(k.New()), k.Name))
	}
	for _, name := range drivers.Names() {
		d, _ := drivers.Lookup(name)
		check("driver "+name, append(yamlKeys(d.NewTargetConfig()), name))
		if o, ok := d.(drivers.ProduceOptioner); ok {
			check("driver "+name+" produce", yamlKeys(o.NewProduceOptions()))
		}
		if o, ok := d.(drivers.ConsumeOptioner); ok {
			check("driver "+name+" consume", yamlKeys(o.NewConsumeOptions()))
		}
	}
}

// The README's reference tables are generated from the components' struct
// tags (go generate); a component whose keys or docs changed without the
// README being regenerated fails here.
func TestReadmeReferenceIsGenerated(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := docs.UpdateReadme(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(data) {
		t.Errorf("README.md's generated reference tables are stale: run `go generate` (it runs `go run . explain --readme README.md`)")
	}
	// Every registered component has a table in the README.
	for _, c := range docs.Components() {
		for _, s := range c.Sections {
			m := "<!-- generated: " + c.Kind + " " + c.Name + " " + s.Name + " -->"
			if !strings.Contains(string(data), m) && c.Kind != "driver" {
				t.Errorf("README has no generated table for %s %s (%s keys): add %q and an end marker", c.Kind, c.Name, s.Name, m)
			}
		}
	}
}
