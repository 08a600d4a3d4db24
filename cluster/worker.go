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
	"sync"
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
	s := &session{w: w, remote: conn.RemoteAddr().String()}
	srv := rpc.NewServer()
	if err := srv.RegisterName(service, s); err != nil {
		w.logf("worker: %v", err)
		_ = conn.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = conn.Close()
		case <-done:
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
}

// shardRun is one run's shards on this worker.
type shardRun struct {
	targets map[string]drivers.Target
	shards  map[string]*shard
	order   []string
	shared  *workloads.Shared

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
	r.Now = time.Now().UnixNano()
	return nil
}

// Open opens the run's targets and builds its shards.
func (s *session) Open(a *OpenArgs, _ *Empty) error {
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
	run := &shardRun{targets: map[string]drivers.Target{}, shards: map[string]*shard{}}
	run.shared = &workloads.Shared{Run: a.RunID, Start: time.Unix(0, a.Start), Acct: workloads.NewAccounting(a.RunID),
		Fail: func(err error) {
			run.mu.Lock()
			if run.failure == "" {
				run.failure = s.redact(err.Error())
			}
			run.mu.Unlock()
		},
		Warn: func(msg string) {
			run.mu.Lock()
			run.warnings = append(run.warnings, s.redact(msg))
			run.mu.Unlock()
		}}
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
		ctx, cancel := context.WithTimeout(context.Background(), s.w.ConnectTimeout)
		tg, err := t.Open(ctx)
		cancel()
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
	run, err := s.current()
	if err != nil {
		return err
	}
	if d := time.Until(time.Unix(0, a.At)); d > 0 {
		time.Sleep(min(d, time.Second))
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
	*r = run.figures()
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
	run, err := s.current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(a.Timeout))
	defer cancel()
	errs := run.stop(ctx, a.Workloads)
	*r = run.figures()
	r.Errors = errStrings(errs)
	return nil
}

// Figures returns what was measured since the previous call.
func (s *session) Figures(_ *Empty, r *Figures) error {
	run, err := s.current()
	if err != nil {
		return err
	}
	*r = run.figures()
	return nil
}

// Close stops the run's shards and closes its targets.
func (s *session) Close(_ *Empty, _ *Empty) error {
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
	s.w.logf("worker: conductor %s left", s.remote)
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

// figures takes every shard's delta. Running is read before the counters,
// so a shard reported stopped has all its counts in this delta.
func (run *shardRun) figures() Figures {
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
	acct, err := run.shared.Acct.Delta()
	if err != nil {
		run.shared.Warn(err.Error())
	}
	f.Acct = acct
	run.mu.Lock()
	f.Warnings, run.warnings = run.warnings, nil
	f.Failure = run.failure
	run.mu.Unlock()
	return f
}

// Set changes a setting of a shard (a set step on the conductor).
func (s *session) Set(a *SetArgs, r *Figures) error {
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
		*r = run.figures()
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
	f := run.figures()
	f.Errors = r.Errors
	*r = f
	return nil
}
