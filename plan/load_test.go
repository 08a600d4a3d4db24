package plan_test

import (
	"errors"
	"strings"
	"testing"

	_ "github.com/planrun/planrun/drivers/memory"
	"github.com/planrun/planrun/plan"
	_ "github.com/planrun/planrun/steps"
	"github.com/planrun/planrun/workloads"
	"github.com/planrun/planrun/yamldecode"
)

const good = `name: t
vars:
  backlog: 1MB
targets:
  mq: { driver: memory }
workloads:
  producer: { target: mq, produce: { topic: a, size: 1KiB, threads: 2 } }
  consumer: { target: mq, consume: { topic: a } }
steps:
  - start: [producer, consumer]
    phase: warm
  - stop: consumer
    phase: backlog
  - wait: backlog.bytes >= size(vars.backlog)
    timeout: 10s
  - start: consumer
    phase: cold-read
  - wait: consumer.backlog.messages == 0 || phase.elapsed >= duration("5s")
  - stop: all
  - assert: phases["cold-read"].consumer.rate > 0
    message: the consumer read nothing
`

// loadErrors are broken plans and what the loader says about each.
var loadErrors = []struct {
	name string
	yaml string
	want []string // each "line:col: substring"
}{
	{"unknown step", strings.Replace(good, "  - stop: all", "  - stpo: all", 1), []string{`19:5: unknown step "stpo" (did you mean "stop"?); known: assert, `}},
	{"unknown workload in expression", strings.Replace(good, "consumer.backlog.messages", "consumr.backlog.messages", 1), []string{`18:11: expression "consumr.backlog.messages == 0 || phase.elapsed >= duration(\"5s\")": unknown name consumr`}},
	{"unknown field in expression", strings.Replace(good, "consumer.rate > 0", "consumer.rat > 0", 1), []string{`20:13: expression`, `no workload figure "rat" (did you mean "rate"?)`}},
	{"undefined workload", strings.Replace(good, "- start: consumer", "- start: consumer2", 1), []string{`16:5: start: unknown workload "consumer2" (did you mean "consumer"?)`}},
	{"negative rate", strings.Replace(good, "threads: 2", "threads: 2, rate: -5", 1), []string{`7:36: workload "producer" produce: rate must be 0 (unlimited) or more, got -5`}},
	{"wait without end", strings.Replace(good, "    timeout: 10s\n", "", 1), []string{`14:5: wait "backlog.bytes >= size(vars.backlog)" has no way to end`}},
	{"unknown key", strings.Replace(good, "size: 1KiB", "sise: 1KiB", 1), []string{`7:48: unknown key "sise" in workload "producer" produce (did you mean "size"?)`}},
	{"bad size", strings.Replace(good, "size: 1KiB", "size: 1KX", 1), []string{`7:54: workload "producer" produce: size: bad size "1KX"`}},
	{"bad duration", strings.Replace(good, "timeout: 10s", "timeout: 10", 1), []string{`15:14: step 3 (wait): timeout: duration "10" needs a unit`}},
	{"unknown driver", strings.Replace(good, "driver: memory", "driver: kafak", 1), []string{`5:7: target "mq": unknown driver "kafak"`}},
	{"unknown variable", strings.Replace(good, "topic: a, size", "topic: \"${topik}\", size", 1), []string{`7:45: unknown variable ${topik}`}},
	{"unknown top key", "nmae: x\n" + good, []string{`1:1: unknown key "nmae" at the top of the plan (did you mean "name"?)`}},
	{"several errors at once", strings.Replace(strings.Replace(good, "- stop: all", "- stpo: all", 1), "threads: 2", "threads: -1", 1), []string{`7:`, `19:5: unknown step "stpo"`}},
	{"two kinds", strings.Replace(good, "  - stop: all", "  - stop: all\n    sleep: 1s", 1), []string{`19:5: step 6 has several kinds`}},
	{"bad duration in a named step", strings.Replace(good, "    timeout: 10s\n", "    name: fill the backlog\n    timeout: 10\n", 1), []string{`16:14: step 3 "fill the backlog" (wait): timeout: duration "10" needs a unit`}},
	{"bad yaml", "name: [x\n", []string{`not valid YAML`}},
	{"not a mapping", "- a\n- b\n", []string{`1:1: a plan is a mapping`}},
	{"two workload kinds", strings.Replace(good, "consume: { topic: a } }", "consume: { topic: a }, produce: { topic: b } }", 1), []string{`8:13: workload "consumer" needs exactly one of produce:, consume:, relay: or connect: (it has consume and produce)`}},
	{"reserved workload name", strings.Replace(strings.ReplaceAll(good, "consumer", "phase"), "phases[\"cold-read\"].phase.rate", "true", 1), []string{`workload name "phase" is not allowed`}},
	{"matrix and set", good + "matrix:\n  n: []\n", []string{`matrix "n" needs a list of values`}},
}

