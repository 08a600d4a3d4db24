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
	"github.com/planrun/planrun/results"
	"github.com/planrun/planrun/workloads"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "search", Doc: "find the highest rate a produce workload sustains: trials at rising rates, bisection, then a longer trial that confirms the rate found; the result is search.<as>.rate", New: func() plan.Step { return &Search{} }})
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
	Confirm   time.Duration  `yaml:"confirm" default:"3 × trial" doc:"measured time of the confirmation trial at the rate the bisection found; if it fails, the search steps down by precision and confirms again, at most 5 times, and the result is the rate confirmed (0 if none)"`
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
	case s.Settle < 0 || s.Trial < 0 || s.Trials < 0 || s.Confirm < 0:
		c.Errs.At(c.Node, "search: settle:, trial:, confirm: and trials: must be positive")
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
	if s.Confirm == 0 {
		s.Confirm = 3 * s.Trial
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
	rec := results.Search{Name: s.As, Workload: s.Workload}
	trials := 0
	for trials < s.Trials {
		rr.ResetRate(workloads.FixedRate(rate))
		if !w.Running() {
			if err := w.Start(ctx); err != nil {
				return fmt.Errorf("search: %w", err)
			}
		}
		trials++
		t, err := s.trial(ctx, r, rate, s.Trial, fmt.Sprintf("trial %d", trials), "")
		if err != nil {
			return err
		}
		rec.Trials = append(rec.Trials, t)
		r.Printf("search %s: trial %d at %.0f msg/s %s (%s)\n", s.As, trials, rate, passed(t.Passed), t.Detail)
		if t.Passed {
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
			if !t.Passed || next >= hi {
				next = (lo + hi) / 2
			}
			rate = next
		}
		if s.Max > 0 {
			rate = min(rate, s.Max)
		}
	}
	rec.Found = lo
	// A few seconds at a rate can pass by luck: the rate found must hold
	// for a longer confirmation trial, else the search steps down.
	confirmed, tried := 0.0, 0.0
	for i := 1; lo > 0 && i <= maxConfirmations; i++ {
		// Rounded to a millionth, so that 600 stepped down by 0.7 is 180.
		rate := math.Round(lo*math.Pow(1-s.Precision, float64(i-1))*1e6) / 1e6
		rr.ResetRate(workloads.FixedRate(rate))
		trials++
		t, err := s.trial(ctx, r, rate, s.Confirm, fmt.Sprintf("confirmation %d", i), " confirm")
		if err != nil {
			return err
		}
		t.Confirm = true
		rec.Trials = append(rec.Trials, t)
		r.Printf("search %s: confirmation %d at %.0f msg/s for %s %s (%s)\n", s.As, i, rate, s.Confirm, passed(t.Passed), t.Detail)
		tried = rate
		if t.Passed {
			confirmed = rate
			break
		}
	}
	rec.Rate = confirmed
	spent := time.Since(began)
	r.StartPhase(s.As + " found")
	// The producer goes on at the confirmed rate, or, when none held, at
	// the lowest rate tried.
	switch {
	case confirmed > 0:
		rr.ResetRate(workloads.FixedRate(confirmed))
	case tried > 0:
		rr.ResetRate(workloads.FixedRate(tried))
	default:
		rr.ResetRate(workloads.FixedRate(lo))
	}
	failed := hi
	if math.IsInf(hi, 1) || s.Max > 0 && hi > s.Max {
		failed = 0
	}
	confirmations := 0
	for _, t := range rec.Trials {
		if t.Confirm {
			confirmations++
		}
	}
	r.AddSearch(rec)
	r.SetProbe(expr.SearchPrefix+s.As, map[string]float64{"rate": confirmed, "found_rate": lo, "failed_rate": failed,
		"trials": float64(trials), "confirmations": float64(confirmations), "seconds": spent.Seconds()})
	switch {
	case lo == 0:
		r.Warn(fmt.Sprintf("search %s: no trial passed, down to %.0f msg/s", s.As, hi))
	case confirmed == 0:
		r.Warn(fmt.Sprintf("search %s: the bisection found %.0f msg/s, but no confirmation trial of %s passed, down to %.0f msg/s; the result is 0 (make trial: longer, or lower from:)", s.As, lo, s.Confirm, tried))
	default:
		r.Printf("search %s: highest sustained rate %.0f msg/s, confirmed for %s (the bisection found %.0f), after %d trials in %s\n", s.As, confirmed, s.Confirm, lo, trials, spent.Round(time.Second))
	}
	return nil
}

// maxConfirmations bounds the confirmation trials of a search.
const maxConfirmations = 5

func passed(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}

// trial runs one rate for d: settle, then measure in a phase of its own
// (named after the rate, plus suffix), then judge the phase's figures.
func (s *Search) trial(ctx context.Context, r plan.Runtime, rate float64, d time.Duration, what, suffix string) (results.SearchTrial, error) {
	t := results.SearchTrial{Rate: rate}
	name := fmt.Sprintf("%s %s%s", s.As, strconv.FormatFloat(rate, 'f', 0, 64), suffix)
	r.StartPhase(name + " settle")
	r.SetStatus(fmt.Sprintf("%s at %.0f msg/s: settling", what, rate))
	if err := sleep(ctx, s.Settle); err != nil {
		return t, err
	}
	startBacklog := backlogOf(r.Env())
	r.StartPhase(name)
	began := time.Now()
	r.SetStatus(fmt.Sprintf("%s at %.0f msg/s: measuring for %s", what, rate, d))
	if err := sleep(ctx, d); err != nil {
		return t, err
	}
	t.Seconds = time.Since(began).Seconds()
	// The phase is judged as it stands now: counts to this instant, latency
	// to the last per-second sample. The next trial's phase closes it.
	env := r.Env()
	phases, _ := env["phases"].(map[string]map[string]metrics.Stats)
	figs := phases[name]
	st := figs[s.Workload]
	t.Achieved, t.Acked, t.Failed, t.P99 = st.Rate, st.Acked, st.Failed, st.Latency.P99
	if metrics.IsNA(st.Rate) || st.Rate < (1-s.Tolerance)*rate {
		t.Detail = fmt.Sprintf("achieved %.0f msg/s, below %g%% of the target", st.Rate, 100*(1-s.Tolerance))
		return t, nil
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
			t.Detail = na.Error()
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("search: %w", err)
		}
		t.Passed = ok
		if !ok {
			t.Detail = s.Until.Progress(trialEnv)
			return t, nil
		}
		t.Detail = fmt.Sprintf("achieved %.0f msg/s; %s", st.Rate, s.Until.Progress(trialEnv))
		return t, nil
	}
	grew := backlogOf(env) - startBacklog
	if grew > 0 && float64(grew) > 0.01*float64(st.Acked) {
		t.Detail = fmt.Sprintf("achieved %.0f msg/s but the backlog grew by %d messages", st.Rate, grew)
		return t, nil
	}
	t.Passed = true
	t.Detail = fmt.Sprintf("achieved %.0f msg/s", st.Rate)
	return t, nil
}

func backlogOf(env map[string]any) int64 {
	b, _ := env["backlog"].(metrics.Backlog)
	return b.Messages
}
