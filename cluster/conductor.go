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
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	"github.com/planrun/planrun/workloads"
)

// Conductor drives a fleet of workers for the engine (engine.Remote).
type Conductor struct {
	Addrs   []string
	Token   string
	Version string
	// TLS, when set, is the control channel's TLS configuration
	// (ConductorTLS); without it the channel is plain TCP.
	TLS *tls.Config
	// File, Source, Set and Env are the plan as the conductor read it.
	File   string
	Source []byte
	Set    map[string]string
	Env    map[string]string
	Out    io.Writer
	// Interval is the longest a worker holds a long poll for figures
	// (default 1s): it answers at once when something changes (a shard
	// stopped by itself, a warning, a failure) and when the conductor needs
	// the figures up to now (a phase change, a stop, the end).
	// CallTimeout bounds one control call beyond that wait (default 3s): a
	// worker that does not answer within it is lost.
	Interval, CallTimeout time.Duration
	// StopTimeout bounds a stop on the workers (default 30s).
	StopTimeout time.Duration
	// OnFigures, when set, sees every figures reply (tests cross-check the
	// merge with it).
	OnFigures func(worker int, f *Figures)

	workers []*remote
}

type remote struct {
	index  int
	addr   string
	conn   *countingConn
	client *rpc.Client
	info   JoinReply
	offset atomic.Int64 // worker clock minus conductor clock, nanos
	rtt    atomic.Int64
	lost   atomic.Bool
	calls  atomic.Uint64 // call numbers (Call.ID)
}

func (c *Conductor) defaults() {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 3 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 30 * time.Second
	}
}

func (w *remote) String() string { return fmt.Sprintf("worker %d (%s)", w.index, w.addr) }

// call makes one control call bounded by ctx. A numbered call (its args
// embed Call) that ctx ends before the worker answered is cancelled on the
// worker.
func (w *remote) call(ctx context.Context, method string, args, reply any) error {
	var id uint64
	if c, ok := args.(interface{ setID(uint64) }); ok {
		id = w.calls.Add(1)
		c.setID(id)
	}
	call := w.client.Go(service+"."+method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		return call.Error
	case <-ctx.Done():
		if id != 0 {
			w.client.Go(service+".Cancel", &CancelArgs{ID: id}, &Empty{}, make(chan *rpc.Call, 1))
		}
		return ctx.Err()
	}
}

// wake asks the worker to answer a long poll under way at once.
func (w *remote) wake() {
	w.client.Go(service+".Wake", &Empty{}, &Empty{}, make(chan *rpc.Call, 1))
}

// measure sets the worker's clock offset from the best of n exchanges.
func (w *remote) measure(ctx context.Context, n int) (offset, rtt int64, err error) {
	rtt = -1
	for range n {
		var r ClockReply
		t0 := time.Now().UnixNano()
		if err := w.call(ctx, "Clock", &Empty{}, &r); err != nil {
			return 0, 0, err
		}
		t1 := time.Now().UnixNano()
		if rtt < 0 || t1-t0 < rtt {
			rtt, offset = t1-t0, r.Now-(t0+t1)/2
		}
	}
	return offset, rtt, nil
}

