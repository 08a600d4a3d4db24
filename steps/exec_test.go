package steps_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/planrun/planrun/engine/enginetest"
	"os"
	"os/exec"
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
	enginetest.CheckResult(t, res)
	return res, out.String()
}

// child is a process the test starts, as a plan's faults would find a
// broker: `sleep 60` with its pid in dir/child.pid.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	c := &child{cmd: exec.Command("sleep", "60"), done: make(chan struct{})}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.done })
	if err := os.WriteFile(filepath.Join(dir, "child.pid"), []byte(strconv.Itoa(c.cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// ended waits (boundedly) for the child to end and returns the signal it
// died of.
func (c *child) ended(t *testing.T) syscall.Signal {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d still running", c.cmd.Process.Pid)
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		t.Fatalf("pid %d exited with %d, not by a signal", c.cmd.Process.Pid, ws.ExitStatus())
	}
	return ws.Signal()
}

// state is the process's state letter in /proc (T when stopped), or ""
// when it cannot be read.
func state(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := bytes.LastIndexByte(data, ')'); err == nil && i > 0 && i+3 < len(data) {
		return string(data[i+2])
	}
	return ""
}

// bgGone checks that the background command of a run, which wrote its pid
// to dir/bg.pid, is gone after the run and was stopped with SIGTERM.
func bgGone(t *testing.T, dir string, res *results.Result, _ *child) {
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
		child  bool // start a `sleep 60` child with its pid in {dir}/child.pid
		status string
		want   []string // in the run's error, or the output when there is none
		check  func(t *testing.T, dir string, res *results.Result, c *child)
	}{
		{name: "failing command", status: results.Failed,
			steps: `  - exec: [sh, -c, "echo one >&2; echo two >&2; exit 3"]
`,
			want: []string{"step 1 (exec, plan.yaml:10)", `sh -c echo one >&2; echo two >&2; exit 3: exit status 3; stderr:`, "    one\n    two"}},
		{name: "failing named command", status: results.Failed,
			steps: `  - sleep: 10ms
  - shell: exit 4
    name: failing shell
`,
			want: []string{`step 2 "failing shell" (shell, plan.yaml:11): exit 4: exit status 4`}},
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
			check: func(t *testing.T, _ string, res *results.Result, _ *child) {
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
			check: func(t *testing.T, dir string, _ *results.Result, _ *child) {
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
			check: func(t *testing.T, _ string, res *results.Result, _ *child) {
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
			check: func(t *testing.T, _ string, res *results.Result, _ *child) {
				if w := strings.Join(res.Runs[0].Warnings, "\n"); !strings.Contains(w, "exec sleep 60 (pid ") || !strings.Contains(w, "timed out after 200ms (process group killed)") {
					t.Errorf("warnings: %s", w)
				}
			}},
		{name: "kill a background exec", status: results.Passed,
			steps: `  - exec: [sleep, "60"]
    background: true
    as: bg
  - kill: { exec: bg, signal: KILL }
  - wait: "!probes.bg.running"
    timeout: 10s
  - assert: probes.bg.signal == "KILL" && probes.bg.exit == 137
`,
			want: []string{"killed pid ", " (exec bg) with KILL", "assert ok"}},
		{name: "kill by pidfile", status: results.Passed, child: true,
			steps: `  - kill: { pidfile: "{dir}/child.pid", signal: KILL }
`,
			want: []string{"killed pid ", "child.pid) with KILL"},
			check: func(t *testing.T, _ string, _ *results.Result, c *child) {
				if sig := c.ended(t); sig != syscall.SIGKILL {
					t.Errorf("ended by %v", sig)
				}
			}},
		{name: "kill with the default signal", status: results.Passed, child: true,
			steps: `  - kill: { pidfile: "{dir}/child.pid" }
`,
			check: func(t *testing.T, _ string, _ *results.Result, c *child) {
				if sig := c.ended(t); sig != syscall.SIGTERM {
					t.Errorf("ended by %v", sig)
				}
			}},
		{name: "pause and resume", status: results.Passed, child: true,
			steps: `  - shell: 'until [ "$(cut -d" " -f3 /proc/$(cat {dir}/child.pid)/stat)" = T ]; do sleep 0.01; done; echo stopped'
    background: true
    as: watch
  - pause: { pidfile: "{dir}/child.pid", for: 1s }
  - wait: "!probes.watch.running"
    timeout: 10s
  - assert: probes.watch.stdout == "stopped"
`,
			want: []string{"paused pid ", "resumed pid ", "assert ok"},
			check: func(t *testing.T, _ string, _ *results.Result, c *child) {
				if s := state(c.cmd.Process.Pid); s == "T" {
					t.Errorf("still stopped after the pause")
				}
			}},
		{name: "missing pidfile", status: results.Failed,
			steps: `  - kill: { pidfile: "{dir}/none.pid" }
`,
			want: []string{"pidfile: open ", "none.pid: no such file or directory"}},
		{name: "dead pid", status: results.Failed, child: true,
			steps: `  - kill: { pidfile: "{dir}/child.pid", signal: KILL }
  - exec: [sh, -c, "while kill -0 $(cat {dir}/child.pid) 2>/dev/null && [ \"$(cut -d' ' -f3 /proc/$(cat {dir}/child.pid)/stat)\" != Z ]; do sleep 0.01; done"]
  - kill: { pidfile: "{dir}/child.pid" }
`,
			want: []string{"step 3 (kill, plan.yaml:12)", "child.pid): no such process (it has ended)"}},
		{name: "kill an ended background exec", status: results.Failed,
			steps: `  - exec: ["true"]
    background: true
    as: t
  - wait: "!probes.t.running"
    timeout: 10s
  - kill: { exec: t }
`,
			want: []string{"exec t (pid ", "has already ended: exit status 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var c *child
			if tc.child {
				c = startChild(t, dir)
			}
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
				tc.check(t, dir, res, c)
			}
		})
	}
}

// An interrupt during a pause still continues the process.
func TestPauseInterrupted(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Interrupt once the child is stopped, as a user would.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for state(c.cmd.Process.Pid) != "T" {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		cancel()
	}()
	// The test's deadline bounds the pause should the interrupt not come.
	res, out := run(t, ctx, dir, `  - pause: { pidfile: "{dir}/child.pid", for: 1m }
`)
	if res.Status != results.Interrupted || !strings.Contains(out, "resumed pid") {
		t.Fatalf("status %s (%s)", res.Status, res.Error)
	}
	if s := state(c.cmd.Process.Pid); s == "T" {
		t.Errorf("still stopped after the interrupt")
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
		{"unknown signal", "  - kill: { pid: 10, signal: KIL }\n", `10:11: kill: unknown signal "KIL"; signals are: KILL, TERM, STOP, CONT, INT, HUP`},
		{"two selectors", "  - kill: { pid: 10, pidfile: /run/x.pid }\n", "10:11: kill names the process once: one of pid:, pidfile: or exec:, not pid and pidfile"},
		{"no selector", "  - kill: { signal: KILL }\n", "10:11: kill needs the process"},
		{"bad pid", "  - kill: { pid: 0 }\n", "10:11: kill: pid must be 1 or more"},
		{"unknown key", "  - kill: { pid: 10, sginal: KILL }\n", `10:22: unknown key "sginal" in kill (did you mean "signal"?); known: pid, pidfile, exec, signal`},
		{"unknown exec", "  - exec: [sleep, '9']\n    background: true\n    as: broker\n  - kill: { exec: brokr }\n",
			`13:11: kill: exec: no earlier background exec step has as: brokr (did you mean "broker"?); they are: broker`},
		{"exec not in the background", "  - exec: [sleep, '9']\n    as: broker\n  - pause: { exec: broker, for: 1s }\n",
			"12:12: pause: exec: no earlier background exec step has as: broker; there are none"},
		{"pause without for", "  - pause: { pid: 10 }\n", `10:12: pause needs "for"`},
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

// restart's pause: key is not the pause step.
func TestRestartPauseIsAKey(t *testing.T) {
	_, plans, err := plan.Parse("plan.yaml", []byte(planHead+"  - restart: idle\n    pause: 1s\n"), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := plans[0].Steps[0]; s.Kind != "restart" {
		t.Errorf("kind %s", s.Kind)
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
	bgGone(t, dir, res, nil)
}
