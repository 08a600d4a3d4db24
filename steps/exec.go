package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/planrun/planrun/plan"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "exec", Doc: "run a command without a shell: `exec: [kubectl, delete, pod, broker-0]`; in the background with background: true", New: func() plan.Step { return &Exec{} }})
	plan.RegisterStep(plan.StepKind{Name: "shell", Doc: "run a command line with /bin/sh -c: `shell: systemctl restart mosquitto`; the keys of exec", New: func() plan.Step { return &Exec{} }})
}

const (
	execTimeout = time.Minute     // a foreground command's default time limit
	execGrace   = 5 * time.Second // default time between SIGTERM and SIGKILL at the end of a run
	// killWait bounds waiting for a process group to end after SIGKILL.
	killWait = 5 * time.Second
	// pipeWait bounds waiting for output pipes that a command's own
	// children keep open after it has ended.
	pipeWait    = 2 * time.Second
	stdoutLimit = 1 << 20  // bytes of stdout kept (the last ones)
	stderrLimit = 64 << 10 // bytes of stderr kept (the last ones)
	stderrLines = 5        // lines of stderr quoted in errors
)

// Exec runs a command, in the foreground or in the background. It is the
// exec and the shell step: one of Argv and Shell is set.
type Exec struct {
	Argv         []string          `yaml:"exec" doc:"the program and its arguments, run without a shell: [kubectl, delete, pod, broker-0]"`
	Shell        string            `yaml:"shell" doc:"a command line run with /bin/sh -c (instead of exec:)"`
	Timeout      time.Duration     `yaml:"timeout" doc:"kill the command's process group after this long (default 1m; background commands: no limit unless given)"`
	Env          map[string]string `yaml:"env" doc:"variables added to the command's environment"`
	Dir          string            `yaml:"dir" doc:"working directory (default: planrun's)"`
	As           string            `yaml:"as" doc:"keep the result as probes.<as> (exit, stdout, value, pid, running, signal); kill and pause name background commands by it"`
	AllowFailure bool              `yaml:"allow_failure" doc:"a non-zero exit or a timeout does not fail the step (default false)"`
	Background   bool              `yaml:"background" doc:"start the command and go on; it is stopped at the end of the run or by a kill step (default false)"`
	Grace        time.Duration     `yaml:"grace" doc:"background: time between SIGTERM and SIGKILL when the run ends (default 5s)"`

	mu   sync.Mutex
	proc *process // the background process of this run, once started
}

// KeptProbes is the probe the step keeps, if it has as:.
func (e *Exec) KeptProbes() []string { return []string{e.As} }

// Check insists on one command and a usable result name.
func (e *Exec) Check(c *plan.CheckContext) {
	switch {
	case len(e.Argv) == 0 && e.Shell == "":
		c.Errs.At(c.Node, "exec needs a command: exec: [program, args...] or shell: \"command line\"")
	case len(e.Argv) > 0 && e.Shell != "":
		c.Errs.At(c.Node, "exec: and shell: both given; a step runs one command: keep one")
	case len(e.Argv) > 0 && e.Argv[0] == "":
		c.Errs.At(c.Node, "exec: the program name is empty")
	case len(e.Argv) == 1 && strings.ContainsAny(e.Argv[0], " \t"):
		c.Errs.At(c.Node, "exec: %q is one program name with spaces in it; write a list, [program, arg, ...], or use shell: for a command line", e.Argv[0])
	}
	if e.As != "" && !validIdent(e.As) {
		c.Errs.At(c.Node, "exec: as: %q must be a name of letters, digits and _ (expressions use probes.%s)", e.As, e.As)
	}
	for k := range e.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			c.Errs.At(c.Node, "exec: env: %q is not a variable name", k)
		}
	}
	if hasKey(c, "grace") && !e.Background {
		c.Errs.At(c.Node, "exec: grace: is for background: true commands (how long they get between SIGTERM and SIGKILL)")
	}
}

// command is the command line as output and errors name it.
func (e *Exec) command() string {
	if e.Shell != "" {
		return e.Shell
	}
	return strings.Join(e.Argv, " ")
}

