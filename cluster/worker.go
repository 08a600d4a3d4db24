package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/redact"
	"github.com/planrun/planrun/workloads"
)

// Worker holds workload shards for one conductor at a time.
type Worker struct {
	// Token is what the conductor must send at join: a conductor that sends
	// another, or one when the worker has none, is refused.
	Token   string
	Version string
	// Out gets a line per conductor joining and leaving.
	Out io.Writer
	// TLS, when set, is the listener's TLS configuration (WorkerTLS):
	// every conductor must present a certificate its CA signed.
	TLS *tls.Config
	// Insecure lets the worker serve plain TCP beyond loopback, with a
	// warning on every connection; without it, Serve refuses to.
	Insecure bool
	// ConnectTimeout bounds opening each target, StopTimeout stopping the
	// shards when a conductor leaves (defaults 60s and 30s).
	ConnectTimeout, StopTimeout time.Duration
	// LostAfter is how long a conductor with a run open may go without a
	// call before the worker counts it lost, stops its shards and closes
	// the connection (default 10s; a conductor polls every second).
	LostAfter time.Duration

	mu   sync.Mutex
	busy string // the conductor connected now
}

// Serve accepts conductors on ln until ctx ends.
func (w *Worker) Serve(ctx context.Context, ln net.Listener) error {
	if err := w.checkListener(ln); err != nil {
		_ = ln.Close()
		return err
	}
	if w.ConnectTimeout == 0 {
		w.ConnectTimeout = 60 * time.Second
	}
	if w.StopTimeout == 0 {
		w.StopTimeout = 30 * time.Second
	}
	if w.LostAfter == 0 {
		w.LostAfter = 10 * time.Second
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting conductors: %w", err)
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			if conn, ok := w.secure(ctx, conn); ok {
				w.serveConn(ctx, conn)
			}
		}()
	}
}

func (w *Worker) logf(format string, args ...any) {
	if w.Out != nil {
		fmt.Fprintf(w.Out, format+"\n", args...)
	}
}

// serveConn serves one conductor's connection until it closes, then
// releases what that conductor left running.
func (w *Worker) serveConn(ctx context.Context, conn net.Conn) {
	s := &session{w: w, remote: conn.RemoteAddr().String(), wake: make(chan struct{}, 1),
		calls: map[uint64]context.CancelFunc{}, cancelled: map[uint64]bool{}, last: time.Now()}
	srv := rpc.NewServer()
	if err := srv.RegisterName(service, s); err != nil {
		w.logf("worker: %v", err)
		_ = conn.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				_ = conn.Close()
				return
			case <-done:
				return
			case <-t.C:
				if idle := s.idle(); idle > w.LostAfter {
					s.lost.Store(true)
					w.logf("worker: lost conductor %s: no call for %s with a run open; stopping its shards", s.remote, idle.Round(time.Second))
					_ = conn.Close()
					return
				}
			}
		}
	}()
	srv.ServeConn(conn)
	close(done)
	s.release()
}

// session is one conductor's connection.
type session struct {
	w      *Worker
	remote string

	mu      sync.Mutex
	joined  bool
	src     *plan.Source
	plans   []*plan.Plan
	secrets map[string]bool
	run     *shardRun

	// wake ends a long poll (Figures) at once.
	wake chan struct{}
	// cmu guards the calls under way (their cancel functions by call
	// number), the numbers cancelled before their call began, the time of
	// the last call and how many run now.
	cmu       sync.Mutex
	calls     map[uint64]context.CancelFunc
	cancelled map[uint64]bool
	last      time.Time
	active    int
	lost      atomic.Bool
}

// begin runs a numbered call under a context that Cancel ends; end must be
// called when the call returns.
func (s *session) begin(c Call) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cmu.Lock()
	s.active++
	s.last = time.Now()
	if c.ID != 0 {
		if s.cancelled[c.ID] {
			delete(s.cancelled, c.ID)
			cancel()
		}
		s.calls[c.ID] = cancel
	}
	s.cmu.Unlock()
	return ctx, func() {
		s.cmu.Lock()
		s.active--
		s.last = time.Now()
		delete(s.calls, c.ID)
		s.cmu.Unlock()
		cancel()
	}
}

