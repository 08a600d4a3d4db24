package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/planrun/planrun/drivers"
)

// consumer reads one queue on a connection and channel of its own, with
// basic.qos prefetch, and acknowledges each message after the workload
// counted it (unless auto_ack). It reconnects when the connection is lost;
// what it had not acknowledged the broker delivers again, and planrun
// counts those as duplicates.
type consumer struct {
	t      *Target
	spec   drivers.ConsumerSpec
	opts   ConsumeOptions
	queue  string
	group  string
	stream bool
	events drivers.EventSink

	mu         sync.Mutex
	conn       *amqp.Connection
	deliveries <-chan amqp.Delivery
	closed     bool

	redelivered atomic.Int64
	received    atomic.Int64
}

var _ drivers.Gauger = (*consumer)(nil)

// NewConsumer implements drivers.TargetOf.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, o *ConsumeOptions) (drivers.Consumer, error) {
	if err := t.ensureQueue(ctx, spec.Topic); err != nil {
		return nil, err
	}
	c := &consumer{t: t, spec: spec, opts: *o, queue: spec.Topic, group: spec.Group,
		stream: t.cfg.queueType(spec.Topic) == "stream", events: spec.Events}
	if c.stream && o.AutoAck {
		return nil, fmt.Errorf("rabbitmq: workload %s: stream queue %s needs manual acknowledgements; remove auto_ack", spec.Workload, spec.Topic)
	}
	if err := c.connect(ctx); err != nil {
		return nil, fmt.Errorf("rabbitmq: consumer of queue %s (workload %s): %w", spec.Topic, spec.Workload, err)
	}
	return c, nil
}

// connect opens the connection and channel and starts consuming.
func (c *consumer) connect(ctx context.Context) error {
	conn, err := c.t.dial(ctx, "planrun consumer "+c.spec.Workload+" "+c.spec.Instance)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return fmt.Errorf("open a channel: %w", err)
	}
	if !c.opts.AutoAck || c.opts.Prefetch != nil {
		if err := ch.Qos(c.opts.prefetch(), 0, false); err != nil {
			conn.Close()
			return fmt.Errorf("basic.qos prefetch %d: %w", c.opts.prefetch(), err)
		}
	}
	var args amqp.Table
	if c.stream {
		args = amqp.Table{"x-stream-offset": c.startOffset()}
	}
	d, err := ch.Consume(c.queue, "planrun-"+c.spec.Instance, c.opts.AutoAck, false, false, false, args)
	if err != nil {
		conn.Close()
		return fmt.Errorf("basic.consume: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return errClosedConsumer
	}
	c.conn, c.deliveries = conn, d
	return nil
}

var errClosedConsumer = fmt.Errorf("rabbitmq: consumer is closed")

// startOffset is where a stream consumer starts: after what its group
// received earlier in this run, else stream_offset, else from.
func (c *consumer) startOffset() any {
	if next, ok := c.t.streamOffset(c.queue, c.group); ok {
		return next
	}
	if c.opts.StreamOffset != "" {
		v, _ := streamOffset(c.opts.StreamOffset)
		return v
	}
	if c.spec.FromLatest {
		return "next"
	}
	return "first"
}

// Run implements drivers.Consumer.
func (c *consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	b := backoff{ceiling: c.t.cfg.reconnectInterval()}
	for {
		c.mu.Lock()
		d, conn := c.deliveries, c.conn
		c.mu.Unlock()
		if d == nil {
			return nil
		}
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		reason, stopped := c.serve(ctx, d, closed, handle)
		if stopped {
			return nil
		}
		drivers.Emit(c.events, drivers.Event{Kind: drivers.Disconnected, Reason: reason})
		conn.Close()
		for {
			if !b.wait(ctx) {
				return nil
			}
			if err := c.connect(ctx); err == nil {
				break
			} else if err == errClosedConsumer {
				return nil
			}
		}
		b.next = 0
		drivers.Emit(c.events, drivers.Event{Kind: drivers.Reconnected})
	}
}

// serve hands deliveries to the workload until the connection is lost or
// ctx ends.
func (c *consumer) serve(ctx context.Context, d <-chan amqp.Delivery, closed chan *amqp.Error, handle func(*drivers.Message)) (string, bool) {
	for {
		select {
		case <-ctx.Done():
			return "", true
		case e := <-closed:
			if c.isClosed() {
				return "", true
			}
			return closeReason(e), false
		case dl, ok := <-d:
			if !ok {
				if c.isClosed() {
					return "", true
				}
				// The channel closed; the connection's reason follows.
				select {
				case e := <-closed:
					return closeReason(e), false
				case <-time.After(time.Second):
					return "channel closed", false
				}
			}
			// A message of its own each time: a relay keeps it after
			// handle returns.
			m := &drivers.Message{Topic: c.queue, Value: dl.Body, Partition: -1, Offset: -1, Received: time.Now()}
			if dl.Redelivered {
				c.redelivered.Add(1)
			}
			if c.stream {
				if off, ok := dl.Headers["x-stream-offset"].(int64); ok {
					m.Offset = off
				}
			}
			handle(m)
			c.received.Add(1)
			if c.stream && m.Offset >= 0 {
				c.t.received(c.queue, c.group, m.Offset)
			}
			if !c.opts.AutoAck {
				// A failed ack means the channel is gone: the broker
				// delivers the message again, and it counts as a duplicate.
				_ = dl.Ack(false)
			}
		}
	}
}

func (c *consumer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close implements drivers.Consumer: it closes the connection; messages
// delivered but not acknowledged go back to the queue.
func (c *consumer) Close() error {
	c.mu.Lock()
	conn := c.conn
	c.closed = true
	c.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		_ = conn.CloseDeadline(time.Now().Add(5 * time.Second))
	}
	return nil
}

// Gauges implements drivers.Gauger.
func (c *consumer) Gauges() map[string]float64 {
	return map[string]float64{"redelivered": float64(c.redelivered.Load())}
}