// Describe names the step in output.
func (e *Exec) Describe() string {
	s := "exec " + e.command()
	if e.Shell != "" {
		s = "shell " + e.Shell
	}
	if e.Background {
		s += " (background)"
	}
	if e.As != "" {
		s += " -> probes." + e.As
	}
	return s
}

// Run runs the command to its end, or starts it in the background.
func (e *Exec) Run(ctx context.Context, r plan.Runtime) error {
	if e.Background {
		return e.start(ctx, r)
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = execTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := e.spawn(cctx)
	if err != nil {
		return err
	}
	r.SetStatus(fmt.Sprintf("pid %d running", p.pid))
	p.end(p.cmd.Wait())
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", e.command(), context.Cause(ctx))
	}
	res := p.result()
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		res.timeout = timeout
	}
	if e.As != "" {
		r.SetProbe(e.As, res.probe())
		r.Printf("exec %s = %s\n", e.As, short(res.stdout))
	}
	switch {
	case p.waitErr != nil:
		return fmt.Errorf("%s: %w", e.command(), p.waitErr)
	case res.exit == 0:
		return nil
	case e.AllowFailure:
		r.Printf("exec %s: %s (allowed)\n", e.command(), res.outcome())
		return nil
	}
	return fmt.Errorf("%s: %s%s", e.command(), res.outcome(), stderrTail(res.stderr))
}

// spawn starts the command in a process group of its own; ctx ending kills
// the group.
func (e *Exec) spawn(ctx context.Context) (*process, error) {
	var cmd *exec.Cmd
	if e.Shell != "" {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", e.Shell)
	} else {
		cmd = exec.CommandContext(ctx, e.Argv[0], e.Argv[1:]...)
	}
	cmd.Dir = e.Dir
	if len(e.Env) > 0 {
		keys := make([]string, 0, len(e.Env))
		for k := range e.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		cmd.Env = os.Environ()
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+e.Env[k])
		}
	}
	p := &process{cmd: cmd, stdout: &tail{max: stdoutLimit}, stderr: &tail{max: stderrLimit}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return p.signal(syscall.SIGKILL) }
	cmd.WaitDelay = pipeWait
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: cannot start: %w", e.command(), err)
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// start runs the command in the background. A goroutine waits for it; it
// ends when the process does, which Close or a kill step bring about.
func (e *Exec) start(ctx context.Context, r plan.Runtime) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil {
		return fmt.Errorf("%s: started already in this run (pid %d)", e.command(), e.proc.pid)
	}
	// The command outlives the step: its context keeps ctx's values only.
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if e.Timeout > 0 {
		cancel()
		bctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), e.Timeout)
	}
	p, err := e.spawn(bctx)
	if err != nil {
		cancel()
		return err
	}
	p.kill, p.r = cancel, r
	e.proc = p
	if e.As != "" {
		r.SetProbe(e.As, result{pid: p.pid, exit: -1, running: true}.probe())
	}
	go func() {
		defer close(p.done)
		defer cancel()
		p.end(p.cmd.Wait())
		if errors.Is(bctx.Err(), context.DeadlineExceeded) {
			p.timeout = e.Timeout
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if e.As != "" && !p.detached {
			r.SetProbe(e.As, p.result().probe())
		}
	}()
	r.Printf("started pid %d in the background: %s\n", p.pid, e.command())
	return nil
}

// Close stops the background process at the end of the run: SIGTERM (and
// SIGCONT, should it be stopped), SIGKILL after the grace period or when
// ctx ends; then it says how the process ended. The engine calls it once
// at the end of every run.
func (e *Exec) Close(ctx context.Context) error {
	e.mu.Lock()
	p := e.proc
	e.proc = nil
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	what := fmt.Sprintf("exec %s (pid %d)", e.command(), p.pid)
	select {
	case <-p.done:
		return e.ended(p, what)
	default:
	}
	grace := e.Grace
	if grace <= 0 {
		grace = execGrace
	}
	p.expect()
	if err := p.signal(syscall.SIGTERM); err == nil {
		_ = p.signal(syscall.SIGCONT)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return e.ended(p, what)
	case <-t.C:
	case <-ctx.Done():
	}
	p.kill()
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	select {
	case <-p.done:
		return e.ended(p, what)
	case <-kctx.Done():
		p.mu.Lock()
		p.detached = true
		p.mu.Unlock()
		return fmt.Errorf("%s: still there %s after SIGKILL", what, killWait)
	}
}

