package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "sleep", Doc: "wait a fixed time while workloads run: `sleep: 1m`", New: func() plan.Step { return &Sleep{} }})
	plan.RegisterStep(plan.StepKind{Name: "wait", Doc: "wait until an expression holds: `wait: backlog.bytes >= size(vars.backlog)` with timeout:", New: func() plan.Step { return &Wait{} }})
	plan.RegisterStep(plan.StepKind{Name: "assert", Doc: "check an expression; a false one makes planrun exit 1 but the run goes on and the report is written", New: func() plan.Step { return &Assert{} }})
}

// Sleep waits a fixed time.
type Sleep struct {
	For time.Duration `yaml:"sleep" required:"true" doc:"how long, such as 30s or 1m"`
}

// Describe names the step in output.
func (s *Sleep) Describe() string { return "sleep " + s.For.String() }

// Run sleeps, showing the time left in progress lines.
func (s *Sleep) Run(ctx context.Context, r plan.Runtime) error {
	end := time.Now().Add(s.For)
	r.SetStatusFunc(func(now time.Time) string { return timeLeft(end.Sub(now)) })
	t := time.NewTimer(s.For)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// timeLeft says how long a sleep has to go, to the second from 10 s, to a
// tenth of a second below; nothing once it is over.
func timeLeft(left time.Duration) string {
	if left <= 0 {
		return ""
	}
	round := time.Second
	if left < 10*time.Second {
		round = 100 * time.Millisecond
	}
	return max(left.Round(round), 100*time.Millisecond).String() + " left"
}

// Wait waits until a condition holds.
type Wait struct {
	Until     expr.BoolExpr `yaml:"wait" required:"true" doc:"expression that ends the wait when true"`
	Timeout   time.Duration `yaml:"timeout" doc:"give up after this long; required unless the condition uses elapsed or phase.elapsed"`
	Poll      time.Duration `yaml:"poll" default:"200ms" doc:"how often to evaluate the condition; it is also evaluated at once when a workload starts, stops or finishes"`
	OnTimeout string        `yaml:"on_timeout" default:"fail" doc:"fail (the run ends with exit code 3) or continue with the next step"`
}

// Check insists that a wait can end.
func (w *Wait) Check(c *plan.CheckContext) {
	src := w.Until.Src
	// A timeout that is there but wrong has its own error already.
	if w.Timeout == 0 && !strings.Contains(src, "elapsed") && !hasKey(c, "timeout") {
		c.Errs.At(c.Node, "wait %q has no way to end if the condition never holds: add timeout: (such as timeout: 1h), or bound it with phase.elapsed", src)
	}
	switch w.OnTimeout {
	case "", "fail", "continue":
	default:
		c.Errs.At(c.Node, "on_timeout must be fail or continue, got %q", w.OnTimeout)
	}
}

// Describe names the step in output.
func (w *Wait) Describe() string {
	if w.Timeout > 0 {
		return fmt.Sprintf("wait until %s (timeout %s)", w.Until.Src, w.Timeout)
	}
	return "wait until " + w.Until.Src
}

// ErrTimeout is a wait that ran out of time.
type ErrTimeout struct {
	Cond, Progress string
	After          time.Duration
}

func (e *ErrTimeout) Error() string {
	msg := fmt.Sprintf("timed out after %s waiting for %s", e.After, e.Cond)
	if e.Progress != "" {
		msg += "; last seen: " + e.Progress
	}
	return msg
}

// Run evaluates the condition every poll and whenever a workload starts,
// stops or finishes.
func (w *Wait) Run(ctx context.Context, r plan.Runtime) error {
	poll := w.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	start := time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		changed := r.Changed()
		env := r.Env()
		ok, err := w.Until.True(env)
		var na *expr.NAError
		if err != nil && !errors.As(err, &na) {
			return err
		}
		if ok {
			return nil
		}
		// A figure not measured yet (no messages so far) does not hold yet.
		progress := w.Until.Progress(env)
		if na != nil {
			progress = strings.TrimPrefix(strings.Join([]string{progress, na.Error()}, "; "), "; ")
		}
		r.SetStatus(progress)
		if w.Timeout > 0 && time.Since(start) >= w.Timeout {
			if w.OnTimeout == "continue" {
				r.Warn(fmt.Sprintf("wait %q timed out after %s; continuing (%s)", w.Until.Src, w.Timeout, progress))
				return nil
			}
			return &ErrTimeout{Cond: w.Until.Src, Progress: progress, After: w.Timeout}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		case <-changed:
		}
	}
}

// Assert checks a condition and records the outcome.
type Assert struct {
	Cond    expr.BoolExpr `yaml:"assert" required:"true" doc:"expression that must hold"`
	Message string        `yaml:"message" doc:"what it means when it does not hold"`
}

// Describe names the step in output.
func (a *Assert) Describe() string { return "assert " + a.Cond.Src }

// Run evaluates the condition; a false one is recorded, not an error.
func (a *Assert) Run(_ context.Context, r plan.Runtime) error {
	env := r.Env()
	ok, err := a.Cond.True(env)
	res := results.Assert{Step: fmt.Sprintf("line %d", a.Cond.Line), Expr: a.Cond.Src, Message: a.Message, Passed: ok && err == nil}
	switch {
	case err != nil:
		res.Detail = err.Error()
	case !ok:
		res.Detail = a.Cond.Progress(env)
		if res.Detail == "" {
			res.Detail = "the condition is false"
		}
		if a.Message != "" {
			res.Detail = a.Message + " (" + res.Detail + ")"
		}
	}
	r.AddAssert(res)
	return nil
}

// hasKey reports whether the step's mapping has the key.
func hasKey(c *plan.CheckContext, key string) bool {
	for i := 0; i+1 < len(c.Node.Content); i += 2 {
		if c.Node.Content[i].Value == key {
			return true
		}
	}
	return false
}
