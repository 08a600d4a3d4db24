package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// Shared is what the workloads of one run share.
type Shared struct {
	Run uint16
	// Start is when the run started: short headers count from it.
	Start time.Time
	Acct  *Accounting
	// Fail reports an error that should end the run (a consumer that cannot
	// join its group, a producer whose every send fails...).
	Fail func(error)
	// Warn reports a problem worth a line in the output but not fatal.
	Warn func(string)
	// Changed, when set, is called each time a workload starts, stops or
	// finishes by itself, once Running reports the new state.
	Changed func()
}

func (e *Shared) changed() {
	if e.Changed != nil {
		e.Changed()
	}
}

// Workload is a background activity the steps start and stop.
type Workload interface {
	Name() string
	Recorder() *metrics.Recorder
	// Start begins the activity in the background; starting a running
	// workload is an error.
	Start(ctx context.Context) error
	// Stop ends it and waits until its goroutines have returned and its
	// driver resources are closed. Stopping a stopped workload does nothing.
	Stop(ctx context.Context) error
	// Running reports whether it is active (a producer that reached its
	// count is no longer running).
	Running() bool
}

// Poller is a workload with something to do for the whole run, running or
// not (a consumer polls the broker for its group's lag even while stopped).
type Poller interface {
	Poll(ctx context.Context)
}

// lifecycle is the start/stop bookkeeping the workloads share.
type lifecycle struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	running atomic.Bool
	rec     *metrics.Recorder
	env     *Shared
	// inflight is the context of sends already begun: a stop lets them
	// finish (so what the broker stored is counted as acked) and cancels
	// them only when the stop's own deadline passes.
	inflight     context.Context
	cancelFlight context.CancelFunc
	// settled says that the drain before the latest stop ended with
	// nothing more arriving (see StopInOrder).
	settled atomic.Bool
}

func (l *lifecycle) drained(settled bool) { l.settled.Store(settled) }

// begin marks the workload running and returns the context of this start;
// run must call finish when all its goroutines are done.
func (l *lifecycle) begin(ctx context.Context, name string) (context.Context, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running.Load() {
		return nil, fmt.Errorf("workload %q is already running", name)
	}
	if l.done != nil {
		<-l.done // a previous start that ended by itself is fully closed
	}
	// A workload outlives the step that starts it, so it hangs off a
	// context the engine cancels at the end of the run, not the step's.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.inflight, l.cancelFlight = context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.done = make(chan struct{})
	l.settled.Store(false)
	l.running.Store(true)
	l.rec.SetRunning(true)
	l.env.changed()
	return wctx, nil
}

// finish marks the workload stopped, then tells the run: a wait woken by it
// already sees the workload not running.
func (l *lifecycle) finish() {
	l.cancelFlight()
	l.running.Store(false)
	l.rec.SetRunning(false)
	close(l.done)
	l.env.changed()
}

func (l *lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done, cancelFlight := l.cancel, l.done, l.cancelFlight
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	// The driver's gauges from now on are of connections closing.
	l.rec.Stopping()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// Sends still waiting for the broker are abandoned now.
	cancelFlight()
	select {
	case <-done:
		return fmt.Errorf("stopping: sends were still waiting for the broker when the stop timed out (%w)", ctx.Err())
	case <-time.After(5 * time.Second):
		return fmt.Errorf("stopping: %w", ctx.Err())
	}
}

func (l *lifecycle) Running() bool { return l.running.Load() }

// Producer sends paced, numbered messages.
type Producer struct {
	lifecycle
	name       string
	spec       ProduceSpec
	opts       any
	target     drivers.Target
	targetName string
	id         uint16
	seqs       []*atomic.Uint64 // next sequence number per thread, kept across restarts
	sent       atomic.Int64
	warnedOnce atomic.Bool
	// rate is what the next start paces by; cur is the running start's
	// threads, nil when none runs. spec.Threads changes under it too.
	rateMu sync.Mutex
	rate   Rate
	cur    *sending
}

// sending is a running start's threads, which a set step may add or remove.
type sending struct {
	ctx, flight context.Context
	dp          drivers.Producer
	pacer       *Pacer
	sources     int
	cancels     []context.CancelFunc // one per thread
	active      int
	done        chan struct{} // closed when the last thread has returned
	async       *asyncSender  // instead of threads, for a drivers.AsyncSender
}

