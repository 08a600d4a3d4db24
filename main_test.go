package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func writePlan(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const memPlan = `name: cli
vars:
  want: "10"
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 10 } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    timeout: 10s
  - assert: producer.acked == vars.want
`

func TestExitCodes(t *testing.T) {
	good := writePlan(t, memPlan)
	bad := writePlan(t, strings.Replace(memPlan, "- start: producer", "- strat: producer", 1))
	unreachable := writePlan(t, strings.Replace(strings.Replace(memPlan, "driver: memory", "driver: kafka, brokers: \"127.0.0.1:1\", dial_timeout: 200ms", 1), "  - assert", "  - sleep: 1s\n  - assert", 1))
	out := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		in   string // expected in stdout+stderr
	}{
		{"version", []string{"version"}, 0, "planrun "},
		{"validate ok", []string{"validate", good}, 0, "ok"},
		{"validate bad", []string{"validate", good, bad}, 2, "plan.yaml:10:5: unknown step \"strat\" (did you mean \"start\"?)"},
		{"run passes", []string{"--out", out, good}, 0, "| produce"},
		{"flags before plan", []string{"--set", "want=11", "--out", out, "run", good}, 1, "assert `producer.acked == vars.want`: **FAILED**"},
		{"flags after plan", []string{good, "--set=want=11", "-q", "--out", out}, 1, "FAILED"},
		{"bad plan exits 2", []string{bad}, 2, "unknown step"},
		{"unknown var", []string{"--set", "wnat=1", good}, 2, `the plan has no variable "wnat"`},
		{"unknown flag", []string{"--bogus", good}, 2, "unknown flag --bogus"},
		{"no plan", []string{"run"}, 2, "run takes one plan file"},
		{"missing file", []string{"/nonexistent/plan.yaml"}, 2, "cannot read plan"},
		{"broker unreachable", []string{"--out", out, "-q", unreachable}, 3, "127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, all)
			}
			if !strings.Contains(all, c.in) {
				t.Errorf("output lacks %q:\n%s", c.in, all)
			}
			if strings.Contains(all, "goroutine ") || strings.Contains(all, "panic") {
				t.Errorf("stack trace in output:\n%s", all)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "cli.json")); err != nil {
		t.Errorf("JSON result not written: %v", err)
	}
}

// Every example plan in plans/ validates, and every plan field the loader
// knows appears in the README's reference.
func TestPlansValidate(t *testing.T) {
	files, _ := filepath.Glob("plans/*.yaml")
	if len(files) == 0 {
		t.Fatal("no plans")
	}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"validate"}, files...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}

func TestReadmeExamplesValidate(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Blocks fenced as ```yaml that start with "name:" are whole plans.
	re := regexp.MustCompile("(?s)```yaml\n(name:.*?)```")
	blocks := re.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README has no plan examples")
	}
	for i, b := range blocks {
		p := writePlan(t, b[1])
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", p}, &stdout, &stderr); code != 0 {
			t.Errorf("README example %d does not validate:\n%s\n%s", i+1, stderr.String(), b[1])
		}
	}
}