// Cancel ends the numbered call the conductor gave up on.
func (s *session) Cancel(a *CancelArgs, _ *Empty) error {
	s.touch()
	s.cmu.Lock()
	cancel := s.calls[a.ID]
	if cancel == nil {
		if len(s.cancelled) >= 1024 { // calls that had already returned
			clear(s.cancelled)
		}
		s.cancelled[a.ID] = true
	}
	s.cmu.Unlock()
	if cancel != nil {
		cancel()
		s.w.logf("worker: conductor %s gave up on call %d: cancelled", s.remote, a.ID)
	}
	return nil
}

// Wake ends a long poll under way (or the next one) at once: the
// conductor wants the figures up to now.
func (s *session) Wake(_ *Empty, _ *Empty) error {
	s.touch()
	s.poke()
	return nil
}

func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *session) touch() {
	s.cmu.Lock()
	s.last = time.Now()
	s.cmu.Unlock()
}

// idle is how long the conductor has made no call while a run is open
// (0 when a call runs or no run is open).
func (s *session) idle() time.Duration {
	s.mu.Lock()
	open := s.run != nil
	s.mu.Unlock()
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if !open || s.active > 0 {
		return 0
	}
	return time.Since(s.last)
}

// shardRun is one run's shards on this worker.
type shardRun struct {
	targets map[string]drivers.Target
	shards  map[string]*shard
	order   []string
	shared  *workloads.Shared
	packer  *workloads.Packer

	fmu      sync.Mutex // one Figures at a time: deltas must not interleave
	mu       sync.Mutex
	warnings []string
	failure  string
}

type shard struct {
	w    workloads.Workload
	prev metrics.Counters
}

var errNotJoined = errors.New("join first")

// Join checks the conductor's token and version and loads its plan.
func (s *session) Join(a *JoinArgs, r *JoinReply) error {
	if err := s.w.checkToken(a.Token, s.remote); err != nil {
		return err
	}
	if a.Version != s.w.Version {
		return fmt.Errorf("version mismatch: the conductor is planrun %s, this worker planrun %s; run the same version on both", a.Version, s.w.Version)
	}
	s.w.mu.Lock()
	if s.w.busy != "" && s.w.busy != s.remote {
		busy := s.w.busy
		s.w.mu.Unlock()
		return fmt.Errorf("the worker is busy with the conductor at %s (one conductor at a time)", busy)
	}
	s.w.busy = s.remote
	s.w.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joined = true // from here on, release frees the worker
	env := a.Env
	src, plans, err := plan.Parse(a.File, a.Source, plan.Options{Set: a.Set, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		return fmt.Errorf("the worker cannot load the plan: %w", err)
	}
	s.src, s.plans, s.secrets = src, plans, src.Secrets
	host, _ := os.Hostname()
	*r = JoinReply{Host: host, PID: os.Getpid(), CPUs: runtime.NumCPU()}
	s.w.logf("worker: conductor %s joined with plan %s (worker %d of %d)", s.remote, src.Name, a.Index, a.Count)
	return nil
}

// Clock returns the worker's clock.
func (s *session) Clock(_ *Empty, r *ClockReply) error {
	s.touch()
	r.Now = time.Now().UnixNano()
	return nil
}

// Open opens the run's targets and builds its shards.
func (s *session) Open(a *OpenArgs, _ *Empty) error {
	cctx, end := s.begin(a.Call)
	defer end()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.joined || s.plans == nil {
		return errNotJoined
	}
	if a.Run < 0 || a.Run >= len(s.plans) {
		return fmt.Errorf("run %d: the plan has %d matrix runs here", a.Run, len(s.plans))
	}
	if s.run != nil {
		s.closeRun()
	}
	p := s.plans[a.Run]
	run := &shardRun{targets: map[string]drivers.Target{}, shards: map[string]*shard{}, packer: workloads.NewPacker()}
	run.shared = &workloads.Shared{Run: a.RunID, Start: time.Unix(0, a.Start), Acct: workloads.NewAccounting(a.RunID),
		Fail: func(err error) {
			run.mu.Lock()
			if run.failure == "" {
				run.failure = s.redact(err.Error())
			}
			run.mu.Unlock()
			s.poke()
		},
		Warn: func(msg string) {
			run.mu.Lock()
			run.warnings = append(run.warnings, s.redact(msg))
			run.mu.Unlock()
			s.poke()
		},
		Changed: s.poke}
	run.shared.Acct.TrackDeltas()
	s.run = run
	need := map[string]bool{}
	defs := map[string]*plan.WorkloadDef{}
	for _, w := range p.Workloads {
		defs[w.Name] = w
	}
	for _, sp := range a.Shards {
		def := defs[sp.Workload]
		if def == nil || def.Section == nil {
			return fmt.Errorf("workload %q is not in the plan here", sp.Workload)
		}
		need[def.Target] = true
		if rs, ok := def.Section.(*workloads.RelaySection); ok && rs.To.Target != "" {
			need[rs.To.Target] = true
		}
	}
	for _, t := range p.Targets {
		if !need[t.Name] {
			continue
		}
		ctx, cancel := context.WithTimeout(cctx, s.w.ConnectTimeout)
		tg, err := t.Open(ctx)
		cancel()
		if cctx.Err() != nil {
			return fmt.Errorf("opening target %q: cancelled by the conductor", t.Name)
		}
		if err != nil {
			return fmt.Errorf("target %q (%s): %s", t.Name, t.Driver, s.redact(err.Error()))
		}
		run.targets[t.Name] = tg
	}
	for _, sp := range a.Shards {
		def := defs[sp.Workload]
		sec := workloads.Shard(def.Section, sp.Index, sp.Of)
		wl, err := sec.Build(&workloads.Build{Name: def.Name, ID: sp.ID, Target: def.Target,
			Targets: func(n string) drivers.Target { return run.targets[n] }, Shared: run.shared})
		if err != nil {
			return fmt.Errorf("workload %q: %s", def.Name, s.redact(err.Error()))
		}
		run.shards[def.Name] = &shard{w: wl}
		run.order = append(run.order, def.Name)
	}
	return nil
}

func (s *session) redact(msg string) string { return redact.Redact(msg, s.secrets) }

func (s *session) current() (*shardRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return nil, errors.New("no run is open")
	}
	return s.run, nil
}