// spawnLocked starts thread i of a running start.
func (p *Producer) spawnLocked(s *sending, i int) {
	for len(p.seqs) <= i {
		p.seqs = append(p.seqs, new(atomic.Uint64))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancels = append(s.cancels, cancel)
	s.active++
	seq := p.seqs[i]
	go func() {
		p.loop(ctx, s.flight, s.dp, s.pacer, s.sources, i, seq)
		cancel()
		p.rateMu.Lock()
		defer p.rateMu.Unlock()
		if s.active--; s.active == 0 {
			close(s.done)
		}
	}()
}

// NewProducer prepares a produce workload; id must be unique in the run.
func NewProducer(name string, spec ProduceSpec, opts any, target drivers.Target, targetName string, id uint16, env *Shared) *Producer {
	spec.defaults()
	p := &Producer{name: name, spec: spec, opts: opts, target: target, id: id, targetName: targetName}
	p.env = env
	p.rate = spec.Rate
	p.rec = metrics.NewRecorder(name, produceKind.Name, produceKind.Role)
	return p
}

func (p *Producer) Name() string                { return p.name }
func (p *Producer) Recorder() *metrics.Recorder { return p.rec }

// Start opens a driver producer and starts the sending threads.
func (p *Producer) Start(ctx context.Context) error {
	remaining := int64(-1)
	if p.spec.Count > 0 {
		remaining = p.spec.Count - p.sent.Load()
		if remaining <= 0 {
			return nil // already sent all it was asked to
		}
	}
	dp, err := p.target.NewProducer(ctx, drivers.ProducerSpec{Workload: p.name, Topic: p.spec.Topic, Threads: p.spec.Threads, Options: p.opts,
		Events: newSink(p.rec, 0, 1)})
	if err != nil {
		return fmt.Errorf("workload %q: %w", p.name, err)
	}
	wctx, err := p.begin(ctx, p.name)
	if err != nil {
		_ = dp.Close()
		return err
	}
	stopTimer := func() {}
	if p.spec.Duration > 0 {
		wctx, stopTimer = context.WithTimeout(wctx, p.spec.Duration)
	}
	sources := p.spec.Threads
	if s, ok := dp.(interface{ Sources() int }); ok && s.Sources() > 0 {
		sources = s.Sources()
	}
	if g, ok := dp.(drivers.Gauger); ok {
		p.rec.SetGauges(g.Gauges)
	}
	p.rateMu.Lock()
	rate := p.rate
	if p.spec.Interval > 0 && !rate.Set() {
		rate = FixedRate(float64(sources) / p.spec.Interval.Seconds())
	}
	p.rateMu.Unlock()
	go func() {
		ready := true
		if r, ok := dp.(drivers.Readier); ok && p.spec.ConnectFirst {
			if err := r.WaitReady(wctx); err != nil {
				ready = false
				if wctx.Err() == nil {
					p.env.Fail(fmt.Errorf("workload %q: connecting: %w", p.name, err))
				}
			}
		}
		if ready {
			// The schedule starts when sending can start.
			s := &sending{ctx: wctx, flight: p.inflight, dp: dp, sources: sources, done: make(chan struct{}),
				pacer: NewSchedulePacer(time.Now(), rate, remaining)}
			p.rateMu.Lock()
			if as, ok := dp.(drivers.AsyncSender); ok {
				p.spawnAsyncLocked(s, as)
			} else {
				for i := range p.spec.Threads {
					p.spawnLocked(s, i)
				}
			}
			p.cur = s
			p.rateMu.Unlock()
			<-s.done
			p.rateMu.Lock()
			p.cur = nil
			p.rateMu.Unlock()
		}
		stopTimer()
		if err := dp.Close(); err != nil {
			p.env.Warn(fmt.Sprintf("workload %q: closing producer: %v", p.name, err))
		}
		p.finish()
	}()
	return nil
}

// SetRate changes the producer's rate: a running start follows the new rate
// (or schedule) from now on without stopping, and later starts begin with
// it. Due times already handed out, and so latency measured from them,
// stay as they were.
func (p *Producer) SetRate(r Rate) { p.setRate(r, false) }

func (p *Producer) setRate(r Rate, reset bool) {
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	p.rate = r
	if p.cur != nil && p.cur.async != nil {
		p.cur.async.setRate(r)
	}
	switch {
	case p.cur == nil:
	case reset:
		p.cur.pacer.ResetRate(time.Now(), r)
	default:
		p.cur.pacer.SetRate(time.Now(), r)
	}
}

// ResetRate changes the rate as SetRate does but forgives the messages a
// running start is behind by: the new rate counts from now, as if it had
// just started (a search's trials are independent of each other).
func (p *Producer) ResetRate(r Rate) { p.setRate(r, true) }

// SetThreads changes the number of sending threads. A running start adds
// or ends threads at once, if its driver can take more or fewer senders on
// the producer it opened (drivers.ThreadResizer); the rate is shared by
// all threads as before. Later starts open with the new number.
func (p *Producer) SetThreads(n int) error {
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	if s := p.cur; s != nil && s.async != nil {
		s.async.setLimit(n)
	} else if s != nil && s.active > 0 && n != len(s.cancels) {
		rs, ok := s.dp.(drivers.ThreadResizer)
		if !ok {
			return fmt.Errorf("workload %q: its driver cannot change a running producer's threads; restart it with set and restart steps instead", p.name)
		}
		if err := rs.SetThreads(n); err != nil {
			return fmt.Errorf("workload %q: threads %d: %w", p.name, n, err)
		}
		for len(s.cancels) < n {
			p.spawnLocked(s, len(s.cancels))
		}
		for len(s.cancels) > n {
			// The thread finishes a send already begun, as at a stop.
			s.cancels[len(s.cancels)-1]()
			s.cancels = s.cancels[:len(s.cancels)-1]
		}
	}
	p.spec.Threads = n
	return nil
}

// Set changes a setting while the producer runs (see produceKind.Settable).
func (p *Producer) Set(key string, value any) error {
	switch v := value.(type) {
	case *Rate:
		if key == "rate" {
			p.SetRate(*v)
			return nil
		}
	case *Threads:
		if key == "threads" {
			return p.SetThreads(int(*v))
		}
	}
	return fmt.Errorf("workload %q: %s cannot be changed while it runs", p.name, key)
}

// loop sends until ctx ends; a send already begun runs under flight, so a
// stop waits for its ack.
func (p *Producer) loop(ctx, flight context.Context, dp drivers.Producer, pacer *Pacer, sources, thread int, seqs *atomic.Uint64) {
	size := int(p.spec.Size)
	stream := uint32(p.id)<<16 | uint32(thread&0xffff)
	resolve, _ := dp.(drivers.TopicResolver)
	var w Waiter
	defer w.Stop()
	for {
		k, due, ok := pacer.Wait(ctx, &w, 0)
		if !ok {
			return
		}
		p.sent.Add(1)
		seq := seqs.Add(1) - 1
		m := &drivers.Message{Topic: p.spec.Topic, Value: make([]byte, size), Source: int(k % int64(sources))}
		h := Header{Run: p.env.Run, Producer: stream, Seq: seq, SentAt: due.UnixNano()}
		if size >= HeaderSize {
			h.Put(m.Value)
		} else if size >= ShortHeaderSize {
			PutShort(m.Value, seq, due, p.env.Start)
		}
		switch p.spec.Keys {
		case "sequence":
			m.Key = AppendSequenceKey(nil, stream, seq)
		case "random":
			m.Key = strconv.AppendUint(nil, rand.Uint64(), 16)
		}
		p.rec.Sent(due)
		err := dp.Send(flight, m)
		now := time.Now()
		if err != nil {
			if flight.Err() != nil {
				return // abandoned at a stop that timed out: neither acked nor failed
			}
			p.rec.Failed(due)
			sendFailed(newSink(p.rec, 0, 1), err)
			if p.warnedOnce.CompareAndSwap(false, true) {
				p.env.Warn(fmt.Sprintf("workload %q: send failed: %v (further failures are counted, not printed)", p.name, err))
			}
			continue
		}
		p.rec.Acked(size, now.Sub(due), now)
		p.env.Acct.Ack(p.targetName, concreteTopic(resolve, m), h, size >= HeaderSize, size)
	}
}

// Consumer receives messages in a group and counts them.
type Consumer struct {
	lifecycle
	name       string
	spec       ConsumeSpec
	opts       any
	target     drivers.Target
	group      *Group
	groupName  string
	received   atomic.Int64
	startCount int
}

// NewConsumer prepares a consume workload.
func NewConsumer(name string, spec ConsumeSpec, opts any, target drivers.Target, targetName string, env *Shared) *Consumer {
	if spec.Group == "" {
		spec.Group = name
	}
	if spec.Consumers == 0 {
		spec.Consumers = 1
	}
	if spec.LagInterval == 0 {
		spec.LagInterval = time.Second
	}
	c := &Consumer{name: name, spec: spec, opts: opts, target: target, groupName: spec.Group}
	c.env = env
	c.group = subscribe(env.Acct, target, targetName, drivers.ConsumerSpec{Workload: name, Topic: spec.Topic, Group: spec.Group, Options: opts})
	c.rec = metrics.NewRecorder(name, consumeKind.Name, consumeKind.Role)
	c.rec.SetBacklog(func() metrics.Backlog { return env.Acct.Backlog(c.group) })
	c.rec.SetLost(func() int64 { return env.Acct.Lost(c.group) })
	return c
}

func (c *Consumer) Name() string                { return c.name }
func (c *Consumer) Recorder() *metrics.Recorder { return c.rec }

// Start joins the group with the configured number of consumers.
func (c *Consumer) Start(ctx context.Context) error {
	if c.spec.Count > 0 && c.received.Load() >= c.spec.Count {
		return nil
	}
	var dcs []drivers.Consumer
	for i := range c.spec.Consumers {
		dc, err := c.target.NewConsumer(ctx, drivers.ConsumerSpec{Workload: c.name, Topic: c.spec.Topic, Group: c.spec.Group,
			FromLatest: c.spec.From == "latest", Instance: fmt.Sprintf("%s-%d-%d", c.name, c.startCount, c.spec.InstanceBase+i), Options: c.opts,
			Events: newSink(c.rec, (c.spec.InstanceBase+i)*sideStride, c.spec.Consumers)})
		if err != nil {
			for _, d := range dcs {
				_ = d.Close()
			}
			return fmt.Errorf("workload %q: %w", c.name, err)
		}
		dcs = append(dcs, dc)
	}
	c.startCount++
	c.rec.SetGauges(sumGauges(dcs))
	wctx, err := c.begin(ctx, c.name)
	if err != nil {
		for _, d := range dcs {
			_ = d.Close()
		}
		return err
	}
	c.env.Acct.Join(c.group, 1)
	wctx, cancel := context.WithCancel(wctx)
	handle := func(m *drivers.Message) { c.handle(m, cancel) }
	var wg sync.WaitGroup
	for _, dc := range dcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dc.Run(wctx, handle); err != nil && !errors.Is(err, context.Canceled) && wctx.Err() == nil {
				drivers.Emit(newSink(c.rec, 0, 1), drivers.Event{Kind: drivers.ReceiveError, Reason: drivers.Reason(err)})
				c.env.Fail(fmt.Errorf("workload %q: %w", c.name, err))
			}
		}()
	}
	go func() {
		wg.Wait()
		for _, dc := range dcs {
			if err := dc.Close(); err != nil {
				c.env.Warn(fmt.Sprintf("workload %q: closing consumer: %v", c.name, err))
			}
		}
		cancel()
		// The lag read once more after the consumers committed their
		// position, so the figure at the end of a phase is not a second
		// old, and what of the backlog is lost.
		settle(c.env, c.group, c.target, c.spec.Topic, c.spec.Group, c.spec.LagInterval, c.rec, c.settled.Load())
		c.finish()
	}()
	return nil
}

