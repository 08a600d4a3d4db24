package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planrun/planrun/drivers"
)

var (
	_ drivers.Consumer = (*Consumer)(nil)
	_ drivers.Gauger   = (*Consumer)(nil)
)

// pullExpiry is how long one pull request waits on the server. nats-server
// 2.9 left the last messages of a burst undelivered until the waiting pull
// request expired (30 s by default): 5 s bounds that wait there.
const pullExpiry = 5 * time.Second

// drainWait bounds how long a stopping JetStream consumer handles what
// its client holds.
const drainWait = 5 * time.Second

// Consumer receives on a connection of its own: a core subscription in
// the group's queue group, or a durable JetStream consumer named after the
// group.
type Consumer struct {
	t    *Target
	nc   *nats.Conn
	spec drivers.ConsumerSpec
	o    *ConsumeOptions

	// core: the subscription's callback hands messages to the handler of
	// the running Run, and waits while none runs (the client queues what
	// arrives meanwhile, up to its pending limits, then drops: a slow
	// consumer event).
	sub     *nats.Subscription
	mu      sync.Mutex
	cond    *sync.Cond
	handle  func(*drivers.Message)
	busy    bool
	stopped bool

	// JetStream: the stream and the durable consumer (pull or push).
	stream string
	pull   jetstream.Consumer
	push   jetstream.PushConsumer

	received, redelivered counter
}

