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
	_ drivers.Producer    = (*Producer)(nil)
	_ drivers.AsyncSender = (*Producer)(nil)
	_ drivers.Gauger      = (*Producer)(nil)
)

var (
	errProducerClosed = errors.New("nats: producer is closed")
	errNotConnected   = errors.New("nats: not connected")
)

// Producer publishes on a connection of its own. A core publish is
// acknowledged once a PING written after it was answered by the server:
// the server has then read it and passed it to the subscribers it had.
// Publishes are acknowledged together, one round trip for all those written
// while the previous PING was out. A JetStream publish is acknowledged by
// the stream's publish ack; many are in flight at once.
type Producer struct {
	t       *Target
	nc      *nats.Conn
	topic   string
	timeout time.Duration

	mu     sync.Mutex
	closed bool

	// core: the completions of publishes written since the last PING.
	batch   []drivers.Completion
	free    []drivers.Completion // the flusher's spare slice
	kick    chan struct{}
	stop    chan struct{}
	flushed chan struct{}

	// JetStream: the completion of every publish awaiting its ack.
	js      jetstream.JetStream
	pubOpts []jetstream.PublishOpt
	pmu     sync.Mutex
	pending map[*nats.Msg]drivers.Completion

	failed counter
}

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, o *ProduceOptions) (drivers.Producer, error) {
	if err := checkSubject(spec.Topic, false); err != nil {
		return nil, fmt.Errorf("workload %s: %w", spec.Workload, err)
	}
	if o.JetStream {
		// A publish to a subject no stream stores would never be acked.
		if _, err := t.streamFor(ctx, spec.Topic, ""); err != nil {
			return nil, fmt.Errorf("workload %s: %w", spec.Workload, err)
		}
	}
	nc, err := t.connect(ctx, "planrun-"+spec.Workload, spec.Events)
	if err != nil {
		return nil, err
	}
	p := &Producer{t: t, nc: nc, topic: spec.Topic, timeout: o.sendTimeout()}
	if o.JetStream {
		p.pending = map[*nats.Msg]drivers.Completion{}
		p.js, err = jetstream.New(nc,
			jetstream.WithPublishAsyncAckHandler(p.acked),
			jetstream.WithPublishAsyncErrHandler(p.nacked),
			jetstream.WithPublishAsyncMaxPending(orDefault(o.MaxPending, defaultMaxPending)),
			jetstream.WithPublishAsyncTimeout(p.timeout))
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("nats: jetstream: %w", err)
		}
		p.pubOpts = []jetstream.PublishOpt{jetstream.WithStallWait(p.timeout)}
	} else {
		p.kick = make(chan struct{}, 1)
		p.stop = make(chan struct{})
		p.flushed = make(chan struct{})
		go p.flusher()
	}
	if err := t.track(p); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// waiter is the completion of a synchronous send.
type waiter chan error

func (w waiter) Done(err error) { w <- err }

var waiters = sync.Pool{New: func() any { return make(waiter, 1) }}

// Send implements drivers.Producer.
func (p *Producer) Send(ctx context.Context, m *drivers.Message) error {
	w := waiters.Get().(waiter)
	if err := p.SendAsync(ctx, m, w); err != nil {
		waiters.Put(w)
		return err
	}
	select {
	case err := <-w:
		waiters.Put(w)
		return err
	case <-ctx.Done():
		return ctx.Err() // w is left to the garbage collector
	}
}