// subscribe returns the accounting group of a consumer spec: the target
// says which concrete topics its subscription covers (MQTT wildcards and
// shared subscriptions) and which consumers share one group; without those
// abilities, the topic named alone and the spec's group.
func subscribe(a *Accounting, target drivers.Target, targetName string, spec drivers.ConsumerSpec) *Group {
	var match func(string) bool
	if sm, ok := drivers.As[drivers.SubscriptionMatcher](target); ok {
		match = sm.Matcher(spec)
	}
	key := GroupKey{Target: targetName, Subscription: spec.Topic, Group: spec.Group}
	if sg, ok := drivers.As[drivers.SubscriptionGrouper](target); ok {
		key.Subscription, key.Group = sg.AccountingGroup(spec)
	}
	return a.Group(key, match)
}

// concreteTopic is where m went: the producer resolves topic templates.
func concreteTopic(r drivers.TopicResolver, m *drivers.Message) string {
	if r != nil {
		return r.ResolveTopic(m)
	}
	return m.Topic
}

// receive does the counting every message gets, in consumers and relays.
func receive(m *drivers.Message, env *Shared, g *Group, rec *metrics.Recorder) {
	now := m.Received
	if now.IsZero() {
		now = time.Now()
	}
	e2e := time.Duration(-1)
	h, full := ParseHeader(m.Value)
	full = full && h.Run == env.Run
	if full {
		e2e = max(now.Sub(h.SentTime()), 0)
	} else if sent, ok := ParseShort(m.Value, env.Start); ok {
		e2e = max(now.Sub(sent), 0)
	} else {
		// Not a message of this run: neither followed nor counted as one.
		rec.Received(len(m.Value), e2e, now)
		return
	}
	dup, reordered := env.Acct.Receive(g, h, full, m.Partition, len(m.Value))
	rec.Receipt(len(m.Value), e2e, now, dup, reordered)
}

