package steps_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/planrun/planrun/drivers/memory"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps"
)

// planHead is a plan with an idle workload, for steps that need none.
const planHead = `name: exec
vars:
  greeting: hello
targets:
  mq: { driver: memory }
workloads:
  idle: { produce: { topic: a } }
progress: 0s
steps:
`

// run runs a plan of the given steps ({dir} stands for dir) with the
// memory driver and returns the result and the output.
func run(t *testing.T, ctx context.Context, dir, steps string) (*results.Result, string) {
	t.Helper()
	src, plans, err := plan.Parse("plan.yaml", []byte(planHead+strings.ReplaceAll(steps, "{dir}", dir)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "test", StopTimeout: 10 * time.Second}
	res := e.Execute(ctx, src, plans)
	t.Log(out.String())
	return res, out.String()
}

// bgGone checks that the background command of a run, which wrote its pid
// to dir/bg.pid, is gone after the run and was stopped with SIGTERM.
func bgGone(t *testing.T, dir string, res *results.Result) {
	b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still there after the run: %v", pid, err)
	}
	if p := res.Runs[0].Probes["bg"].(map[string]any); p["running"] != false || p["signal"] != "TERM" || p["exit"] != 143.0 {
		t.Errorf("probes.bg = %v", p)
	}
}

func TestExecSteps(t *testing.T) {
	cases := []struct {
		name   string
		steps  string
		status string
		want   []string // in the run's error, or the output when there is none
		check  func(t *testing.T, dir string, res *results.Result)
	}{
		{name: "failing command", status: results.Failed,
			steps: `  - exec: [sh, -c, "echo one >&2; echo two >&2; exit 3"]
`,
			want: []string{"step 1 (exec, line 10)", `sh -c echo one >&2; echo two >&2; exit 3: exit status 3; stderr:`, "    one\n    two"}},
		{name: "allow failure", status: results.Passed,
			steps: `  - exec: ["false"]
    allow_failure: true
    as: f
  - assert: probes.f.exit == 1 && !probes.f.running && probes.f.signal == ""
`,
			want: []string{"exec false: exit status 1 (allowed)", "assert ok"}},
		{name: "timeout kills the process group", status: results.Failed,
			steps: `  - shell: sleep 30; echo never
    timeout: 300ms
`,
			want: []string{"sleep 30; echo never: timed out after 300ms (process group killed)"},
			check: func(t *testing.T, _ string, res *results.Result) {
				// The shell's sleep holds the output pipe: had only the
				// shell been killed, Wait would have waited for it.
				if d := res.Runs[0].Steps[0].Duration; d > 1.5 {
					t.Errorf("the step took %.1fs", d)
				}
			}},
		{name: "a number for later steps", status: results.Passed,
			steps: `  - shell: echo 7
    as: n
  - wait: probes.n.value >= 3
    timeout: 5s
  - assert: probes.n.value == 7 && probes.n.stdout == "7" && probes.n.exit == 0
`,
			want: []string{"exec n = \"7\"", "assert ok"}},
		{name: "env and dir", status: results.Passed,
			steps: `  - exec: [sh, -c, 'echo "$GREETING $OTHER" > out.txt']
    env: { GREETING: "${greeting}", OTHER: world }
    dir: "{dir}"
`,
			check: func(t *testing.T, dir string, _ *results.Result) {
				if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hello world\n" {
					t.Errorf("out.txt: %q %v", b, err)
				}
			}},
		{name: "shell", status: results.Passed,
			steps: `  - shell: echo a | tr a b
    as: s
  - assert: probes.s.stdout == "b" && probes.s.value == "b"
`,
			want: []string{"assert ok"}},
		{name: "background stopped at the end", status: results.Passed,
			steps: `  - shell: echo $$ > {dir}/bg.pid; exec sleep 60
    background: true
    as: bg
  - exec: [sh, -c, "until [ -s {dir}/bg.pid ]; do sleep 0.01; done"]
    timeout: 10s
  - assert: probes.bg.running && probes.bg.exit == -1
`,
			want:  []string{"started pid", "assert ok", "stopped: killed by signal TERM"},
			check: bgGone},
		{name: "background stopped when the run fails", status: results.Failed,
			steps: `  - shell: echo $$ > {dir}/bg.pid; exec sleep 60
    background: true
    as: bg
  - exec: [sh, -c, "until [ -s {dir}/bg.pid ]; do sleep 0.01; done; exit 9"]
`,
			want:  []string{"exit status 9"},
			check: bgGone},
		{name: "background failing by itself is a warning", status: results.Passed,
			steps: `  - shell: echo bad >&2; exit 4
    background: true
    as: b
  - wait: "!probes.b.running"
    timeout: 10s
`,
			check: func(t *testing.T, _ string, res *results.Result) {
				if w := strings.Join(res.Runs[0].Warnings, "\n"); !strings.Contains(w, "ended by itself: exit status 4; stderr:\n    bad") {
					t.Errorf("warnings: %s", w)
				}
			}},
		{name: "background timeout", status: results.Passed,
			steps: `  - exec: [sleep, "60"]
    background: true
    timeout: 200ms
    as: b
  - wait: "!probes.b.running"
    timeout: 10s
`,
			check: func(t *testing.T, _ string, res *results.Result) {
				if w := strings.Join(res.Runs[0].Warnings, "\n"); !strings.Contains(w, "exec sleep 60 (pid ") || !strings.Contains(w, "timed out after 200ms (process group killed)") {
					t.Errorf("warnings: %s", w)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, out := run(t, ctx, dir, tc.steps)
			if res.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", res.Status, res.Error, tc.status)
			}
			got := out
			if res.Error != "" {
				got = res.Error
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q not in %q", w, got)
				}
			}
			if tc.check != nil {
				tc.check(t, dir, res)
			}
		})
	}
}

func TestExecLoadErrors(t *testing.T) {
	cases := []struct {
		name, steps string
		want        string // "line:col: substring"
	}{
		{"exec and shell", "  - exec: [ls]\n    shell: ls\n", "10:5: exec: and shell: both given"},
		{"neither", "  - exec: []\n", "10:5: exec needs a command"},
		{"one string", "  - exec: ls -l\n", `10:5: exec: "ls -l" is one program name with spaces in it`},
		{"bad as", "  - shell: ls\n    as: a-b\n", `10:5: exec: as: "a-b" must be a name`},
		{"grace in the foreground", "  - shell: ls\n    grace: 1s\n", "10:5: exec: grace: is for background: true commands"},
		{"bad timeout", "  - shell: ls\n    timeout: 5\n", `11:14: step 1 (shell): timeout: duration "5" needs a unit`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(planHead+tc.steps), plan.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// An interrupt stops background commands too.
func TestBackgroundInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Interrupt once the command has written its pid.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, _ := os.ReadFile(filepath.Join(dir, "bg.pid")); len(b) > 0 {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	// The test's deadline bounds the sleep should the interrupt not come.
	res, _ := run(t, ctx, dir, `  - shell: echo $$ > {dir}/bg.pid.new; mv {dir}/bg.pid.new {dir}/bg.pid; exec sleep 60
    background: true
    as: bg
  - sleep: 1m
`)
	if res.Status != results.Interrupted {
		t.Fatalf("status %s (%s)", res.Status, res.Error)
	}
	bgGone(t, dir, res)
}
