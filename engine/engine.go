// Package engine runs loaded plans: it opens targets, builds workloads,
// runs the steps in order with the per-second sampling and progress lines
// beside them, and returns everything measured as a result, also when a run
// fails or is interrupted.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/redact"
	"github.com/planrun/planrun/results"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/workloads"
)

// Engine runs plans.
type Engine struct {
	Out     io.Writer // progress lines and messages
	Version string
	// Series, when set, receives every per-second sample as a JSON line
	// while the run goes on.
	Series io.Writer
	// StopTimeout bounds how long stopping workloads and what steps left
	// running may take at the end of a run or after an interrupt (default 30s).
	StopTimeout time.Duration
	// ConnectTimeout bounds opening each target and creating each topic
	// (default 60s).
	ConnectTimeout time.Duration

	// Remote, when set, runs the workloads in worker processes: the engine
	// builds the stand-ins Remote gives instead of the workloads.
	Remote Remote
	// Observer, when set, follows each run as it goes (the live page).
	Observer Observer

	mu      sync.Mutex
	outMu   sync.Mutex // one line at a time on Out
	current *metrics.Collector
	secrets map[string]bool
}

// Current is a snapshot of the run going on (empty between runs), for a
// live metrics endpoint.
func (e *Engine) Current() metrics.Snapshot {
	e.mu.Lock()
	c := e.current
	e.mu.Unlock()
	if c == nil {
		return metrics.Snapshot{}
	}
	return c.Snapshot(time.Now(), false)
}

func (e *Engine) setCurrent(c *metrics.Collector) {
	e.mu.Lock()
	e.current = c
	e.mu.Unlock()
}

// Observer follows a run while it goes on. Observe is called after each
// per-second sample (after fewer when one observation took more than a
// tenth of a second: never more than about a tenth of the time) from a
// goroutine that does nothing else, so a slow Observe delays only the
// next call, never the run; the end of a run waits for the call in
// progress. What Live holds may be read until Observe returns and must not
// be changed.
type Observer interface {
	Observe(Live)
}

// Live is a run's state of the moment, as a live page shows it.
type Live struct {
	// Result is the result so far, secrets redacted: the runs finished
	// (of a matrix) and the current one with status "running" and its
	// figures up to now (series, events, outages), the phase going on as
	// the last of its Metrics.Phases. Its Finished times are the moment
	// observed.
	Result *results.Result
	// Progress is the progress lines of the moment without their clock:
	// one per running workload with rates over the last second, and the
	// current step's status (such as a wait's distance to its target).
	Progress []string
}

// Remote runs a plan's workloads in other processes (planrun workers).
type Remote interface {
	// Begin prepares one run (one matrix combination, index) on the
	// workers; shared is the run's, targets resolves the targets the
	// engine opened. Problems of the workers during the run go to
	// shared.Fail and shared.Warn.
	Begin(ctx context.Context, p *plan.Plan, index int, shared *workloads.Shared, targets func(string) drivers.Target) (RemoteRun, error)
}

// RemoteRun is one run on workers.
type RemoteRun interface {
	// Build returns the stand-in of a workload: starting and stopping it
	// starts and stops its shards, and its recorder gets the shards'
	// merged figures.
	Build(w *plan.WorkloadDef, id uint16) (workloads.Workload, error)
	// End releases the workers after the workloads stopped and says what
	// they were.
	End(ctx context.Context) []results.Worker
}

// Flusher is a RemoteRun that can merge every worker's figures up to now:
// the engine flushes before it cuts a phase.
type Flusher interface {
	Flush(ctx context.Context)
}

// ErrInterrupted marks a run ended by a signal.
var ErrInterrupted = errors.New("interrupted")