// Join connects to every worker, joins it and measures its clock; any
// worker that cannot be reached or refuses is an error naming it, and
// nothing runs.
func (c *Conductor) Join(ctx context.Context) error {
	c.defaults()
	if len(c.Addrs) > 255 {
		return fmt.Errorf("%d workers: at most 255 are supported", len(c.Addrs))
	}
	c.workers = make([]*remote, len(c.Addrs))
	errs := make([]error, len(c.Addrs))
	var wg sync.WaitGroup
	for i, addr := range c.Addrs {
		w := &remote{index: i, addr: addr}
		c.workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.join(ctx, w); err != nil {
				errs[i] = fmt.Errorf("%s: %w", w, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return err
	}
	return nil
}

func (c *Conductor) join(ctx context.Context, w *remote) error {
	d := net.Dialer{Timeout: c.CallTimeout}
	conn, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return fmt.Errorf("cannot reach it: %w", err)
	}
	w.conn = &countingConn{Conn: conn}
	rw, err := c.secure(ctx, w.conn, w.addr)
	if err != nil {
		_ = conn.Close()
		return err
	}
	w.client = rpc.NewClient(rw)
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a := &JoinArgs{Token: c.Token, Version: c.Version, File: c.File, Source: c.Source, Set: c.Set, Env: c.Env, Index: w.index, Count: len(c.Addrs)}
	if err := w.call(jctx, "Join", a, &w.info); err != nil {
		return c.joinError(err, rw)
	}
	off, rtt, err := w.measure(jctx, 5)
	if err != nil {
		return fmt.Errorf("measuring its clock: %w", err)
	}
	w.offset.Store(off)
	w.rtt.Store(rtt)
	if c.Out != nil {
		fmt.Fprintf(c.Out, "%s: host %s, %d CPUs, clock offset %+.3f ms (round trip %.3f ms)\n", w, w.info.Host, w.info.CPUs, float64(off)/1e6, float64(rtt)/1e6)
	}
	return nil
}

// Close disconnects from the workers, which then release what they hold.
func (c *Conductor) Close() {
	for _, w := range c.workers {
		if w != nil && w.client != nil {
			_ = w.client.Close()
		}
	}
}

// Check reports workloads whose on: names workers the fleet does not have.
func (c *Conductor) Check(plans []*plan.Plan) error {
	var errs []error
	for _, p := range plans {
		if len(p.Workloads) > 255 {
			errs = append(errs, fmt.Errorf("%d workloads: at most 255 can run on workers", len(p.Workloads)))
		}
		for _, w := range p.Workloads {
			if _, err := w.On.Workers(len(c.Addrs)); err != nil {
				errs = append(errs, fmt.Errorf("workload %q: %w", w.Name, err))
			}
		}
		for _, s := range p.Steps {
			if l, ok := s.Step.(plan.LocalStep); ok {
				errs = append(errs, fmt.Errorf("%s: %s", s.Describe(), l.LocalOnly()))
			}
		}
	}
	return errors.Join(errs...)
}

// Begin implements engine.Remote.
func (c *Conductor) Begin(ctx context.Context, p *plan.Plan, index int, shared *workloads.Shared, targets func(string) drivers.Target) (engine.RemoteRun, error) {
	c.defaults()
	rr := &remoteRun{c: c, shared: shared, proxies: map[string]*proxy{}, names: map[int][]string{}, drift: make([]int64, len(c.workers)), offset0: make([]int64, len(c.workers)),
		traffic0: make([][2]int64, len(c.workers)), first: make([]int64, len(c.workers)), polls: make([]*poller, len(c.workers))}
	for i := range c.workers {
		rr.polls[i] = &poller{unpack: workloads.NewUnpacker(), flush: make(chan chan struct{}), done: make(chan struct{})}
	}
	for i, w := range c.workers {
		rr.traffic0[i] = w.conn.counts()
	}
	per := make([][]ShardSpec, len(c.workers))
	for i, def := range p.Workloads {
		if def.Section == nil {
			return nil, fmt.Errorf("workload %q: not decoded", def.Name)
		}
		ws, err := def.On.Workers(len(c.workers))
		if err != nil {
			return nil, fmt.Errorf("workload %q: %w", def.Name, err)
		}
		ws = ws[:workloads.Shards(def.Section, len(ws))]
		px := newProxy(rr, def, ws, targets)
		rr.proxies[def.Name] = px
		for k, wi := range ws {
			per[wi] = append(per[wi], ShardSpec{Workload: def.Name, Index: k, Of: len(ws), ID: uint16(wi)<<8 | uint16(i)})
		}
	}
	errs := make([]error, len(c.workers))
	var wg sync.WaitGroup
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			off, rtt, err := w.measure(octx, 5)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", w, err)
				return
			}
			w.offset.Store(off)
			w.rtt.Store(rtt)
			rr.offset0[i] = off
			a := &OpenArgs{Run: index, RunID: shared.Run, Start: shared.Start.UnixNano() + off, Shards: per[i]}
			if err := w.call(octx, "Open", a, &Empty{}); err != nil {
				errs[i] = fmt.Errorf("%s: %w", w, err)
			}
		}()
	}
	wg.Wait()
	for i := range c.workers {
		for _, s := range per[i] {
			rr.names[i] = append(rr.names[i], s.Workload)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rr.crossHostWarning(p)
	rr.stop = make(chan struct{})
	for i, w := range c.workers {
		go rr.poll(w, rr.polls[i])
	}
	return rr, nil
}

// remoteRun is one run on the fleet.
type remoteRun struct {
	c       *Conductor
	shared  *workloads.Shared
	proxies map[string]*proxy
	names   map[int][]string
	offset0 []int64
	// traffic0 is what each connection had carried when the run began.
	traffic0 [][2]int64
	// first is each worker's first message on the conductor's clock.
	first []int64
	// polls are the workers' long polls; stop ends them.
	polls []*poller
	stop  chan struct{}
	mu    sync.Mutex
	drift []int64
}

// poller is the one goroutine that asks a worker for its figures (with
// its accounting) during a run, so that they are merged in the order the
// worker took them: the accounting's deltas number topics once.
type poller struct {
	unpack *workloads.Unpacker
	// flush takes requests for the figures up to now: the poller closes
	// the channel once they are merged.
	flush chan chan struct{}
	done  chan struct{}
	// direct serialises the calls flush makes once the poll has ended.
	direct sync.Mutex
}

func (rr *remoteRun) crossHostWarning(p *plan.Plan) {
	hosts := map[string]bool{}
	var worst int64
	for _, w := range rr.c.workers {
		hosts[w.info.Host] = true
		worst = max(worst, abs(w.offset.Load())+w.rtt.Load()/2)
	}
	if len(hosts) < 2 {
		return
	}
	for _, w := range p.Workloads {
		if w.Kind.Role.Receives {
			rr.shared.Warn(fmt.Sprintf("the workers run on %d machines: end-to-end latency of a message sent on one and received on another includes the difference of their clocks, measured up to %.3f ms at the start; trust it only well above that", len(hosts), float64(worst)/1e6))
			return
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// poll asks the worker for its figures in a long poll (answered at once
// on a change, else after Interval) and merges them, and re-measures its
// clock every 5 seconds, until the run ends or the worker is lost. A flush
// request wakes the long poll and is served by a call made after it.
func (rr *remoteRun) poll(w *remote, p *poller) {
	defer close(p.done)
	lastClock := time.Now()
	for {
		if w.lost.Load() {
			return
		}
		select {
		case <-rr.stop:
			return
		default:
		}
		wait := rr.c.Interval
		var served []chan struct{}
		select {
		case req := <-p.flush:
			served, wait = append(served, req), 0
		default:
		}
		err := rr.fetch(w, p, wait)
		if err == nil && time.Since(lastClock) >= 5*time.Second {
			lastClock = time.Now()
			err = rr.remeasure(w)
		}
		for _, req := range served {
			close(req)
		}
		if err != nil {
			rr.lose(w, err)
			return
		}
	}
}

// fetch makes one Figures call and merges its reply.
func (rr *remoteRun) fetch(w *remote, p *poller, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), rr.c.CallTimeout+wait)
	defer cancel()
	var f Figures
	if err := w.call(ctx, "Figures", &FiguresArgs{Wait: int64(wait)}, &f); err != nil {
		return err
	}
	rr.apply(w, &f)
	if err := rr.shared.Acct.ApplyPacked(p.unpack, f.Acct); err != nil {
		rr.shared.Warn(fmt.Sprintf("%s: %v", w, err))
	}
	if !f.Acct.Empty() {
		for _, px := range rr.proxies {
			px.countCrossDuplicates()
		}
	}
	return nil
}

func (rr *remoteRun) remeasure(w *remote) error {
	ctx, cancel := context.WithTimeout(context.Background(), rr.c.CallTimeout)
	defer cancel()
	off, rtt, err := w.measure(ctx, 3)
	if err != nil {
		return err
	}
	w.offset.Store(off)
	w.rtt.Store(rtt)
	rr.mu.Lock()
	rr.drift[w.index] = max(rr.drift[w.index], abs(off-rr.offset0[w.index]))
	rr.mu.Unlock()
	return nil
}

// Flush implements engine.Flusher: before the engine cuts a phase, every
// worker is asked for what it counted up to now and that is merged, so
// the cut does not depend on when the periodic figures arrive.
func (rr *remoteRun) Flush(ctx context.Context) {
	rr.flush(ctx, nil)
}

// flush merges the figures of the workers idx (nil: all) up to now: each
// worker's long poll is woken and a call made after this one began is
// merged before it returns. Once the polls have ended (the end of the
// run) it calls the workers itself.
func (rr *remoteRun) flush(ctx context.Context, idx []int) {
	if idx == nil {
		for i := range rr.c.workers {
			idx = append(idx, i)
		}
	}
	var wg sync.WaitGroup
	for _, i := range idx {
		w, p := rr.c.workers[i], rr.polls[i]
		if w.lost.Load() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := make(chan struct{})
			w.wake()
			select {
			case p.flush <- req:
				select {
				case <-req:
				case <-p.done:
				case <-ctx.Done():
				}
			case <-p.done:
				// The poll has ended: nothing else asks this worker now.
				p.direct.Lock()
				defer p.direct.Unlock()
				if w.lost.Load() {
					return
				}
				if err := rr.fetch(w, p, 0); err != nil && ctx.Err() == nil {
					rr.lose(w, err)
				}
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
}

// lose marks a worker lost and ends the run with an error naming it.
func (rr *remoteRun) lose(w *remote, err error) {
	if w.lost.Swap(true) {
		return
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", rr.c.CallTimeout)
	}
	rr.shared.Fail(fmt.Errorf("%s lost: %v", w, err))
	for _, px := range rr.proxies {
		px.drop(w.index)
	}
}

// apply merges a worker's figures but for its accounting (see fetch).
func (rr *remoteRun) apply(w *remote, f *Figures) {
	if rr.c.OnFigures != nil {
		rr.c.OnFigures(w.index, f)
	}
	for name, sf := range f.Workloads {
		if px := rr.proxies[name]; px != nil {
			px.apply(w, f.Now, sf)
		}
		if sf.Delta.First != 0 {
			first := sf.Delta.First - w.offset.Load()
			rr.mu.Lock()
			if rr.first[w.index] == 0 || first < rr.first[w.index] {
				rr.first[w.index] = first
			}
			rr.mu.Unlock()
		}
	}
	for _, m := range f.Warnings {
		rr.shared.Warn(fmt.Sprintf("%s: %s", w, m))
	}
	if f.Failure != "" {
		rr.shared.Fail(fmt.Errorf("%s: %s", w, f.Failure))
	}
}

// each calls fn on the given workers in parallel, skipping lost ones, and
// applies the figures they return.
func (rr *remoteRun) each(ctx context.Context, idx []int, method string, args func(w *remote) any) error {
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		w := rr.c.workers[i]
		if w.lost.Load() {
			errs[k] = fmt.Errorf("%s was lost", w)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f Figures
			if err := w.call(ctx, method, args(w), &f); err != nil {
				if ctx.Err() == nil {
					rr.lose(w, err)
				}
				errs[k] = fmt.Errorf("%s: %w", w, err)
				return
			}
			rr.apply(w, &f)
			for _, e := range f.Errors {
				errs[k] = errors.Join(errs[k], fmt.Errorf("%s: %s", w, e))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// End implements engine.RemoteRun.
func (rr *remoteRun) End(ctx context.Context) []results.Worker {
	close(rr.stop)
	for i, w := range rr.c.workers {
		if !w.lost.Load() {
			w.wake()
		}
		<-rr.polls[i].done
	}
	// What the shards counted after their last reply is the run's too.
	rr.Flush(ctx)
	var wg sync.WaitGroup
	for _, w := range rr.c.workers {
		if w.lost.Load() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.call(ctx, "Close", &Empty{}, &Empty{}); err != nil {
				rr.shared.Warn(fmt.Sprintf("%s: closing: %v", w, err))
			}
		}()
	}
	wg.Wait()
	out := make([]results.Worker, len(rr.c.workers))
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for i, w := range rr.c.workers {
		names := append([]string(nil), rr.names[i]...)
		sort.Strings(names)
		tr := w.conn.counts()
		out[i] = results.Worker{Index: i, Addr: w.addr, Host: w.info.Host, Workloads: names,
			OffsetMs: float64(rr.offset0[i]) / 1e6, DriftMs: float64(rr.drift[i]) / 1e6, RTTMs: float64(w.rtt.Load()) / 1e6, Lost: w.lost.Load(),
			ReceivedBytes: tr[0] - rr.traffic0[i][0], SentBytes: tr[1] - rr.traffic0[i][1]}
		if rr.first[i] != 0 {
			out[i].FirstMessageS = float64(rr.first[i]-rr.shared.Start.UnixNano()) / 1e9
		}
	}
	return out
}

// Build implements engine.RemoteRun.
func (rr *remoteRun) Build(w *plan.WorkloadDef, _ uint16) (workloads.Workload, error) {
	px := rr.proxies[w.Name]
	if px == nil {
		return nil, fmt.Errorf("workload %q has no shards", w.Name)
	}
	return px, nil
}

// proxy stands in for a workload whose shards run on workers.
type proxy struct {
	rr      *remoteRun
	name    string
	rec     *metrics.Recorder
	workers []int
	stopAt  int64
	relays  bool
	target  drivers.Target
	group   *workloads.Group
	// crossDups are the duplicates the merged accounting found across
	// workers (each worker counts its own).
	crossDups int64

	mu       sync.Mutex
	running  map[int]bool
	seen     map[int]int64
	gauges   map[int]map[string]float64
	stopping atomic.Bool
}

func newProxy(rr *remoteRun, def *plan.WorkloadDef, ws []int, targets func(string) drivers.Target) *proxy {
	p := &proxy{rr: rr, name: def.Name, rec: metrics.NewRecorder(def.Name, def.Kind.Name, def.Kind.Role), workers: ws,
		stopAt: workloads.StopCount(def.Section), relays: def.Kind.Role.Relays(),
		running: map[int]bool{}, seen: map[int]int64{}, gauges: map[int]map[string]float64{}}
	if g, ok := workloads.ReceiveGroup(rr.shared.Acct, def.Section, def.Name, def.Target, targets); ok {
		acct := rr.shared.Acct
		p.group, p.target = g, targets(g.Key().Target)
		p.rec.SetBacklog(func() metrics.Backlog { return acct.Backlog(g) })
		p.rec.SetLost(func() int64 { return acct.Lost(g) })
	}
	p.rec.SetGauges(p.sumGauges)
	return p
}

func (p *proxy) Name() string                { return p.name }
func (p *proxy) Recorder() *metrics.Recorder { return p.rec }

func (p *proxy) sumGauges() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.gauges) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, g := range p.gauges {
		for k, v := range g {
			out[k] += v
		}
	}
	return out
}

// Running reports whether any shard runs.
func (p *proxy) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.running {
		if r {
			return true
		}
	}
	return false
}

// Start starts every shard together.
func (p *proxy) Start(ctx context.Context) error {
	if p.Running() {
		return fmt.Errorf("workload %q is already running", p.name)
	}
	if p.stopAt > 0 && p.counted() >= p.stopAt {
		return nil
	}
	var lead int64
	for _, i := range p.workers {
		lead = max(lead, 2*p.rr.c.workers[i].rtt.Load())
	}
	at := time.Now().UnixNano() + min(lead+int64(5*time.Millisecond), int64(200*time.Millisecond))
	err := p.rr.each(ctx, p.workers, "Start", func(w *remote) any {
		return &StartArgs{Workloads: []string{p.name}, At: at + w.offset.Load()}
	})
	p.rec.SetRunning(p.Running())
	p.changed()
	if err != nil {
		return fmt.Errorf("workload %q: %w", p.name, err)
	}
	return nil
}

// Stop stops every shard and merges their last figures.
func (p *proxy) Stop(ctx context.Context) error {
	p.rec.Stopping()
	err := p.rr.each(ctx, p.workers, "Stop", func(*remote) any {
		timeout := p.rr.c.StopTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		return &StopArgs{Workloads: []string{p.name}, Timeout: int64(timeout)}
	})
	p.rec.SetRunning(p.Running())
	if err == nil && p.group != nil {
		// The shards' last acknowledgements and receipts travel with
		// their figures (Figures calls only): merge them before settling.
		p.rr.flush(ctx, p.workers)
		p.settle()
	}
	p.changed()
	if err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	return nil
}

// settle decides, with the shards' last figures merged, what of the
// group's backlog is lost (workloads.Accounting.Settle): over workers by
// the broker's own count of the group's lag, where the target has one;
// the rest stays in flight.
func (p *proxy) settle() {
	var lag func() (int64, bool)
	if lr, ok := drivers.As[drivers.LagReader](p.target); ok {
		k := p.group.Key()
		lag = func() (int64, bool) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			n, err := lr.Lag(ctx, k.Subscription, k.Group)
			return n, err == nil
		}
	}
	p.rr.shared.Acct.Settle(p.group, false, lag)
}

func (p *proxy) changed() {
	if p.rr.shared.Changed != nil {
		p.rr.shared.Changed()
	}
}

func (p *proxy) counted() int64 {
	c := p.rec.Counters()
	if p.relays {
		return c.Acked
	}
	return c.Received
}

// drop forgets a lost worker's shard.
func (p *proxy) drop(worker int) {
	p.mu.Lock()
	delete(p.running, worker)
	delete(p.gauges, worker)
	p.mu.Unlock()
	p.rec.SetRunning(p.Running())
	p.changed()
}

// apply merges one shard's figures taken at now on the worker's clock.
func (p *proxy) apply(w *remote, now int64, sf ShardFigures) {
	if err := p.rec.ApplyDelta(sf.Delta, w.offset.Load()); err != nil {
		p.rr.shared.Warn(fmt.Sprintf("%s: workload %q: %v", w, p.name, err))
	}
	p.mu.Lock()
	changed := false
	if now >= p.seen[w.index] {
		p.seen[w.index] = now
		changed = p.running[w.index] != sf.Running
		p.running[w.index] = sf.Running
		if sf.Gauges != nil {
			p.gauges[w.index] = sf.Gauges
		}
	}
	p.mu.Unlock()
	if changed {
		p.rec.SetRunning(p.Running())
		p.changed()
	}
	if p.stopAt > 0 && p.counted() >= p.stopAt && p.Running() && p.stopping.CompareAndSwap(false, true) {
		go func() {
			defer p.stopping.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), p.rr.c.StopTimeout)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				p.rr.shared.Warn(fmt.Sprintf("workload %q: %v", p.name, err))
			}
		}()
	}
}