func (c *Consumer) handle(m *drivers.Message, stop context.CancelFunc) {
	receive(m, c.env, c.group, c.rec)
	if n := c.received.Add(1); c.spec.Count > 0 && n >= c.spec.Count {
		stop()
	}
}

// Poll asks the broker for the group's lag for the whole run.
func (c *Consumer) Poll(ctx context.Context) {
	lr, ok := drivers.As[drivers.LagReader](c.target)
	if !ok || c.spec.LagInterval <= 0 {
		return
	}
	pollLag(ctx, lr, c.spec.Topic, c.spec.Group, c.spec.LagInterval, c.rec)
}

func pollLag(ctx context.Context, lr drivers.LagReader, topic, group string, every time.Duration, rec *metrics.Recorder) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, max(every, 5*time.Second))
		n, err := lr.Lag(qctx, topic, group)
		cancel()
		if err == nil {
			rec.SetLag(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sumGauges adds up the figures of a workload's consumers, if they have any.
func sumGauges(dcs []drivers.Consumer) func() map[string]float64 {
	var gs []drivers.Gauger
	for _, dc := range dcs {
		if g, ok := dc.(drivers.Gauger); ok {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil
	}
	return func() map[string]float64 {
		out := map[string]float64{}
		for _, g := range gs {
			for k, v := range g.Gauges() {
				out[k] += v
			}
		}
		return out
	}
}

var (
	produceKind = Kind{Name: "produce", Doc: "send messages", Role: metrics.Role{Sends: true},
		Keys: []any{ProduceSpec{}}, New: func() Section { return &ProduceSection{} },
		Settable: map[string]func() any{"rate": func() any { return new(Rate) }, "threads": func() any { return new(Threads) }}}
	consumeKind = Kind{Name: "consume", Doc: "receive messages in a consumer group", Role: metrics.Role{Receives: true},
		Keys: []any{ConsumeSpec{}}, New: func() Section { return &ConsumeSection{} }}
)

func init() {
	RegisterKind(produceKind)
	RegisterKind(consumeKind)
}

// ProduceSection is a workload's produce: section.
type ProduceSection struct {
	Spec ProduceSpec
	Opts any // the driver's produce options, or nil
}

// Decode reads the generic produce keys and the driver's own.
func (s *ProduceSection) Decode(c *Decoding) {
	s.Opts = ProduceOptions(c.Target.Driver)
	c.decodeChecked(&s.Spec, s.Opts)
}

// Build makes the producer.
func (s *ProduceSection) Build(b *Build) (Workload, error) {
	return NewProducer(b.Name, s.Spec, s.Opts, b.Targets(b.Target), b.Target, b.ID, b.Shared), nil
}

// ConsumeSection is a workload's consume: section.
type ConsumeSection struct {
	Spec ConsumeSpec
	Opts any // the driver's consume options, or nil
}

// Decode reads the generic consume keys and the driver's own.
func (s *ConsumeSection) Decode(c *Decoding) {
	s.Opts = ConsumeOptions(c.Target.Driver)
	c.decodeChecked(&s.Spec, s.Opts)
}

// Build makes the consumer.
func (s *ConsumeSection) Build(b *Build) (Workload, error) {
	return NewConsumer(b.Name, s.Spec, s.Opts, b.Targets(b.Target), b.Target, b.Shared), nil
}