// ended reports how a background process ended. One that ended by itself
// with a failure is an error (a warning of the run) unless allow_failure
// says otherwise.
func (e *Exec) ended(p *process, what string) error {
	if p.waitErr != nil {
		return fmt.Errorf("%s: %w", what, p.waitErr)
	}
	res := p.result()
	p.mu.Lock()
	expected := p.expected
	p.mu.Unlock()
	how := "stopped: "
	if !expected && res.timeout == 0 {
		how = "ended by itself: "
	}
	if !expected && res.exit != 0 && !e.AllowFailure {
		return fmt.Errorf("%s %s%s%s", what, how, res.outcome(), stderrTail(res.stderr))
	}
	p.r.Printf("%s %s%s\n", what, how, res.outcome())
	return nil
}

// current is the background process of this run, or nil.
func (e *Exec) current() *process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc
}

// process is a started command.
type process struct {
	cmd            *exec.Cmd
	pid            int
	stdout, stderr *tail
	r              plan.Runtime       // the run (background)
	kill           context.CancelFunc // kills the process group (background)
	done           chan struct{}      // closed once a background command has ended and is recorded
	waitErr        error              // Wait failed without an exit status
	timeout        time.Duration      // set when a background command's timeout killed it

	mu       sync.Mutex
	expected bool // the plan ended it (kill step or end of run)
	detached bool // the run is over: record nothing more
}

// end records what Wait returned. An error with an exit status (a failure,
// a kill, output pipes that stayed open) is in the result, not here.
func (p *process) end(err error) {
	if err != nil && p.cmd.ProcessState == nil {
		p.waitErr = err
	}
}

// expect notes that the plan itself ends the process.
func (p *process) expect() {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
}

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// result is what the command did, once it has ended.
func (p *process) result() result {
	res := result{pid: p.pid, stdout: strings.TrimSpace(p.stdout.String()), stderr: p.stderr.String(), exit: -1, timeout: p.timeout}
	if ps := p.cmd.ProcessState; ps != nil {
		res.exit = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.exit = 128 + int(ws.Signal())
			res.signal = signalName(ws.Signal())
		}
	}
	return res
}

type result struct {
	pid            int
	exit           int
	stdout, stderr string
	signal         string
	running        bool
	timeout        time.Duration // the time limit that killed it, if one did
}

// probe is the result as expressions see it: probes.<as>.exit and so on.
func (r result) probe() map[string]any {
	return map[string]any{
		"exit":    float64(r.exit),
		"stdout":  r.stdout,
		"value":   numeric(r.stdout),
		"pid":     float64(r.pid),
		"running": r.running,
		"signal":  r.signal,
	}
}

// outcome says how a command ended: "exit status 2", "killed by signal
// TERM", "timed out after 1m (process group killed)".
func (r result) outcome() string {
	switch {
	case r.timeout > 0:
		return fmt.Sprintf("timed out after %s (process group killed)", r.timeout)
	case r.signal != "":
		return "killed by signal " + r.signal
	}
	return "exit status " + strconv.Itoa(r.exit)
}

// stderrTail quotes the last lines of a command's stderr for an error.
func stderrTail(stderr string) string {
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) == 1 && strings.TrimSpace(lines[0]) == "" {
		return "; no stderr output"
	}
	if len(lines) > stderrLines {
		lines = lines[len(lines)-stderrLines:]
	}
	return "; stderr:\n    " + strings.Join(lines, "\n    ")
}

// short cuts a value for an output line.
func short(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return strconv.Quote(s)
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf []byte
	cut bool
}

func (t *tail) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(b), nil
}

// String is what was kept, from the first whole line when the start was cut.
func (t *tail) String() string {
	b := t.buf
	if t.cut {
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
