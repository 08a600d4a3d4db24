package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// Relay consumes from one topic and publishes every message, unchanged (so
// the original send time travels on), to another: a hop in a round trip or
// a stand-in for a broker's rule engine.
type Relay struct {
	lifecycle
	name     string
	spec     RelaySpec
	from     RelayFrom
	to       RelayTo
	fromOpts any
	toOpts   any
	src, dst drivers.Target
	group    *Group
	dstName  string
	queued   atomic.Int64
	relayed  atomic.Int64
	warned   atomic.Bool
	starts   int
}

// RelaySection is a workload's relay: section.
type RelaySection struct {
	Spec RelaySpec
	From RelayFrom
	To   RelayTo
	// FromOpts are the source driver's consume options, ToOpts the
	// destination driver's produce options (nil where a driver has none).
	FromOpts, ToOpts any
}

// NewRelay prepares a relay that reads from src (target srcName) and
// publishes to dst, the target s.To.Target.
func NewRelay(name string, s RelaySection, src drivers.Target, srcName string, dst drivers.Target, env *Shared) *Relay {
	spec, from, to, fromOpts, toOpts, dstName := s.Spec, s.From, s.To, s.FromOpts, s.ToOpts, s.To.Target
	if from.Group == "" {
		from.Group = name
	}
	if spec.Threads == 0 {
		spec.Threads = 1
	}
	if spec.Mode == "" {
		spec.Mode = "pool"
	}
	r := &Relay{name: name, spec: spec, from: from, to: to, fromOpts: fromOpts, toOpts: toOpts, src: src, dst: dst, dstName: dstName}
	r.env = env
	r.group = subscribe(env.Acct, src, srcName, drivers.ConsumerSpec{Workload: name, Topic: from.Topic, Group: from.Group, Options: fromOpts})
	r.rec = metrics.NewRecorder(name, relayKind.Name, relayKind.Role)
	r.rec.SetBacklog(func() metrics.Backlog { return env.Acct.Backlog(r.group) })
	r.rec.SetLost(func() int64 { return env.Acct.Lost(r.group) })
	r.rec.SetGauges(func() map[string]float64 { return map[string]float64{"queued": float64(r.queued.Load())} })
	return r
}

func (r *Relay) Name() string                { return r.name }
func (r *Relay) Recorder() *metrics.Recorder { return r.rec }

type relayed struct {
	m  *drivers.Message
	at time.Time
}

// Start opens the destination producer, then the source consumer.
func (r *Relay) Start(ctx context.Context) error {
	if r.spec.Count > 0 && r.relayed.Load() >= r.spec.Count {
		return nil
	}
	dp, err := r.dst.NewProducer(ctx, drivers.ProducerSpec{Workload: r.name, Topic: r.to.Topic, Threads: r.spec.Threads, Options: r.toOpts,
		Events: newSink(r.rec, 0, 1)})
	if err != nil {
		return fmt.Errorf("workload %q: publishing side: %w", r.name, err)
	}
	dc, err := r.src.NewConsumer(ctx, drivers.ConsumerSpec{Workload: r.name, Topic: r.from.Topic, Group: r.from.Group,
		FromLatest: r.from.From == "latest", Instance: fmt.Sprintf("%s-%d", r.name, r.starts), Options: r.fromOpts,
		Events: newSink(r.rec, sideStride, 1)})
	if err != nil {
		_ = dp.Close()
		return fmt.Errorf("workload %q: receiving side: %w", r.name, err)
	}
	r.starts++
	wctx, err := r.begin(ctx, r.name)
	if err != nil {
		_ = dp.Close()
		_ = dc.Close()
		return err
	}
	r.env.Acct.Join(r.group, 1)
	wctx, cancel := context.WithCancel(wctx)

	var q handoff
	if r.spec.Mode == "queue" {
		q = newUnbounded()
	} else {
		q = make(bounded, r.spec.Threads)
	}
	var workers sync.WaitGroup
	for range r.spec.Threads {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				it, ok := q.pop(wctx)
				if !ok {
					return
				}
				r.queued.Add(-1)
				r.publish(r.inflight, dp, it, cancel)
			}
		}()
	}
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		err := dc.Run(wctx, func(m *drivers.Message) {
			receive(m, r.env, r.group, r.rec)
			r.queued.Add(1)
			if !q.push(wctx, relayed{m: m, at: time.Now()}) {
				r.queued.Add(-1)
			}
		})
		if err != nil && !errors.Is(err, context.Canceled) && wctx.Err() == nil {
			r.env.Fail(fmt.Errorf("workload %q: %w", r.name, err))
		}
	}()
	go func() {
		<-consumerDone
		cancel()
		workers.Wait()
		if err := dc.Close(); err != nil {
			r.env.Warn(fmt.Sprintf("workload %q: closing consumer: %v", r.name, err))
		}
		if err := dp.Close(); err != nil {
			r.env.Warn(fmt.Sprintf("workload %q: closing producer: %v", r.name, err))
		}
		r.queued.Store(0)
		settle(r.env, r.group, r.src, r.from.Topic, r.from.Group, time.Second, r.rec, r.settled.Load())
		r.finish()
	}()
	return nil
}

