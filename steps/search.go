package steps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/workloads"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "search", Doc: "find the highest rate a produce workload sustains: trials at rising rates, then bisection; the result is search.<as>.rate", New: func() plan.Step { return &Search{} }})
}

// Search finds the highest sustainable rate of a producer.
type Search struct {
	Workload  string         `yaml:"search" required:"true" doc:"the produce workload whose rate is searched; it is started if it is not running"`
	As        string         `yaml:"as" default:"the workload's name" doc:"name of the result in expressions and reports: search.<as>.rate"`
	From      float64        `yaml:"from" default:"1000" doc:"rate of the first trial, messages per second"`
	Factor    float64        `yaml:"factor" default:"2" doc:"each passed trial multiplies the rate by this until one fails"`
	Max       float64        `yaml:"max" doc:"highest rate to try; 0 = no bound"`
	Precision float64        `yaml:"precision" default:"0.02" doc:"bisection ends when the failing and passing rates are this close, as a fraction of the failing one"`
	Settle    time.Duration  `yaml:"settle" default:"2s" doc:"time at each new rate before measuring, not counted"`
	Trial     time.Duration  `yaml:"trial" default:"5s" doc:"measured time at each rate"`
	Until     *expr.BoolExpr `yaml:"until" doc:"condition a trial must also meet, over the trial's own figures (workload names read the trial's measured window), such as producer.latency.p99 < 50; default: the backlog of the plan's consumers does not grow"`
	Trials    int            `yaml:"trials" default:"20" doc:"most trials to run; the search stops with what it found so far"`
	Tolerance float64        `yaml:"tolerance" default:"0.01" doc:"a trial passes when its achieved rate is no more than this fraction below its target; raise it on a load machine that is itself busy"`
}

// Check checks the workload, the name and the numbers.
func (s *Search) Check(c *plan.CheckContext) {
	c.CheckWorkloads([]string{s.Workload}, "search")
	if w := c.Plan.Workload(s.Workload); w != nil && w.Kind.Name != "" {
		if _, ok := w.Kind.Settable["rate"]; !ok {
			c.Errs.At(c.Node, "search: workload %q is a %s workload; search needs one whose rate a set step can change (produce)", s.Workload, w.Kind.Name)
		}
	}
	if s.As != "" && !validIdent(s.As) {
		c.Errs.At(c.Node, "search: as: %q must be a name of letters, digits and _ (expressions use search.%s.rate)", s.As, s.As)
	}
	switch {
	case s.From < 0, s.Max < 0:
		c.Errs.At(c.Node, "search: from: and max: must be positive rates")
	case s.Factor != 0 && s.Factor <= 1:
		c.Errs.At(c.Node, "search: factor: must be more than 1, got %g", s.Factor)
	case s.Tolerance < 0 || s.Tolerance >= 1:
		c.Errs.At(c.Node, "search: tolerance: must be a fraction between 0 and 1, such as 0.01, got %g", s.Tolerance)
	case s.Precision < 0 || s.Precision >= 1:
		c.Errs.At(c.Node, "search: precision: must be a fraction between 0 and 1, such as 0.02, got %g", s.Precision)
	case s.Settle < 0 || s.Trial < 0 || s.Trials < 0:
		c.Errs.At(c.Node, "search: settle:, trial: and trials: must be positive")
	case s.Max > 0 && s.From > s.Max:
		c.Errs.At(c.Node, "search: from: %g is above max: %g", s.From, s.Max)
	}
}

func (s *Search) defaults() {
	if s.As == "" {
		s.As = s.Workload
	}
	if s.From == 0 {
		s.From = 1000
	}
	if s.Factor == 0 {
		s.Factor = 2
	}
	if s.Precision == 0 {
		s.Precision = 0.02
	}
	if s.Settle == 0 {
		s.Settle = 2 * time.Second
	}
	if s.Trial == 0 {
		s.Trial = 5 * time.Second
	}
	if s.Trials == 0 {
		s.Trials = 20
	}
	if s.Tolerance == 0 {
		s.Tolerance = 0.01
	}
}

// Describe names the step in output.
func (s *Search) Describe() string {
	as := s.As
	if as == "" {
		as = s.Workload
	}
	return fmt.Sprintf("search the highest rate of %s -> search.%s", s.Workload, as)
}

// rateResetter is a producer whose rate restarts clean for each trial.
type rateResetter interface {
	ResetRate(r workloads.Rate)
}