// countCrossDuplicates adds the duplicates the merged accounting found
// since the last call: messages two workers' shards of one group received.
func (p *proxy) countCrossDuplicates() {
	if p.group == nil {
		return
	}
	d := p.rr.shared.Acct.Stats(p.group.Key()).Duplicates
	p.mu.Lock()
	n := d - p.crossDups
	p.crossDups = max(p.crossDups, d)
	p.mu.Unlock()
	if n > 0 {
		p.rec.AddDuplicates(n)
	}
}

// Poll reads the group's lag from the broker, as a single process does.
func (p *proxy) Poll(ctx context.Context) {
	if p.target == nil {
		return
	}
	lr, ok := drivers.As[drivers.LagReader](p.target)
	if !ok {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if n, err := lr.Lag(qctx, p.group.Key().Subscription, p.group.Key().Group); err == nil {
			p.rec.SetLag(n)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EnvOf records the environment variables a plan reads, for the workers.
type EnvOf struct {
	mu   sync.Mutex
	Seen map[string]string
}

// Lookup is os.LookupEnv that remembers what it found.
func (e *EnvOf) Lookup(k string) (string, bool) {
	v, ok := os.LookupEnv(k)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Seen == nil {
		e.Seen = map[string]string{}
	}
	if ok {
		e.Seen[k] = v
	}
	return v, ok
}

// Set implements workloads.Setter: each shard takes its part of a new rate
// (the same fraction as at the split) or of a new number of threads.
func (p *proxy) Set(key string, value any) error { return p.set(key, value, false) }

// ResetRate changes the rate as Set does, forgiving what the shards are
// behind by (a search's trials are independent of each other).
func (p *proxy) ResetRate(r workloads.Rate) {
	if err := p.set("rate", &r, true); err != nil {
		p.rr.shared.Fail(err)
	}
}

func (p *proxy) set(key string, value any, reset bool) error {
	of := len(p.workers)
	pos := map[int]int{}
	for k, wi := range p.workers {
		pos[wi] = k
	}
	var args func(w *remote) any
	switch v := value.(type) {
	case *workloads.Rate:
		r := v.Scaled(1 / float64(of))
		args = func(w *remote) any { return &SetArgs{Workload: p.name, Key: key, Rate: &r, Reset: reset} }
	case *workloads.Threads:
		args = func(w *remote) any {
			_, n := drivers.Split(int(*v), pos[w.index], of)
			return &SetArgs{Workload: p.name, Key: key, Threads: max(n, 1)}
		}
	default:
		return fmt.Errorf("workload %q: %s cannot be changed while it runs on workers", p.name, key)
	}
	if err := p.rr.each(context.Background(), p.workers, "Set", args); err != nil {
		return fmt.Errorf("workload %q: %w", p.name, err)
	}
	return nil
}

// countingConn counts the bytes of the control connection to a worker.
type countingConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// counts returns the bytes received and sent so far.
func (c *countingConn) counts() [2]int64 { return [2]int64{c.in.Load(), c.out.Load()} }
