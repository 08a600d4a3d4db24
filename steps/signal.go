package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/yamldecode"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "kill", Doc: "send a signal to a process the plan names: `kill: {pidfile: /run/mosquitto.pid, signal: KILL}`", New: func() plan.Step { return &Kill{} }})
	plan.RegisterStep(plan.StepKind{Name: "pause", Doc: "stop a process (SIGSTOP) for a while, then continue it (SIGCONT): `pause: {pidfile: /run/mosquitto.pid, for: 5s}`", New: func() plan.Step { return &Pause{} }})
}

// signals are the signals a kill step may send.
var signals = []struct {
	name string
	sig  syscall.Signal
}{{"KILL", syscall.SIGKILL}, {"TERM", syscall.SIGTERM}, {"STOP", syscall.SIGSTOP}, {"CONT", syscall.SIGCONT}, {"INT", syscall.SIGINT}, {"HUP", syscall.SIGHUP}}

// parseSignal reads a signal name: KILL, kill or SIGKILL; empty is TERM.
func parseSignal(s string) (syscall.Signal, string, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if name == "" {
		return syscall.SIGTERM, "TERM", nil
	}
	var names []string
	for _, k := range signals {
		if k.name == name {
			return k.sig, k.name, nil
		}
		names = append(names, k.name)
	}
	return 0, "", fmt.Errorf("unknown signal %q; signals are: %s", s, strings.Join(names, ", "))
}

// signalName names a signal as kill steps and results do: KILL, SEGV, 11.
func signalName(sig syscall.Signal) string {
	for _, k := range signals {
		if k.sig == sig {
			return k.name
		}
	}
	switch sig {
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGPIPE:
		return "PIPE"
	}
	return strconv.Itoa(int(sig))
}

// procRef names one process: by pid, by pidfile, or as an earlier
// background exec step (whose process group is signalled). Never by a
// pattern.
type procRef struct {
	PID     *int   `yaml:"pid" doc:"the process id"`
	PIDFile string `yaml:"pidfile" doc:"a file holding the process id, read when the step runs"`
	Exec    string `yaml:"exec" doc:"the as: name of an earlier background exec step"`

	execs []*Exec // the earlier background exec steps with that name
}

// check insists on exactly one way of naming the process and finds the
// exec steps a name refers to.
func (p *procRef) check(c *plan.CheckContext, kind string) {
	n := keyValue(c, kind)
	var given []string
	if p.PID != nil {
		given = append(given, "pid")
		if *p.PID < 1 {
			c.Errs.At(n, "%s: pid must be 1 or more, got %d", kind, *p.PID)
		}
	}
	if p.PIDFile != "" {
		given = append(given, "pidfile")
	}
	if p.Exec != "" {
		given = append(given, "exec")
		var names []string
		for _, s := range c.Plan.Steps {
			if x, ok := s.Step.(*Exec); ok && x.Background && x.As != "" {
				names = append(names, x.As)
				if x.As == p.Exec {
					p.execs = append(p.execs, x)
				}
			}
		}
		if len(p.execs) == 0 {
			known := "there are none"
			if len(names) > 0 {
				known = "they are: " + strings.Join(names, ", ")
			}
			c.Errs.At(n, "%s: exec: no earlier background exec step has as: %s%s; %s", kind, p.Exec, yamldecode.Suggest(p.Exec, names), known)
		}
	}
	switch {
	case len(given) == 0:
		c.Errs.At(n, "%s needs the process: one of pid:, pidfile: or exec: (the as: of a background exec step)", kind)
	case len(given) > 1:
		c.Errs.At(n, "%s names the process once: one of pid:, pidfile: or exec:, not %s", kind, strings.Join(given, " and "))
	}
}

// String is the process as written in the plan.
func (p *procRef) String() string {
	switch {
	case p.PID != nil:
		return "pid " + strconv.Itoa(*p.PID)
	case p.PIDFile != "":
		return "pidfile " + p.PIDFile
	}
	return "exec " + p.Exec
}

// victim is a process found when a step runs.
type victim struct {
	pid   int
	from  string   // where the pid came from: a pidfile, "exec NAME"; empty for pid:
	group *process // a background exec: its process group is signalled
}

func (v victim) String() string {
	if v.from == "" {
		return "pid " + strconv.Itoa(v.pid)
	}
	return fmt.Sprintf("pid %d (%s)", v.pid, v.from)
}