func TestLoadErrors(t *testing.T) {
	for _, c := range loadErrors {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(c.yaml), plan.Options{})
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			var le *yamldecode.ListError
			if !errors.As(err, &le) {
				t.Fatalf("error %T %v is not a plan error list", err, err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
			for _, e := range le.List {
				if e.File != "plan.yaml" {
					t.Errorf("error without file: %v", e)
				}
			}
		})
	}
}

func TestLoadGood(t *testing.T) {
	src, plans, err := plan.Parse("plan.yaml", []byte(good), plan.Options{Set: map[string]string{"backlog": "2MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	if src.Vars["backlog"] != "2MiB" {
		t.Errorf("--set not applied: %q", src.Vars["backlog"])
	}
	if len(plans) != 1 || len(plans[0].Steps) != 7 || len(plans[0].Workloads) != 2 {
		t.Fatalf("plans %d steps %d workloads %d", len(plans), len(plans[0].Steps), len(plans[0].Workloads))
	}
	if got := plans[0].Workloads[0].Section.(*workloads.ProduceSection).Spec.Size; got != 1024 {
		t.Errorf("size = %d, want 1024", got)
	}
}

func TestMatrixAndSet(t *testing.T) {
	y := good + "matrix:\n  threads: [4, 8]\n  queues: [16, 32, 64]\n"
	y = strings.Replace(y, "threads: 2", "threads: \"${threads}\"", 1)
	_, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 6 {
		t.Fatalf("%d combinations, want 6", len(plans))
	}
	if got := plan.Label(plans[5].Combination); got != "threads=8 queues=64" {
		t.Errorf("last combination %q", got)
	}
	if plans[5].Workloads[0].Section.(*workloads.ProduceSection).Spec.Threads != 8 {
		t.Errorf("threads not interpolated: %d", plans[5].Workloads[0].Section.(*workloads.ProduceSection).Spec.Threads)
	}
	_, plans, err = plan.Parse("plan.yaml", []byte(y), plan.Options{Set: map[string]string{"queues": "32"}})
	if err != nil || len(plans) != 2 {
		t.Fatalf("pinned matrix: %d plans, %v", len(plans), err)
	}
	_, _, err = plan.Parse("plan.yaml", []byte(y), plan.Options{Set: map[string]string{"queus": "32"}})
	if err == nil || !strings.Contains(err.Error(), `--set queus: the plan has no variable "queus" (did you mean "queues"?)`) {
		t.Errorf("unknown --set: %v", err)
	}
}

func TestEnvInterpolation(t *testing.T) {
	y := strings.Replace(good, "backlog: 1MB", "backlog: ${env:PLANRUN_TEST_BACKLOG|3MB}", 1)
	env := func(string) (string, bool) { return "", false }
	src, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{LookupEnv: env})
	if err != nil || src.Vars["backlog"] != "3MB" {
		t.Fatalf("default: %v %q", err, src.Vars["backlog"])
	}
	env = func(k string) (string, bool) { return "7MB", k == "PLANRUN_TEST_BACKLOG" }
	src, _, err = plan.Parse("plan.yaml", []byte(y), plan.Options{LookupEnv: env})
	if err != nil || src.Vars["backlog"] != "7MB" {
		t.Fatalf("from env: %v %q", err, src.Vars["backlog"])
	}
}

// ${env:NAME} outside vars: reads the lookup given too, not the process
// environment: a worker decodes the plan with the conductor's environment.
func TestEnvInterpolationOutsideVars(t *testing.T) {
	y := strings.Replace(good, "threads: 2", `threads: "${env:PLANRUN_TEST_NOT_IN_THE_ENVIRONMENT}"`, 1)
	env := func(k string) (string, bool) { return "5", k == "PLANRUN_TEST_NOT_IN_THE_ENVIRONMENT" }
	_, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if n := plans[0].Workloads[0].Section.(*workloads.ProduceSection).Spec.Threads; n != 5 {
		t.Errorf("threads %d, want 5 from the lookup", n)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("name: x\nsteps: [{sleep: 1s}]\n"))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Any input gives a plan or an error, never a panic.
		_, _, _ = plan.Parse("fuzz.yaml", data, plan.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	})
}