// Start starts shards at the time given and returns the figures.
func (s *session) Start(a *StartArgs, r *Figures) error {
	ctx, end := s.begin(a.Call)
	defer end()
	run, err := s.current()
	if err != nil {
		return err
	}
	if d := time.Until(time.Unix(0, a.At)); d > 0 {
		t := time.NewTimer(min(d, time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.New("start cancelled by the conductor")
		}
	}
	errs := make([]error, len(a.Workloads))
	var wg sync.WaitGroup
	for i, name := range a.Workloads {
		sh := run.shards[name]
		if sh == nil {
			errs[i] = fmt.Errorf("workload %q has no shard here", name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sh.w.Start(context.Background()); err != nil {
				errs[i] = errors.New(s.redact(err.Error()))
			}
		}()
	}
	wg.Wait()
	*r = run.figures(false)
	r.Errors = errStrings(errs)
	return nil
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		if e != nil {
			out = append(out, e.Error())
		}
	}
	return out
}

// Stop stops shards and returns the figures, final for them.
func (s *session) Stop(a *StopArgs, r *Figures) error {
	cctx, end := s.begin(a.Call)
	defer end()
	run, err := s.current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cctx, time.Duration(a.Timeout))
	defer cancel()
	errs := run.stop(ctx, a.Workloads)
	*r = run.figures(false)
	r.Errors = errStrings(errs)
	return nil
}

// Figures returns what was measured since the previous call, with what
// the accounting learnt: at once, or as a long poll (FiguresArgs.Wait). A
// long poll the conductor cancels takes nothing: what it would have
// returned stays for the next call.
func (s *session) Figures(a *FiguresArgs, r *Figures) error {
	ctx, end := s.begin(a.Call)
	defer end()
	run, err := s.current()
	if err != nil {
		return err
	}
	if a.Wait > 0 {
		t := time.NewTimer(time.Duration(a.Wait))
		select {
		case <-t.C:
		case <-s.wake:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return errors.New("figures cancelled by the conductor")
		}
	} else {
		// The figures asked for now include what a pending wake was for.
		select {
		case <-s.wake:
		default:
		}
	}
	*r = run.figures(true)
	return nil
}