// SendAsync implements drivers.AsyncSender.
func (p *Producer) SendAsync(ctx context.Context, m *drivers.Message, done drivers.Completion) error {
	subject := m.Topic
	if subject == "" {
		subject = p.topic
	}
	if p.js != nil {
		return p.publishJS(subject, m.Value, done)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errProducerClosed
	}
	if err := p.nc.Publish(subject, m.Value); err != nil {
		p.mu.Unlock()
		p.failed.Add(1)
		if errors.Is(err, nats.ErrReconnectBufExceeded) {
			err = errNotConnected
		}
		return fmt.Errorf("nats: publish to %s: %w", subject, err)
	}
	p.batch = append(p.batch, done)
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// flusher acknowledges core publishes: it takes the completions of what
// was written so far, sends a PING and completes them all when the PONG
// comes back (or fails them when it does not within send_timeout).
func (p *Producer) flusher() {
	defer close(p.flushed)
	for {
		stopping := false
		select {
		case <-p.kick:
		case <-p.stop:
			stopping = true
		}
		p.mu.Lock()
		b := p.batch
		p.batch = p.free[:0]
		p.mu.Unlock()
		if len(b) > 0 {
			var err error
			if !p.nc.IsConnected() {
				err = errNotConnected
			} else if err = p.nc.FlushTimeout(p.timeout); err != nil {
				if errors.Is(err, nats.ErrTimeout) {
					err = fmt.Errorf("nats: no answer from the server within %s: %w", p.timeout, err)
				} else {
					err = fmt.Errorf("nats: flush: %w", err)
				}
			}
			if err != nil {
				p.failed.Add(int64(len(b)))
			}
			for _, d := range b {
				d.Done(err)
			}
			clear(b)
		}
		p.free = b
		if stopping {
			return
		}
	}
}

func (p *Producer) publishJS(subject string, value []byte, done drivers.Completion) error {
	msg := &nats.Msg{Subject: subject, Data: value}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errProducerClosed
	}
	p.pmu.Lock()
	p.pending[msg] = done
	p.pmu.Unlock()
	_, err := p.js.PublishMsgAsync(msg, p.pubOpts...)
	p.mu.Unlock()
	if err != nil && p.take(msg) != nil {
		p.failed.Add(1)
		if errors.Is(err, nats.ErrReconnectBufExceeded) {
			err = errNotConnected
		}
		return fmt.Errorf("nats: publish to %s: %w", subject, err)
	}
	return nil
}

// take removes msg's completion; whoever takes it completes it, once.
func (p *Producer) take(msg *nats.Msg) drivers.Completion {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	d := p.pending[msg]
	delete(p.pending, msg)
	return d
}

// acked is the JetStream publisher's ack handler.
func (p *Producer) acked(_ jetstream.JetStream, msg *nats.Msg, _ *jetstream.PubAck) {
	if d := p.take(msg); d != nil {
		d.Done(nil)
	}
}

// nacked is the JetStream publisher's error handler: an error ack, a
// timeout, or a connection lost with the ack outstanding.
func (p *Producer) nacked(_ jetstream.JetStream, msg *nats.Msg, err error) {
	if d := p.take(msg); d != nil {
		p.failed.Add(1)
		switch {
		case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
			err = fmt.Errorf("nats: no publish ack within %s: %w", p.timeout, err)
		default:
			err = fmt.Errorf("nats: publish to %s: %w", msg.Subject, jsError(err))
		}
		d.Done(err)
	}
}

// Gather tells the workload that sends due within a millisecond of each
// other may be handed over together: they are written to the connection's
// buffer and acknowledged together anyway.
func (p *Producer) Gather() time.Duration { return time.Millisecond }

// Gauges implements drivers.Gauger.
func (p *Producer) Gauges() map[string]float64 {
	g := map[string]float64{"send_errors": float64(p.failed.Load())}
	if p.js != nil {
		p.pmu.Lock()
		g["in_flight"] = float64(len(p.pending))
		p.pmu.Unlock()
	} else {
		p.mu.Lock()
		g["in_flight"] = float64(len(p.batch))
		p.mu.Unlock()
	}
	return g
}

// Close implements drivers.Producer: it waits (up to send_timeout) for the
// acks of what was sent, fails what is still owed, and disconnects.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.js != nil {
		select {
		case <-p.js.PublishAsyncComplete():
		case <-time.After(p.timeout):
		}
		p.js.CleanupPublisher()
	} else {
		close(p.stop)
		<-p.flushed
	}
	p.nc.Close()
	p.t.untrack(p)
	return nil
}