// Run is one combination's run as steps see it.
type Run struct {
	Plan    *plan.Plan
	engine  *Engine
	coll    *metrics.Collector
	targets map[string]drivers.Target
	works   map[string]workloads.Workload
	shared  *workloads.Shared
	remote  RemoteRun

	mu        sync.Mutex
	probes    map[string]any
	searches  []results.Search
	asserts   []results.Assert
	warnings  []string
	phase     string
	phaseAt   time.Time
	status    func(now time.Time) string // the current step's, nil between steps
	curStep   string
	curDef    *plan.StepDef // the step running, nil between steps
	failCause context.CancelCauseFunc
	failErr   error
	samplers  []plan.Sampler
	sampled   chan struct{} // a sample was taken, for the observer
	changed   chan struct{} // closed and replaced at each workload change
	// ctx ends with the run: background work such as collector scrapes
	// hangs off it, so an interrupt cancels them.
	ctx context.Context
}

// Execute runs every plan instance (one per matrix combination) in order
// and returns what was measured, also when a run failed or was interrupted.
func (e *Engine) Execute(ctx context.Context, src *plan.Source, plans []*plan.Plan) *results.Result {
	if e.StopTimeout == 0 {
		e.StopTimeout = 30 * time.Second
	}
	if e.ConnectTimeout == 0 {
		e.ConnectTimeout = 60 * time.Second
	}
	e.mu.Lock()
	e.secrets = src.Secrets
	e.mu.Unlock()
	host, _ := os.Hostname()
	res := &results.Result{
		Plan: src.Name, File: src.File, Description: src.Description, Version: e.Version,
		Started: time.Now(), Status: results.Passed, Vars: redactVars(src), VarOrder: src.VarOrder,
		Environment: results.Environment{Host: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
		Units:       "rates in messages/s; MB = 10^6 bytes, MiB = 2^20 bytes; latency in ms, measured from the intended send time",
	}
	if len(plans) > 0 {
		res.Title = plans[0].Report.Title
	}
	for i, p := range plans {
		if len(plans) > 1 {
			e.printf("== run %d/%d: %s\n", i+1, len(plans), plan.Label(p.Combination))
		}
		run := e.executeOne(ctx, p, i, res)
		res.Runs = append(res.Runs, run)
		if run.Status == results.Failed || run.Status == results.Interrupted {
			res.Status, res.Error = run.Status, run.Error
			break
		}
		if run.Status == results.AssertFail && res.Status == results.Passed {
			res.Status = results.AssertFail
		}
	}
	res.Finished = time.Now()
	if len(plans) > 0 {
		res.Tables = buildTables(plans, res.Runs)
	}
	// Every run's figures are checked against the invariants a reader
	// relies on (phases that add up to the run, ...); a violation is a
	// defect of planrun and shows in the result and the report.
	res.Format = results.FormatVersion
	res.Violations = res.Check().Violations
	for _, v := range res.Violations {
		e.printf("planrun: figures do not add up: %s\n", v)
	}
	redact.RedactAll(res, src.Secrets)
	return res
}

func redactVars(src *plan.Source) map[string]string {
	out := make(map[string]string, len(src.Vars))
	for k, v := range src.Vars {
		out[k] = redact.Redact(v, src.Secrets)
	}
	return out
}

func (e *Engine) printf(format string, args ...any) {
	if e.Out != nil {
		e.mu.Lock()
		secrets := e.secrets
		e.mu.Unlock()
		line := redact.Redact(fmt.Sprintf(format, args...), secrets)
		// Steps, progress and event lines come from different goroutines.
		e.outMu.Lock()
		defer e.outMu.Unlock()
		fmt.Fprint(e.Out, line)
	}
}

func (e *Engine) executeOne(ctx context.Context, p *plan.Plan, index int, res *results.Result) results.Run {
	now := time.Now()
	out := results.Run{Index: index, Label: plan.Label(p.Combination), Started: now, Status: results.Passed, Kinds: map[string]string{}, Roles: map[string]metrics.Role{}}
	if len(p.Combination) > 0 {
		out.Combination = map[string]string{}
		for _, kv := range p.Combination {
			out.Combination[kv.Name] = kv.Value
		}
	}
	r := &Run{Plan: p, engine: e, coll: metrics.NewCollector(now), targets: map[string]drivers.Target{}, works: map[string]workloads.Workload{},
		probes: map[string]any{}, phase: metrics.OpeningPhase, phaseAt: now}
	r.coll.SetSink(e.Series, out.Label)
	if e.Observer != nil {
		r.sampled = make(chan struct{}, 1)
	}
	e.setCurrent(r.coll)
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()

	fail := func(err error) {
		out.Status, out.Error = results.Failed, redact.Redact(err.Error(), p.Secrets)
		if errors.Is(err, ErrInterrupted) || (ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			out.Status, out.Error = results.Interrupted, "interrupted by signal"
		}
	}

	var bg sync.WaitGroup
	r.ctx = runCtx
	setupErr := r.setup(ctx, index, res)
	if setupErr == nil {
		r.coll.SetSeriesHeader(seriesHeader(res, p, index, out.Label))
		bg.Add(1)
		go func() { defer bg.Done(); r.sample(runCtx) }()
		for _, w := range r.works {
			if pw, ok := w.(workloads.Poller); ok {
				bg.Add(1)
				go func() { defer bg.Done(); pw.Poll(runCtx) }()
			}
		}
		bg.Add(1)
		go func() { defer bg.Done(); r.progress(runCtx) }()
		if e.Observer != nil {
			head := out
			head.Combination = maps.Clone(out.Combination)
			bg.Add(1)
			go func() { defer bg.Done(); r.observe(runCtx, res, head) }()
		}
		if err := r.steps(ctx, &out); err != nil {
			fail(err)
		}
	} else {
		fail(setupErr)
	}

	// Stop everything with a fresh deadline: an interrupt must still stop
	// the workloads and write what was measured.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.StopTimeout)
	defer cancel()
	r.stopAll(stopCtx, ctx.Err() == nil)
	if r.remote != nil {
		out.Workers = r.remote.End(stopCtx)
	}
	r.closeSteps(stopCtx)
	cancelRun()
	bg.Wait()
	// Events of the last, incomplete second are announced too.
	for _, line := range r.coll.Announcements(time.Now().Add(time.Second)) {
		r.engine.printf("%s %s\n", clock(r.coll.Start()), line)
	}
	out.Metrics = r.coll.Finish(time.Now())
	for name, w := range r.works {
		out.Kinds[name] = w.Recorder().Kind
		out.Roles[name] = w.Recorder().Role
	}
	out.Metrics.FinalRates(out.Roles)
	r.closeTargets()
	for _, s := range r.samplers {
		if err := s.Close(); err != nil {
			r.Warn(fmt.Sprintf("collector: closing: %v", err))
		}
	}
	e.setCurrent(nil)
	r.mu.Lock()
	out.Asserts = r.asserts
	out.Probes = r.probes
	out.Searches = r.searches
	out.Warnings = r.warnings
	r.mu.Unlock()
	for _, a := range out.Asserts {
		if !a.Passed && out.Status == results.Passed {
			out.Status = results.AssertFail
		}
	}
	out.Finished = time.Now()
	e.summary(&out)
	return out
}

// seriesHeader opens the run's lines in the series file: the result as
// far as it is known before the run, so that a report can be made from
// the file alone.
func seriesHeader(res *results.Result, p *plan.Plan, index int, label string) metrics.SeriesHeader {
	head := *res
	head.Runs, head.Tables = nil, nil
	head.Targets = append([]results.Target(nil), res.Targets...)
	redact.RedactAll(&head, p.Secrets)
	info, _ := json.Marshal(&head)
	return metrics.SeriesHeader{Result: info, Index: index, Label: label}
}

func (r *Run) setup(ctx context.Context, index int, res *results.Result) error {
	p := r.Plan
	r.shared = &workloads.Shared{Run: uint16(rand.Uint32()), Start: r.coll.Start(), Fail: r.fail, Warn: r.Warn, Changed: r.notifyChanged}
	r.shared.Acct = workloads.NewAccounting(r.shared.Run)
	for _, t := range p.Targets {
		octx, cancel := context.WithTimeout(ctx, r.engine.ConnectTimeout)
		tg, err := t.Open(octx)
		cancel()
		if err != nil {
			return fmt.Errorf("target %q (%s): %w", t.Name, t.Driver, err)
		}
		r.targets[t.Name] = tg
		what := ""
		if d, ok := drivers.As[drivers.Describer](tg); ok {
			what = d.Describe()
			r.engine.printf("target %s: %s\n", t.Name, what)
		}
		if index == 0 {
			res.Targets = append(res.Targets, results.Target{Name: t.Name, Driver: t.Driver, What: what})
		}
		topics := make([]string, 0, len(t.Topics))
		for name := range t.Topics {
			topics = append(topics, name)
		}
		sort.Strings(topics)
		for _, topic := range topics {
			tc, ok := drivers.As[drivers.TopicCreator](tg)
			if !ok {
				r.Warn(fmt.Sprintf("target %q: driver %s cannot create topics; topic %q must exist", t.Name, t.Driver, topic))
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, r.engine.ConnectTimeout)
			err := tc.CreateTopic(cctx, topic, t.Topics[topic].Partitions)
			cancel()
			if err != nil {
				return fmt.Errorf("target %q: creating topic %q: %w", t.Name, topic, err)
			}
		}
	}
	if r.engine.Remote != nil {
		rr, err := r.engine.Remote.Begin(ctx, p, index, r.shared, r.Target)
		if err != nil {
			return err
		}
		r.remote = rr
	}
	for i, w := range p.Workloads {
		var wl workloads.Workload
		var err error
		if r.remote != nil {
			wl, err = r.remote.Build(w, uint16(i))
		} else {
			wl, err = w.Section.Build(&workloads.Build{Name: w.Name, ID: uint16(i), Target: w.Target, Targets: r.Target, Shared: r.shared})
		}
		if err != nil {
			return fmt.Errorf("workload %q: %w", w.Name, err)
		}
		r.works[w.Name] = wl
		r.coll.Add(wl.Recorder())
	}
	for _, c := range p.Collectors {
		s, err := c.Config.Open(ctx)
		if err != nil {
			if c.Required {
				return fmt.Errorf("collector %q: %w", c.Name, err)
			}
			r.Warn(fmt.Sprintf("collector %q: %v (its figures stay empty)", c.Name, err))
			continue
		}
		r.samplers = append(r.samplers, s)
		r.coll.AddExtra(&collectorSampler{run: r, def: c, s: s})
	}
	return nil
}

// collectorSampler adapts a plan collector to the metrics collector,
// naming each figure <collector>.<figure>.
type collectorSampler struct {
	run    *Run
	def    *plan.CollectorDef
	s      plan.Sampler
	warned bool
}

func (c *collectorSampler) Sample() map[string]float64 {
	ctx, cancel := context.WithTimeout(c.run.ctx, 900*time.Millisecond)
	defer cancel()
	vals, err := c.s.Sample(ctx)
	if err != nil {
		if c.def.Required {
			c.run.fail(fmt.Errorf("collector %q: %w", c.def.Name, err))
		} else if !c.warned {
			c.warned = true
			c.run.Warn(fmt.Sprintf("collector %q: %v (reported once; sampling goes on)", c.def.Name, err))
		}
		// Figures the collector did read still count: one metric a broker
		// has not created yet must not blank the others.
	}
	out := make(map[string]float64, len(vals))
	for k, v := range vals {
		out[c.def.Name+"."+k] = v
	}
	return out
}

func (r *Run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failErr == nil {
		r.failErr = err
	}
	if r.failCause != nil {
		r.failCause(err)
	}
}

// Warn records a problem for the output and the report.
func (r *Run) Warn(msg string) {
	msg = redact.Redact(msg, r.Plan.Secrets)
	r.mu.Lock()
	r.warnings = append(r.warnings, msg)
	r.mu.Unlock()
	r.engine.printf("warning: %s\n", msg)
}

func (r *Run) steps(ctx context.Context, out *results.Run) error {
	for _, s := range r.Plan.Steps {
		r.mu.Lock()
		err := r.failErr
		r.mu.Unlock()
		if err != nil {
			out.FailedStep = "background"
			return err
		}
		what := s.Describe()
		if d := describeStep(s); d != "" {
			what += ": " + d
		}
		if s.Phase != "" {
			what += " [phase " + s.Phase + "]"
		}
		rec := results.Step{Index: s.Index, What: what, Phase: s.Phase, StartS: time.Since(r.coll.Start()).Seconds()}
		if s.If != nil {
			ok, err := s.If.True(r.Env())
			if err != nil {
				out.FailedStep = s.Describe()
				return fmt.Errorf("%s: if: %w", s.Describe(), err)
			}
			if !ok {
				rec.Skipped = true
				out.Steps = append(out.Steps, rec)
				r.skippedProbes(s)
				continue
			}
		}
		if s.Phase != "" {
			r.StartPhase(s.Phase)
		}
		r.mu.Lock()
		r.curStep, r.curDef = rec.What, s
		r.status = nil
		r.mu.Unlock()
		r.engine.printf("%s %s\n", clock(r.coll.Start()), rec.What)
		sctx, cancel := context.WithCancelCause(ctx)
		r.mu.Lock()
		r.failCause = cancel
		if r.failErr != nil {
			cancel(r.failErr)
		}
		r.mu.Unlock()
		err = s.Step.Run(sctx, r)
		if err == nil && sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		r.mu.Lock()
		r.failCause = nil
		r.status, r.curDef = nil, nil // a step's status ends with it
		r.mu.Unlock()
		cause := context.Cause(sctx)
		cancel(nil)
		rec.Duration = time.Since(r.coll.Start()).Seconds() - rec.StartS
		if err != nil {
			if ctx.Err() != nil {
				err = ErrInterrupted
			} else if cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			rec.Error = redact.Redact(err.Error(), r.Plan.Secrets)
			out.Steps = append(out.Steps, rec)
			out.FailedStep = s.Describe()
			if errors.Is(err, ErrInterrupted) {
				return err
			}
			return fmt.Errorf("%s: %w", s.Describe(), err)
		}
		out.Steps = append(out.Steps, rec)
	}
	return nil
}

func describeStep(s *plan.StepDef) string {
	if d, ok := s.Step.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return s.Kind
}

func clock(start time.Time) string {
	d := time.Since(start).Truncate(time.Second)
	return fmt.Sprintf("[%02d:%02d:%02d]", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// StartPhase closes the current metrics phase and opens name.
func (r *Run) StartPhase(name string) {
	if f, ok := r.remote.(Flusher); ok {
		ctx, cancel := context.WithTimeout(r.ctx, r.engine.StopTimeout)
		f.Flush(ctx)
		cancel()
	}
	now := time.Now()
	r.coll.StartPhase(name, now)
	r.mu.Lock()
	r.phase, r.phaseAt = name, now
	r.mu.Unlock()
}

// Workloads resolves names ("all" = every workload) to running objects.
func (r *Run) Workloads(names []string) []workloads.Workload {
	var out []workloads.Workload
	seen := map[string]bool{}
	for _, n := range names {
		if n == "all" {
			for _, w := range r.Plan.Workloads {
				// A run whose setup failed has only some workloads.
				if wl, ok := r.works[w.Name]; ok && !seen[w.Name] {
					seen[w.Name] = true
					out = append(out, wl)
				}
			}
			continue
		}
		if w, ok := r.works[n]; ok && !seen[n] {
			seen[n] = true
			out = append(out, w)
		}
	}
	return out
}

// Changed returns a channel closed the next time a workload starts, stops
// or finishes.
func (r *Run) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// notifyChanged wakes whoever holds the channel Changed returned.
func (r *Run) notifyChanged() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Target returns an opened target.
func (r *Run) Target(name string) drivers.Target { return r.targets[name] }

// SetStatus sets the line progress output shows for the current step.
func (r *Run) SetStatus(s string) {
	r.SetStatusFunc(func(time.Time) string { return s })
}

// SetStatusFunc has the current step's progress line computed when it is
// printed.
func (r *Run) SetStatusFunc(f func(now time.Time) string) {
	r.mu.Lock()
	r.status = f
	r.mu.Unlock()
}

// AddAssert records an assert's outcome, with the step that made it named
// as steps are everywhere.
func (r *Run) AddAssert(a results.Assert) {
	r.mu.Lock()
	if r.curDef != nil {
		a.Step = r.curDef.Describe()
	}
	r.asserts = append(r.asserts, a)
	r.mu.Unlock()
	mark := "ok"
	if !a.Passed {
		mark = "FAILED"
	}
	detail := ""
	if a.Detail != "" {
		detail = ": " + a.Detail
	}
	r.engine.printf("assert %s: %s%s\n", mark, a.Expr, detail)
}

// skippedProbes records the probes a step skipped by its if: would have
// kept as empty (JSON null, an empty report cell), unless an earlier step
// kept a value under the same name.
func (r *Run) skippedProbes(s *plan.StepDef) {
	k, ok := s.Step.(plan.ProbeKeeper)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range k.KeptProbes() {
		if _, set := r.probes[name]; name != "" && !set {
			r.probes[name] = nil
		}
	}
}

// SetProbe stores a probe's result for expressions and reports.
func (r *Run) SetProbe(name string, v any) {
	r.mu.Lock()
	r.probes[name] = v
	r.mu.Unlock()
}

// AddSearch records a search step's trials.
func (r *Run) AddSearch(s results.Search) {
	r.mu.Lock()
	r.searches = append(r.searches, s)
	r.mu.Unlock()
}

// Printf writes a line of output.
func (r *Run) Printf(format string, args ...any) { r.engine.printf(format, args...) }

// stopAll stops every workload at the end of a run as a stop step does
// (workloads.StopInOrder), with the default drain unless the run was
// interrupted.
func (r *Run) stopAll(ctx context.Context, drain bool) {
	d := workloads.DefaultDrain
	if !drain {
		d = 0
	}
	if err := workloads.StopInOrder(ctx, r.Workloads([]string{"all"}), d); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			r.Warn(line)
		}
	}
}

// closeSteps ends what steps left running beyond their Run, such as
// background commands: a step with a Close method has it called once at the
// end of every run (passed, failed or interrupted, with the stop deadline),
// after the workloads have stopped, last step first.
func (r *Run) closeSteps(ctx context.Context) {
	for i := len(r.Plan.Steps) - 1; i >= 0; i-- {
		s := r.Plan.Steps[i]
		if c, ok := s.Step.(interface{ Close(context.Context) error }); ok {
			if err := c.Close(ctx); err != nil {
				r.Warn(fmt.Sprintf("%s: %v", s.Describe(), err))
			}
		}
	}
}

func (r *Run) closeTargets() {
	for name, t := range r.targets {
		if err := t.Close(); err != nil {
			r.Warn(fmt.Sprintf("target %q: closing: %v", name, err))
		}
	}
}

// sample feeds the collector once a second until the run ends, on a grid
// that restarts at every phase change (see metrics.Collector.NextSample),
// so that per-second points never straddle a phase's edge.
func (r *Run) sample(ctx context.Context) {
	t := time.NewTimer(time.Until(r.coll.NextSample()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// A phase change since the timer was set moved the next sample on.
			sampled := r.coll.Tick(now)
			t.Reset(time.Until(r.coll.NextSample()))
			if !sampled {
				continue
			}
			// Connection events are announced as they happen, counted per
			// second, whatever the progress interval.
			for _, line := range r.coll.Announcements(now) {
				r.engine.printf("%s %s\n", clock(r.coll.Start()), line)
			}
			if r.sampled != nil {
				select {
				case r.sampled <- struct{}{}:
				default: // the observer is still busy with the previous one
				}
			}
		}
	}
}

// progress prints a line per running workload every Progress interval, in
// the spirit of kafka-producer-perf-test, and the current step's status.
func (r *Run) progress(ctx context.Context) {
	every := r.Plan.Progress
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var ps progressState
	ps.reset(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, line := range r.progressLines(&ps, time.Now()) {
			r.engine.printf("%s %s\n", clock(r.coll.Start()), line)
		}
	}
}

// intervalRates are the rates of progress lines: the messages and bytes
// counted since a workload's previous line over the time it ran since
// then, not over the whole interval (a workload that started 1.5 s before
// the line has 1.5 s of messages).
type intervalRates map[string]rateMark

type rateMark struct {
	count, bytes int64
	ran          time.Duration
}

// next takes a workload's counts and running time now and returns its
// rates since the previous call (zero when it did not run in between).
func (ir intervalRates) next(name string, count, bytes int64, ran time.Duration) (msgs, mbps float64) {
	p := ir[name]
	ir[name] = rateMark{count: count, bytes: bytes, ran: ran}
	if secs := (ran - p.ran).Seconds(); secs > 0 {
		return float64(count-p.count) / secs, float64(bytes-p.bytes) / secs / 1e6
	}
	return 0, 0
}

// progressState is what one reader of progress lines keeps between two
// readings: the rates of a line cover the time since the previous one.
type progressState struct {
	last  float64
	rates intervalRates
}

func (ps *progressState) reset(time.Time) {
	ps.last, ps.rates = 0, intervalRates{}
}

// progressLines are the progress lines of now, without their clock: one
// per running workload, and the current step's status.
func (r *Run) progressLines(ps *progressState, now time.Time) []string {
	var lines []string
	wins := r.coll.Windows(ps.last)
	ps.last = now.Sub(r.coll.Start()).Seconds()
	snap := r.coll.Snapshot(now, false)
	for _, name := range snap.Order {
		st := snap.Workloads[name]
		rec := r.works[name].Recorder()
		role := rec.Role
		count, bytes := st.Received, st.BytesReceived
		if !role.Receives {
			count, bytes = st.Acked, st.BytesAcked
		}
		msgs, mbps := ps.rates.next(name, count, bytes, rec.RunningTime(now))
		if !st.Running {
			continue
		}
		w := wins[name]
		var line string
		switch {
		case role.Connects:
			line = formatGauges(st.Gauges)
		case !role.Receives:
			line = fmt.Sprintf("%d sent, %.1f msg/s (%.2f MB/s), latency p99 %s (run: avg %s, max %s), %d failed",
				st.Acked, msgs, mbps, msOrNA(w.P99, w.Samples), msOrNA(st.Latency.Avg, 1), msOrNA(st.Latency.Max, 1), st.Failed)
		default:
			line = fmt.Sprintf("%d received, %.1f msg/s (%.2f MB/s), e2e p99 %s, backlog %d msgs (%s)",
				st.Received, msgs, mbps, msOrNA(w.E2EP99, w.Samples), st.Backlog.Messages, units.Human(float64(st.Backlog.Bytes)))
			if st.Lag >= 0 {
				line += fmt.Sprintf(", broker lag %d", st.Lag)
				if !metrics.IsNA(st.LagAge) && st.LagAge >= 0.05 {
					line += fmt.Sprintf(" (%.1f s old)", st.LagAge)
				}
			}
			if role.Relays() {
				line += fmt.Sprintf(", %d relayed", st.Acked)
			}
		}
		lines = append(lines, fmt.Sprintf("%s: %s", name, line))
	}
	r.mu.Lock()
	status, step := r.status, r.curStep
	r.mu.Unlock()
	if status != nil {
		if s := status(now); s != "" {
			lines = append(lines, fmt.Sprintf("%s: %s", step, s))
		}
	}
	return lines
}

// observe hands the observer the run's state after each sample until the
// run ends. head is the run as it began (index, label, start).
func (r *Run) observe(ctx context.Context, res *results.Result, head results.Run) {
	var ps progressState
	ps.reset(time.Now())
	// An observation that took long (a day of series to copy and draw)
	// is not made again for ten times as long: the observer takes at most
	// about a tenth of a core.
	var next time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.sampled:
		}
		now := time.Now()
		if now.Before(next) {
			continue
		}
		lines := r.progressLines(&ps, now)
		run := head
		// Finished is the moment observed: what a page shows as the time
		// the run took so far.
		run.Status, run.Finished = "running", now
		run.Metrics = r.coll.Snapshot(now, true)
		if run.Metrics.Phase.Name != metrics.OpeningPhase || hasFigures(run.Metrics.Phase) {
			run.Metrics.Phases = append(run.Metrics.Phases, run.Metrics.Phase)
		}
		run.Kinds, run.Roles = map[string]string{}, map[string]metrics.Role{}
		for name, w := range r.works {
			run.Kinds[name] = w.Recorder().Kind
			run.Roles[name] = w.Recorder().Role
		}
		run.Metrics.FinalRates(run.Roles)
		r.mu.Lock()
		run.Asserts = slices.Clone(r.asserts)
		run.Probes = maps.Clone(r.probes)
		run.Searches = slices.Clone(r.searches)
		run.Warnings = slices.Clone(r.warnings)
		r.mu.Unlock()
		cur := *res
		cur.Status, cur.Finished = "running", now
		cur.Runs = append(slices.Clone(res.Runs), run)
		cur.Vars = maps.Clone(res.Vars)
		cur.Targets = slices.Clone(res.Targets)
		if err := redactLive(&cur, r.Plan.Secrets); err != nil {
			continue // nothing is shown rather than a secret
		}
		for i, l := range lines {
			lines[i] = redact.Redact(l, r.Plan.Secrets)
		}
		r.engine.Observer.Observe(Live{Result: &cur, Progress: lines})
		next = now.Add(10 * time.Since(now))
	}
}