// find resolves the process now; a missing pidfile or a process that has
// ended is an error.
func (p *procRef) find() (victim, error) {
	if p.Exec != "" {
		for i := len(p.execs) - 1; i >= 0; i-- {
			proc := p.execs[i].current()
			if proc == nil {
				continue
			}
			select {
			case <-proc.done:
				return victim{}, fmt.Errorf("exec %s (pid %d) has already ended: %s", p.Exec, proc.pid, proc.result().outcome())
			default:
			}
			return victim{pid: proc.pid, from: "exec " + p.Exec, group: proc}, nil
		}
		return victim{}, fmt.Errorf("exec %s is not running: no step has started it in this run", p.Exec)
	}
	v := victim{}
	if p.PID != nil {
		v.pid = *p.PID
	} else {
		data, err := os.ReadFile(p.PIDFile)
		if err != nil {
			return victim{}, fmt.Errorf("pidfile: %w", err)
		}
		v.from = p.PIDFile
		v.pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || v.pid < 1 {
			return victim{}, fmt.Errorf("pidfile %s: %q is not a process id", p.PIDFile, strings.TrimSpace(string(data)))
		}
	}
	if v.pid == os.Getpid() {
		return victim{}, fmt.Errorf("%s is planrun itself", v)
	}
	if err := syscall.Kill(v.pid, 0); errors.Is(err, syscall.ESRCH) || procState(v.pid) == 'Z' {
		return victim{}, fmt.Errorf("%s: no such process (it has ended)", v)
	} else if err != nil && !errors.Is(err, syscall.EPERM) {
		return victim{}, fmt.Errorf("%s: %w", v, err)
	}
	return v, nil
}

// signal sends sig to the process, or to a background exec's group.
func (v victim) signal(sig syscall.Signal) error {
	if v.group != nil {
		if sig != syscall.SIGSTOP && sig != syscall.SIGCONT {
			v.group.expect()
		}
		return v.group.signal(sig)
	}
	return syscall.Kill(v.pid, sig)
}

// procState is a process's state letter from /proc (R, S, T, Z...), or 0
// where it cannot be read.
func procState(pid int) byte {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name in parentheses may hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return 0
	}
	return data[i+2]
}

// Kill sends a signal to a process.
type Kill struct {
	Spec KillSpec `yaml:"kill" required:"true" doc:"the process (pid, pidfile or exec) and the signal"`
}

// KillSpec is the value of kill:.
type KillSpec struct {
	procRef
	Signal string `yaml:"signal" default:"TERM" doc:"KILL, TERM, STOP, CONT, INT or HUP"`
}

// UnmarshalPlan decodes the process and the signal from one mapping.
func (k *KillSpec) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	d.DecodeStructs(n, "kill", &k.procRef, k)
}

// Check checks the process and the signal.
func (k *Kill) Check(c *plan.CheckContext) {
	k.Spec.check(c, "kill")
	if _, _, err := parseSignal(k.Spec.Signal); err != nil {
		c.Errs.At(keyValue(c, "kill"), "kill: %v", err)
	}
}

// Describe names the step in output.
func (k *Kill) Describe() string {
	_, name, _ := parseSignal(k.Spec.Signal)
	return fmt.Sprintf("kill %s with %s", &k.Spec.procRef, name)
}

// Run sends the signal and says so.
func (k *Kill) Run(_ context.Context, r plan.Runtime) error {
	sig, name, err := parseSignal(k.Spec.Signal)
	if err != nil {
		return err
	}
	v, err := k.Spec.find()
	if err != nil {
		return err
	}
	if err := v.signal(sig); err != nil {
		return fmt.Errorf("kill %s with %s: %w", v, name, err)
	}
	r.Printf("killed %s with %s\n", v, name)
	return nil
}

// Pause stops a process for a while, then lets it go on.
type Pause struct {
	Spec PauseSpec `yaml:"pause" required:"true" doc:"the process (pid, pidfile or exec) and for how long"`
}

// PauseSpec is the value of pause:.
type PauseSpec struct {
	procRef
	For time.Duration `yaml:"for" required:"true" doc:"how long the process stays stopped"`
}

// UnmarshalPlan decodes the process and the time from one mapping.
func (p *PauseSpec) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	d.DecodeStructs(n, "pause", &p.procRef, p)
}

// Check checks the process and the time.
func (p *Pause) Check(c *plan.CheckContext) { p.Spec.check(c, "pause") }

// Describe names the step in output.
func (p *Pause) Describe() string {
	return fmt.Sprintf("pause %s for %s", &p.Spec.procRef, p.Spec.For)
}

// Run sends SIGSTOP, waits, and sends SIGCONT, also when the run is
// interrupted or fails meanwhile.
func (p *Pause) Run(ctx context.Context, r plan.Runtime) error {
	v, err := p.Spec.find()
	if err != nil {
		return err
	}
	if err := v.signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", v, err)
	}
	r.Printf("paused %s for %s\n", v, p.Spec.For)
	r.SetStatus(fmt.Sprintf("%s stopped", v))
	serr := sleep(ctx, p.Spec.For)
	if err := v.signal(syscall.SIGCONT); err != nil {
		return errors.Join(serr, fmt.Errorf("resuming %s: %w", v, err))
	}
	r.Printf("resumed %s\n", v)
	return serr
}

// keyValue is the value node of one of the step's keys, or the step's
// mapping when the key is not there: where errors about it point.
func keyValue(c *plan.CheckContext, key string) *yaml.Node {
	for i := 0; i+1 < len(c.Node.Content); i += 2 {
		if c.Node.Content[i].Value == key {
			return c.Node.Content[i+1]
		}
	}
	return c.Node
}