// Run runs the trials and stores the result.
func (s *Search) Run(ctx context.Context, r plan.Runtime) error {
	s.defaults()
	ws := r.Workloads([]string{s.Workload})
	if len(ws) == 0 {
		return fmt.Errorf("search: no workload %q", s.Workload)
	}
	w := ws[0]
	rr, ok := w.(rateResetter)
	if !ok {
		return fmt.Errorf("search: workload %q cannot change its rate while it runs", s.Workload)
	}
	began := time.Now()
	lo, hi := 0.0, math.Inf(1) // highest passed, lowest failed
	rate := s.From
	if s.Max > 0 {
		hi = s.Max * (1 + 1e-9) // max itself may be tried
	}
	trials := 0
	for trials < s.Trials {
		rr.ResetRate(workloads.FixedRate(rate))
		if !w.Running() {
			if err := w.Start(ctx); err != nil {
				return fmt.Errorf("search: %w", err)
			}
		}
		trials++
		pass, why, err := s.trial(ctx, r, rate, trials)
		if err != nil {
			return err
		}
		r.Printf("search %s: trial %d at %.0f msg/s %s (%s)\n", s.As, trials, rate, map[bool]string{true: "passed", false: "failed"}[pass], why)
		if pass {
			lo = rate
		} else {
			hi = rate
		}
		if math.IsInf(hi, 1) {
			rate *= s.Factor
		} else {
			if s.Max > 0 && lo >= s.Max || hi-lo <= s.Precision*hi {
				break
			}
			next := rate * s.Factor
			if !pass || next >= hi {
				next = (lo + hi) / 2
			}
			rate = next
		}
		if s.Max > 0 {
			rate = min(rate, s.Max)
		}
	}
	spent := time.Since(began)
	r.StartPhase(s.As + " found")
	rr.ResetRate(workloads.FixedRate(lo))
	failed := hi
	if math.IsInf(hi, 1) || s.Max > 0 && hi > s.Max {
		failed = 0
	}
	r.SetProbe(expr.SearchPrefix+s.As, map[string]float64{"rate": lo, "failed_rate": failed, "trials": float64(trials), "seconds": spent.Seconds()})
	r.Printf("search %s: highest sustained rate %.0f msg/s after %d trials in %s\n", s.As, lo, trials, spent.Round(time.Second))
	if lo == 0 {
		r.Warn(fmt.Sprintf("search %s: no trial passed, down to %.0f msg/s", s.As, hi))
	}
	return nil
}

// trial runs one rate: settle, then measure in a phase of its own, then
// judge the phase's figures.
func (s *Search) trial(ctx context.Context, r plan.Runtime, rate float64, n int) (bool, string, error) {
	name := fmt.Sprintf("%s %s", s.As, strconv.FormatFloat(rate, 'f', 0, 64))
	r.StartPhase(name + " settle")
	r.SetStatus(fmt.Sprintf("trial %d at %.0f msg/s: settling", n, rate))
	if err := sleep(ctx, s.Settle); err != nil {
		return false, "", err
	}
	startBacklog := backlogOf(r.Env())
	r.StartPhase(name)
	r.SetStatus(fmt.Sprintf("trial %d at %.0f msg/s: measuring", n, rate))
	if err := sleep(ctx, s.Trial); err != nil {
		return false, "", err
	}
	// The phase is judged as it stands now: counts to this instant, latency
	// to the last per-second sample. The next trial's phase closes it.
	env := r.Env()
	phases, _ := env["phases"].(map[string]map[string]metrics.Stats)
	figs := phases[name]
	st := figs[s.Workload]
	if metrics.IsNA(st.Rate) || st.Rate < (1-s.Tolerance)*rate {
		return false, fmt.Sprintf("achieved %.0f msg/s, below %g%% of the target", st.Rate, 100*(1-s.Tolerance)), nil
	}
	if s.Until != nil {
		trialEnv := make(map[string]any, len(env))
		for k, v := range env {
			trialEnv[k] = v
		}
		for wname, wst := range figs {
			trialEnv[wname] = wst
		}
		ok, err := s.Until.True(trialEnv)
		if na := (*expr.NAError)(nil); errors.As(err, &na) {
			// A trial in which a figure of the condition was not measured
			// did not pass.
			return false, na.Error(), nil
		}
		if err != nil {
			return false, "", fmt.Errorf("search: %w", err)
		}
		if !ok {
			return false, s.Until.Progress(trialEnv), nil
		}
		return true, fmt.Sprintf("achieved %.0f msg/s; %s", st.Rate, s.Until.Progress(trialEnv)), nil
	}
	grew := backlogOf(env) - startBacklog
	if grew > 0 && float64(grew) > 0.01*float64(st.Acked) {
		return false, fmt.Sprintf("achieved %.0f msg/s but the backlog grew by %d messages", st.Rate, grew), nil
	}
	return true, fmt.Sprintf("achieved %.0f msg/s", st.Rate), nil
}

func backlogOf(env map[string]any) int64 {
	b, _ := env["backlog"].(metrics.Backlog)
	return b.Messages
}