// A YAML syntax error is reported at the line (and column) it is on:
// yaml.v3 counts the line of an unclosed flow mapping or sequence, and of a
// block collection's error, from 0, its scanner errors from 1.
func TestYAMLSyntaxErrorPlace(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string // "line:col: message"
	}{
		{"flow mapping with unquoted ${}", "name: x\nworkloads:\n  w: {kind: produce, rate: ${r}}\n",
			`plan.yaml:3:6: not valid YAML: did not find expected ',' or '}' (a ${...} inside { } must be quoted`},
		{"flow mapping not closed", "name: x\nsteps:\n  - start: {a: b\n  - stop: all\n",
			`plan.yaml:3:12: not valid YAML: did not find expected ',' or '}'`},
		{"flow sequence not closed", "name: x\nlist: [a, b\nc: d\n",
			`plan.yaml:2:7: not valid YAML: did not find expected ',' or ']'`},
		{"flow sequence in flow mapping", "x: 1\na:\n  b: {c: d, e: [f, g}\n",
			`plan.yaml:3:16: not valid YAML: did not find expected ',' or ']'`},
		{"flow mapping on the first line", "w: {kind: produce, rate: ${r}}\nname: x\n",
			`plan.yaml:1:4: not valid YAML: did not find expected ',' or '}'`},
		{"flow sequence on the only line", "name: [x\n",
			`plan.yaml:1:7: not valid YAML: did not find expected ',' or ']'`},
		{"block sequence entry missing", "name: x\nsteps:\n  - stop: all\n  bad: c\n",
			`plan.yaml:3:3: not valid YAML: did not find expected '-' indicator`},
		// Scanner errors: yaml.v3 counts these lines from 1 already.
		{"mapping value in a value", "name: x\na: b: c\n",
			`plan.yaml:2:1: not valid YAML: mapping values are not allowed in this context`},
		{"tab indentation", "name: x\na:\n\tb: c\n",
			`plan.yaml:3:1: not valid YAML: found character that cannot start any token`},
		{"unclosed quote", "name: x\na: \"abc\n",
			`plan.yaml:2:1: not valid YAML: found unexpected end of stream`},
		{"bad character", "name: x\na: @b\n",
			`plan.yaml:2:1: not valid YAML: found character that cannot start any token`},
		{"mapping value on the first line", "a: b: c\n",
			`plan.yaml:1:1: not valid YAML: mapping values are not allowed in this context`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(c.yaml), plan.Options{})
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error\n  %v\nwant it to start with\n  %s", err, c.want)
			}
		})
	}
}

// A step is named in output by its number, its name when it has one, its
// kind and where it is in the plan.
func TestStepDescribe(t *testing.T) {
	_, plans, err := plan.Parse("plans/t.yaml", []byte(strings.Replace(good, "  - stop: all\n", "  - stop: all\n    name: \"end \\\"it\\\"\"\n", 1)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]string{
		0: `step 1 (start, plans/t.yaml:10)`,
		2: `step 3 (wait, plans/t.yaml:14)`,
		5: `step 6 "end \"it\"" (stop, plans/t.yaml:19)`,
	} {
		if got := plans[0].Steps[i].Describe(); got != want {
			t.Errorf("step %d is described as %s, want %s", i+1, got, want)
		}
	}
}