// NewConsumer implements drivers.TargetOf. A core consumer subscribes
// before it returns; a JetStream consumer creates (or updates) its durable
// consumer, which keeps the group's position until Run starts.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, o *ConsumeOptions) (drivers.Consumer, error) {
	if err := checkSubject(spec.Topic, true); err != nil {
		return nil, fmt.Errorf("workload %s: %w", spec.Workload, err)
	}
	c := &Consumer{t: t, spec: spec, o: o}
	var err error
	if o.JetStream {
		if err = c.prepareJS(ctx); err != nil {
			return nil, err
		}
	}
	name := "planrun-" + spec.Instance
	if spec.Instance == "" {
		name = "planrun-" + spec.Workload
	}
	if c.nc, err = t.connect(ctx, name, spec.Events); err != nil {
		return nil, err
	}
	if !o.JetStream {
		c.cond = sync.NewCond(&c.mu)
		if c.sub, err = c.nc.QueueSubscribe(spec.Topic, durableName(spec.Group), c.onCore); err != nil {
			c.nc.Close()
			return nil, fmt.Errorf("nats: subscribe to %s: %w", spec.Topic, err)
		}
		// The subscription exists on the server once this returns.
		if err := c.nc.FlushTimeout(orDefault(t.cfg.ConnectTimeout, defaultConnectTimeout)); err != nil {
			c.nc.Close()
			return nil, fmt.Errorf("nats: subscribe to %s: %w", spec.Topic, err)
		}
	} else {
		js, err := jetstream.New(c.nc)
		if err != nil {
			c.nc.Close()
			return nil, fmt.Errorf("nats: jetstream: %w", err)
		}
		name := durableName(spec.Group)
		if o.Mode == "push" {
			c.push, err = js.PushConsumer(ctx, c.stream, name)
		} else {
			c.pull, err = js.Consumer(ctx, c.stream, name)
		}
		if err != nil {
			c.nc.Close()
			return nil, fmt.Errorf("nats: consumer %s of stream %s: %w", name, c.stream, err)
		}
	}
	if err := t.track(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// prepareJS creates or updates the group's durable consumer through the
// target's connection. A group that exists keeps where it starts from: a
// consumer of it continues from its position.
func (c *Consumer) prepareJS(ctx context.Context) error {
	t, o, spec := c.t, c.o, c.spec
	if len(o.FilterSubjects) > 0 {
		if err := t.needs("filter_subjects", 2, 10); err != nil {
			return err
		}
	}
	stream, err := t.streamFor(ctx, spec.Topic, o.Stream)
	if err != nil {
		return fmt.Errorf("workload %s: %w", spec.Workload, err)
	}
	c.stream = stream
	name := durableName(spec.Group)
	cc := jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       orDefault(o.AckWait, defaultAckWait),
		MaxAckPending: orDefault(o.MaxAckPending, 1000),
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if len(o.FilterSubjects) > 0 {
		cc.FilterSubjects = o.FilterSubjects
	} else {
		cc.FilterSubject = spec.Topic
	}
	switch o.AckPolicy {
	case "all":
		cc.AckPolicy = jetstream.AckAllPolicy
	case "none":
		cc.AckPolicy = jetstream.AckNonePolicy
	}
	if o.MaxDeliver > 0 {
		cc.MaxDeliver = o.MaxDeliver
	}
	if spec.FromLatest {
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	if o.Mode == "push" {
		cc.DeliverSubject = "planrun.deliver." + stream + "." + name
		cc.DeliverGroup = name
	}
	if old, err := t.consumerInfo(ctx, stream, name); err == nil {
		// The server refuses to change where a consumer starts.
		oc := old.Config
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = oc.DeliverPolicy, oc.OptStartSeq, oc.OptStartTime
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("nats: consumer %s of stream %s: %w", name, stream, jsError(err))
	}
	if o.Mode == "push" {
		_, err = t.js.CreateOrUpdatePushConsumer(ctx, stream, cc)
	} else {
		_, err = t.js.CreateOrUpdateConsumer(ctx, stream, cc)
	}
	if err != nil {
		return fmt.Errorf("nats: create consumer %s of stream %s: %w", name, stream, jsError(err))
	}
	return nil
}

// Run implements drivers.Consumer.
func (c *Consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	if c.sub != nil {
		c.mu.Lock()
		c.handle = handle
		c.cond.Broadcast()
		c.mu.Unlock()
		<-ctx.Done()
		c.mu.Lock()
		c.handle = nil
		for c.busy {
			c.cond.Wait()
		}
		c.mu.Unlock()
		return nil
	}
	ack := c.o.AckPolicy != "none"
	h := func(m jetstream.Msg) {
		now := time.Now()
		c.received.Add(1)
		var seq int64 = -1
		if md, err := m.Metadata(); err == nil {
			seq = int64(md.Sequence.Stream)
			if md.NumDelivered > 1 {
				c.redelivered.Add(1)
			}
		}
		handle(&drivers.Message{Topic: m.Subject(), Value: m.Data(), Partition: 0, Offset: seq, Received: now})
		if ack {
			_ = m.Ack()
		}
	}
	onErr := func(_ jetstream.ConsumeContext, err error) {
		drivers.Emit(c.spec.Events, drivers.Event{Kind: drivers.ReceiveError, Reason: drivers.Reason(err)})
	}
	var cc jetstream.ConsumeContext
	var err error
	if c.push != nil {
		cc, err = c.push.Consume(h, jetstream.ConsumeErrHandler(onErr))
	} else {
		cc, err = c.pull.Consume(h, jetstream.PullMaxMessages(orDefault(c.o.Batch, defaultBatch)), jetstream.PullExpiry(pullExpiry), jetstream.ConsumeErrHandler(onErr))
	}
	if err != nil {
		return fmt.Errorf("nats: consume from stream %s: %w", c.stream, err)
	}
	<-ctx.Done()
	// What the client holds already is handled and acknowledged, so the
	// server does not deliver it again to the group's next consumer only
	// after ack_wait.
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(drainWait):
		cc.Stop()
		<-cc.Closed()
	}
	// The acks are on their way: make sure the server has them, so the
	// group's next consumer starts after what this one counted.
	c.flush()
	return nil
}

// flush waits (a little) for the server to have read what was written.
func (c *Consumer) flush() {
	if c.nc.IsConnected() {
		_ = c.nc.FlushTimeout(5 * time.Second)
	}
}

// onCore is the core subscription's callback (one at a time).
func (c *Consumer) onCore(m *nats.Msg) {
	now := time.Now()
	c.mu.Lock()
	for c.handle == nil && !c.stopped {
		c.cond.Wait()
	}
	h := c.handle
	c.busy = h != nil
	c.mu.Unlock()
	if h == nil {
		return // closed
	}
	c.received.Add(1)
	h(&drivers.Message{Topic: m.Subject, Value: m.Data, Partition: -1, Offset: -1, Received: now})
	c.mu.Lock()
	c.busy = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// Gauges implements drivers.Gauger.
func (c *Consumer) Gauges() map[string]float64 {
	g := map[string]float64{"received": float64(c.received.Load())}
	if c.sub != nil {
		if n, err := c.sub.Dropped(); err == nil {
			g["dropped"] = float64(n)
		}
	} else {
		g["redelivered"] = float64(c.redelivered.Load())
	}
	return g
}

// Close implements drivers.Consumer: a core subscription ends; a
// JetStream consumer's acks are flushed and its durable consumer stays on
// the server with the group's position.
func (c *Consumer) Close() error {
	if c.sub != nil {
		c.mu.Lock()
		c.stopped = true
		c.cond.Broadcast()
		c.mu.Unlock()
		_ = c.sub.Unsubscribe()
	}
	c.flush()
	c.nc.Close()
	c.t.untrack(c)
	return nil
}
