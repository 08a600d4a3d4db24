package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/planrun/planrun/docs/schematest"
)

// planrun.schema.json is what `planrun schema` prints now (go generate
// writes it).
func TestSchemaFileIsCurrent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"schema"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	file, err := os.ReadFile("planrun.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, stdout.Bytes()) {
		t.Error("planrun.schema.json is not what planrun schema prints: run go generate ./...")
	}
}

// Every plan in plans/ names the schema on its first line for editors and
// validates against it, and so does every README example.
func TestSchemaValidatesPlansAndExamples(t *testing.T) {
	raw, err := os.ReadFile("planrun.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v := schematest.Compile(t, raw)
	validate := v.Validate
	check := func(what, y string) {
		if err := validate(y); err != nil {
			t.Errorf("%s does not validate against the schema: %v", what, err)
		}
	}
	files, _ := filepath.Glob("plans/*.yaml")
	if len(files) == 0 {
		t.Fatal("no plans")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(string(b), "\n"); first != "# yaml-language-server: $schema=../planrun.schema.json" {
			t.Errorf("%s: first line %q, want the yaml-language-server schema line", f, first)
		}
		check(f, string(b))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(name:.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README has no plan examples")
	}
	for i, b := range blocks {
		check(fmt.Sprintf("README example %d (%s)", i+1, strings.Fields(b[1])[1]), b[1])
	}
	// A driver's target keys belong to its targets only: a kafka key on a
	// memory target, or a misspelt kafka key, is marked. Workload sections
	// take the keys of every driver (their target's driver is named
	// elsewhere in the file), so only a key no driver has is marked there.
	for _, bad := range []string{
		"name: x\ntargets:\n  mq: { driver: kafka, brokrs: embedded }\nworkloads:\n  p: { produce: { topic: a } }\nsteps:\n  - start: all\n",
		"name: x\ntargets:\n  mq: { driver: memory, brokers: embedded }\nworkloads:\n  p: { produce: { topic: a } }\nsteps:\n  - start: all\n",
		"name: x\ntargets:\n  mq: { driver: memory }\nworkloads:\n  p: { produce: { topic: a, akcs: all } }\nsteps:\n  - start: all\n",
	} {
		if validate(bad) == nil {
			t.Errorf("the schema accepts:\n%s", bad)
		}
	}
	if err := validate("name: x\ntargets:\n  mq: { driver: kafka, brokers: embedded }\nworkloads:\n  p: { produce: { topic: a } }\nsteps:\n  - start: all\n"); err != nil {
		t.Errorf("a good kafka plan is rejected: %v", err)
	}
}