func (r *Relay) publish(ctx context.Context, dp drivers.Producer, it relayed, stop context.CancelFunc) {
	m := &drivers.Message{Topic: r.to.Topic, Key: it.m.Key, Value: it.m.Value, Source: it.m.Source}
	r.rec.Sent(it.at)
	err := dp.Send(ctx, m)
	now := time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.rec.Failed(it.at)
		sendFailed(newSink(r.rec, 0, 1), err)
		if r.warned.CompareAndSwap(false, true) {
			r.env.Warn(fmt.Sprintf("workload %q: publish failed: %v (further failures are counted, not printed)", r.name, err))
		}
		return
	}
	// A relay's send latency runs from when it received the message, so
	// time spent waiting in the hand-off queue counts.
	r.rec.Acked(len(m.Value), now.Sub(it.at), now)
	resolve, _ := dp.(drivers.TopicResolver)
	h, ok := ParseHeader(m.Value)
	r.env.Acct.Ack(r.dstName, concreteTopic(resolve, m), h, ok, len(m.Value))
	if n := r.relayed.Add(1); r.spec.Count > 0 && n >= r.spec.Count {
		stop()
	}
}

// Poll asks the broker for the relay group's lag for the whole run.
func (r *Relay) Poll(ctx context.Context) {
	if lr, ok := drivers.As[drivers.LagReader](r.src); ok {
		pollLag(ctx, lr, r.from.Topic, r.from.Group, time.Second, r.rec)
	}
}

// handoff is how received messages reach the publishing workers.
type handoff interface {
	push(ctx context.Context, it relayed) bool
	pop(ctx context.Context) (relayed, bool)
}

// bounded makes the receiver wait when every worker is busy ("pool").
type bounded chan relayed

func (b bounded) push(ctx context.Context, it relayed) bool {
	select {
	case b <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

func (b bounded) pop(ctx context.Context) (relayed, bool) {
	select {
	case it := <-b:
		return it, true
	case <-ctx.Done():
		return relayed{}, false
	}
}

// unbounded never makes the receiver wait ("queue"); memory grows instead.
type unbounded struct {
	mu     sync.Mutex
	items  []relayed
	signal chan struct{}
}

func newUnbounded() *unbounded { return &unbounded{signal: make(chan struct{}, 1)} }

func (u *unbounded) push(_ context.Context, it relayed) bool {
	u.mu.Lock()
	u.items = append(u.items, it)
	u.mu.Unlock()
	select {
	case u.signal <- struct{}{}:
	default:
	}
	return true
}

func (u *unbounded) pop(ctx context.Context) (relayed, bool) {
	for {
		u.mu.Lock()
		if len(u.items) > 0 {
			it := u.items[0]
			u.items[0] = relayed{}
			u.items = u.items[1:]
			more := len(u.items) > 0
			u.mu.Unlock()
			if more {
				select { // pass the wake-up on to another worker
				case u.signal <- struct{}{}:
				default:
				}
			}
			return it, true
		}
		u.mu.Unlock()
		select {
		case <-u.signal:
		case <-ctx.Done():
			return relayed{}, false
		}
	}
}

var relayKind = Kind{Name: "relay", Doc: "receive from one topic and publish each message to another",
	Role: metrics.Role{Sends: true, Receives: true}, Keys: []any{RelaySpec{}, relayKeys{}},
	New: func() Section { return &RelaySection{} }}

// relayKeys documents from: and to:, which decode in two passes (the
// destination's driver is known only once to: names its target).
type relayKeys struct {
	From RelayFrom `yaml:"from" required:"true" doc:"where to read, with the source driver's consume keys"`
	To   RelayTo   `yaml:"to" required:"true" doc:"where to publish, with the destination driver's produce keys"`
}

func init() { RegisterKind(relayKind) }

type relayEnds struct {
	From yaml.Node `yaml:"from" required:"true" doc:"where to read: topic, group, from and the source driver's consume options"`
	To   yaml.Node `yaml:"to" required:"true" doc:"where to publish: target, topic and the destination driver's produce options"`
}

// Decode reads mode, threads and count, then from: with the source driver's
// consume options and to: with the destination driver's produce options.
func (s *RelaySection) Decode(c *Decoding) {
	var ends relayEnds
	c.D.DecodeStructs(c.Node, c.What, &s.Spec, &ends)
	c.report(s.Spec.Check())
	if ends.From.Kind != 0 {
		s.FromOpts = ConsumeOptions(c.Target.Driver)
		c.D.DecodeStructs(&ends.From, c.What+" from", &s.From, s.FromOpts)
	}
	dst := c.Target
	if ends.To.Kind != 0 {
		toTarget := ""
		for i := 0; i+1 < len(ends.To.Content); i += 2 {
			if ends.To.Content[i].Value == "target" {
				toTarget, _ = c.D.Scalar(ends.To.Content[i+1], c.What+" to: target")
			}
		}
		if toTarget != "" {
			var ok bool
			if dst, ok = c.Resolve(&ends.To, toTarget, c.What+" to"); !ok {
				return
			}
		}
		s.To.Target = dst.Name
		s.ToOpts = ProduceOptions(dst.Driver)
		c.D.DecodeStructs(&ends.To, c.What+" to", &s.To, s.ToOpts)
		if s.To.Target == "" {
			s.To.Target = dst.Name
		}
	}
	c.CheckOptions(c.Target.Driver, s.FromOpts, c.What)
	c.CheckOptions(dst.Driver, s.ToOpts, c.What+" to")
}

// Build makes the relay.
func (s *RelaySection) Build(b *Build) (Workload, error) {
	return NewRelay(b.Name, *s, b.Targets(b.Target), b.Target, b.Targets(s.To.Target), b.Shared), nil
}
