package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/planrun/planrun/drivers"
)

// handlerDrain bounds how long Close waits for consume calls that are still
// inside the workload's handler before it shuts the client down anyway.
const handlerDrain = 10 * time.Second

// rmqConsumer is one push consumer (clustering mode) of a group.
type rmqConsumer struct {
	topic, group, workload string
	pc                     rmq.PushConsumer
	queues                 atomic.Int64
	rebalances             atomic.Int64
	target                 *Target
	instance               string

	mu       sync.Mutex
	handle   func(*drivers.Message)
	ready    chan struct{} // closed when Run has set handle
	stopping bool          // set when Run ends: new deliveries are refused
	active   int           // consume calls inside handle
	idle     chan struct{} // closed when stopping and active reaches 0
	runStop  chan struct{} // closed by Close to end Run
	closed   bool
	shut     chan struct{} // closed once the client consumer is shut down
}

var _ drivers.Gauger = (*rmqConsumer)(nil)

// NewConsumer implements drivers.TargetOf: it starts the client's push
// consumer, which joins the group and starts pulling; deliveries wait until
// Run is called.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, opts *ConsumeOptions) (drivers.Consumer, error) {
	if t.isClosed() {
		return nil, errClosed
	}
	if spec.Group == "" {
		return nil, fmt.Errorf("rocketmq: consumer of topic %s (workload %s) needs a group", spec.Topic, spec.Workload)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	what := spec.Instance
	if what == "" {
		what = spec.Workload
	}
	c := newConsumer(spec)
	c.target, c.instance = t, t.instanceName(what)
	from := consumer.ConsumeFromFirstOffset
	if spec.FromLatest {
		from = consumer.ConsumeFromLastOffset
	}
	wrapped := t.cfg.wrap(spec.Topic)
	co := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(t.nameServers)),
		consumer.WithGroupName(spec.Group),
		consumer.WithInstance(c.instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(from),
		// The allocation is the client's default; wrapping it tells how
		// many queues this member got and how often the group rebalanced.
		consumer.WithStrategy(func(group, cid string, all []*primitive.MessageQueue, cids []string) []*primitive.MessageQueue {
			mine := consumer.AllocateByAveragely(group, cid, all, cids)
			if len(all) > 0 && all[0].Topic == wrapped {
				old := c.queues.Swap(int64(len(mine)))
				if c.rebalances.Add(1) > 1 && old != int64(len(mine)) {
					drivers.Emit(spec.Events, drivers.Event{Kind: drivers.Rebalance, Reason: fmt.Sprintf("%d queues assigned", len(mine))})
				}
			}
			return mine
		}),
	}
	if t.cfg.acl() {
		co = append(co, consumer.WithCredentials(t.credentials()))
	}
	if t.cfg.Namespace != "" {
		co = append(co, consumer.WithNamespace(t.cfg.Namespace))
	}
	if opts.MaxBatch > 0 {
		co = append(co, consumer.WithConsumeMessageBatchMaxSize(opts.MaxBatch))
	}
	if opts.PullBatchSize > 0 {
		co = append(co, consumer.WithPullBatchSize(int32(opts.PullBatchSize)))
	}
	if opts.ConsumeGoroutines > 0 {
		co = append(co, consumer.WithConsumeGoroutineNums(opts.ConsumeGoroutines))
	}
	if opts.PullThresholdForTopic > 0 {
		co = append(co, consumer.WithPullThresholdForTopic(opts.PullThresholdForTopic))
	}
	if opts.PullInterval > 0 {
		co = append(co, consumer.WithPullInterval(opts.PullInterval))
	}
	fail := func(err error) error {
		return fmt.Errorf("rocketmq: consumer group %s on topic %s (workload %s): %w", spec.Group, spec.Topic, spec.Workload, err)
	}
	pc, err := rmq.NewPushConsumer(co...)
	if err != nil {
		return nil, fail(err)
	}
	tags := opts.Tags
	if tags == "" {
		tags = "*"
	}
	if err := pc.Subscribe(spec.Topic, consumer.MessageSelector{Type: consumer.TAG, Expression: tags}, c.consume); err != nil {
		_ = pc.Shutdown()
		return nil, fail(err)
	}
	if err := pc.Start(); err != nil {
		_ = pc.Shutdown()
		return nil, fail(err)
	}
	c.pc = pc
	return c, nil
}

func newConsumer(spec drivers.ConsumerSpec) *rmqConsumer {
	return &rmqConsumer{topic: spec.Topic, group: spec.Group, workload: spec.Workload,
		ready: make(chan struct{}), idle: make(chan struct{}), runStop: make(chan struct{}), shut: make(chan struct{})}
}

// consume is the client's callback, run by up to consume_goroutines
// goroutines at once.
func (c *rmqConsumer) consume(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	select {
	case <-c.ready:
	case <-c.shut:
	}
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		// Not handed to the workload: hold the delivery until the client
		// is shut down. Its queue is dropped then, so the offset does not
		// move and the group's next consumer gets these messages.
		<-c.shut
		return consumer.ConsumeRetryLater, nil
	}
	c.active++
	handle := c.handle
	c.mu.Unlock()

	now := time.Now()
	for _, m := range msgs {
		dm := &drivers.Message{
			Topic:     c.topic,
			Value:     m.Body,
			Partition: -1,
			Offset:    m.QueueOffset,
			Received:  now,
		}
		if m.Queue != nil {
			dm.Partition = int32(m.Queue.QueueId)
		}
		if k := m.GetKeys(); k != "" {
			dm.Key = []byte(k)
		}
		handle(dm)
	}

	c.mu.Lock()
	c.active--
	if c.stopping && c.active == 0 {
		close(c.idle)
	}
	c.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

var errConsumerClosed = errors.New("rocketmq: consumer is closed")

// Run implements drivers.Consumer: it hands deliveries to handle until ctx
// is done or the consumer is closed, and returns nil then.
func (c *rmqConsumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return errConsumerClosed
	case c.handle != nil:
		c.mu.Unlock()
		return fmt.Errorf("rocketmq: consumer group %s on topic %s: Run called twice", c.group, c.topic)
	}
	c.handle = handle
	close(c.ready)
	c.mu.Unlock()

	select {
	case <-ctx.Done():
	case <-c.runStop:
	}
	c.stop()
	return nil
}

// stop refuses new deliveries; the ones inside handle finish.
func (c *rmqConsumer) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return
	}
	c.stopping = true
	if c.active == 0 {
		close(c.idle)
	}
}

// Close implements drivers.Consumer: it ends Run, waits for the messages
// being handled, and shuts the client down, which commits the group's
// position so the next consumer of the group continues from there. Messages
// whose handling ended just as the consumer stopped may be delivered again.
func (c *rmqConsumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.runStop)
	c.mu.Unlock()
	c.stop()
	select {
	case <-c.idle:
	case <-time.After(handlerDrain):
	}
	// Paused, the client starts no new rebalance while it shuts down.
	c.pc.Suspend()
	err := c.pc.Shutdown()
	close(c.shut)
	c.queues.Store(0)
	if c.target != nil {
		c.target.awaitLeft(c.group, c.instance)
	}
	if err != nil {
		return fmt.Errorf("rocketmq: close consumer group %s on topic %s (workload %s): %w", c.group, c.topic, c.workload, err)
	}
	return nil
}

// Gauges implements drivers.Gauger.
func (c *rmqConsumer) Gauges() map[string]float64 {
	return map[string]float64{
		"queues":     float64(c.queues.Load()),
		"rebalances": float64(c.rebalances.Load()),
	}
}