// redactLive redacts a live result. Much of it is shared with the run
// going on (the closed phases' maps, probe values, the series points'
// gauges): it is redacted in a copy of its own, made through JSON but for
// the series, whose points are copies already and have only their phase
// names to redact.
func redactLive(res *results.Result, secrets map[string]bool) error {
	if len(secrets) == 0 {
		return nil
	}
	type series struct {
		points map[string][]metrics.Point
		extra  []metrics.ExtraPoint
	}
	kept := make([]series, len(res.Runs))
	for i := range res.Runs {
		m := &res.Runs[i].Metrics
		kept[i] = series{m.Series, m.ExtraSeries}
		m.Series, m.ExtraSeries = nil, nil
	}
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	var own results.Result
	if err := json.Unmarshal(data, &own); err != nil {
		return err
	}
	redact.RedactAll(&own, secrets)
	for i := range own.Runs {
		m := &own.Runs[i].Metrics
		m.Series, m.ExtraSeries = kept[i].points, kept[i].extra
		for _, pts := range m.Series {
			for j := range pts {
				pts[j].Phase = redact.Redact(pts[j].Phase, secrets)
			}
		}
	}
	*res = own
	return nil
}

// hasFigures reports whether anything was measured in a phase: an
// opening phase without figures is left out, as the final result leaves
// it out.
func hasFigures(p metrics.Phase) bool {
	for _, s := range p.Workloads {
		if s.Acked+s.Received+s.Failed > 0 {
			return true
		}
	}
	return false
}

// msOrNA prints a latency figure of the last interval, or says there was
// no whole-second sample to take it from yet (or no message to time).
func msOrNA(v float64, samples int) string {
	if samples == 0 || metrics.IsNA(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", v)
}

func formatGauges(g map[string]float64) string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", k, expr.FormatValue(k, g[k]))
	}
	return strings.Join(parts, ", ")
}

// summary prints the run's outcome.
func (e *Engine) summary(run *results.Run) {
	switch run.Status {
	case results.Failed:
		e.printf("run failed: %s\n", run.Error)
	case results.Interrupted:
		e.printf("run interrupted; writing what was measured\n")
	}
}