// Close stops the run's shards and closes its targets.
func (s *session) Close(_ *Empty, _ *Empty) error {
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeRun()
	return nil
}

func (s *session) closeRun() {
	if s.run == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.w.StopTimeout)
	defer cancel()
	s.run.stop(ctx, s.run.order)
	for _, t := range s.run.targets {
		_ = t.Close()
	}
	s.run = nil
}

// release frees the worker when its conductor's connection ends.
func (s *session) release() {
	s.mu.Lock()
	joined := s.joined
	var running []string
	if s.run != nil {
		for _, name := range s.run.order {
			if s.run.shards[name].w.Running() {
				running = append(running, name)
			}
		}
	}
	s.closeRun()
	s.mu.Unlock()
	if !joined {
		return
	}
	s.w.mu.Lock()
	if s.w.busy == s.remote {
		s.w.busy = ""
	}
	s.w.mu.Unlock()
	switch {
	case len(running) > 0 && s.lost.Load():
		s.w.logf("worker: conductor %s lost: stopped its shards of %s", s.remote, strings.Join(running, ", "))
	case len(running) > 0:
		s.w.logf("worker: conductor %s left with shards running: stopped its shards of %s", s.remote, strings.Join(running, ", "))
	default:
		s.w.logf("worker: conductor %s left", s.remote)
	}
}

func (run *shardRun) stop(ctx context.Context, names []string) []error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		sh := run.shards[name]
		if sh == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sh.w.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("workload %q: %w", name, err)
			}
		}()
	}
	wg.Wait()
	return errs
}

// figures takes every shard's delta, and with acct what the accounting
// learnt. Running is read before the counters, so a shard reported stopped
// has all its counts in this delta.
func (run *shardRun) figures(acct bool) Figures {
	run.fmu.Lock()
	defer run.fmu.Unlock()
	f := Figures{Now: time.Now().UnixNano(), Workloads: make(map[string]ShardFigures, len(run.shards))}
	names := append([]string(nil), run.order...)
	sort.Strings(names)
	for _, name := range names {
		sh := run.shards[name]
		running := sh.w.Running()
		rec := sh.w.Recorder()
		d, err := rec.TakeDelta(&sh.prev)
		if err != nil {
			run.shared.Warn(fmt.Sprintf("workload %q: %v", name, err))
		}
		f.Workloads[name] = ShardFigures{Running: running, Delta: d, Gauges: rec.GaugeValues()}
	}
	if acct {
		d, err := run.shared.Acct.PackDelta(run.packer)
		if err != nil {
			run.shared.Warn(err.Error())
		}
		f.Acct = d
	}
	run.mu.Lock()
	f.Warnings, run.warnings = run.warnings, nil
	f.Failure = run.failure
	run.mu.Unlock()
	return f
}

// Set changes a setting of a shard (a set step on the conductor).
func (s *session) Set(a *SetArgs, r *Figures) error {
	_, end := s.begin(a.Call)
	defer end()
	run, err := s.current()
	if err != nil {
		return err
	}
	sh := run.shards[a.Workload]
	if sh == nil {
		return fmt.Errorf("workload %q has no shard here", a.Workload)
	}
	st, ok := sh.w.(workloads.Setter)
	if !ok {
		return fmt.Errorf("workload %q cannot change settings while it runs", a.Workload)
	}
	if rr, ok := sh.w.(interface{ ResetRate(workloads.Rate) }); ok && a.Reset && a.Rate != nil {
		rr.ResetRate(*a.Rate)
		*r = run.figures(false)
		return nil
	}
	var v any
	switch {
	case a.Rate != nil:
		v = a.Rate
	default:
		t := workloads.Threads(a.Threads)
		v = &t
	}
	if err := st.Set(a.Key, v); err != nil {
		r.Errors = []string{s.redact(err.Error())}
	}
	f := run.figures(false)
	f.Errors = r.Errors
	*r = f
	return nil
}
