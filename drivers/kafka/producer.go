package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/planrun/planrun/drivers"
)

// pending is one Send waiting for its acknowledgement. It travels through
// sarama as the message's Metadata and is pooled, so a send costs no
// allocation beyond sarama's own.
type pending struct {
	msg        sarama.ProducerMessage
	key, value sarama.ByteEncoder
	done       chan error
	async      drivers.Completion // set by SendAsync, which nobody waits on
}

var pendingPool = sync.Pool{New: func() any { return &pending{done: make(chan error, 1)} }}

// producer sends through one asynchronous sarama producer, so concurrent
// Sends are batched together: N sending goroutines keep N messages in flight.
type producer struct {
	topic    string
	workload string
	ap       sarama.AsyncProducer

	mu     sync.RWMutex // held shared while handing a message to sarama
	closed bool

	linger   time.Duration
	drained  chan struct{} // closed when every completion was routed
	inflight atomic.Int64
	failed   atomic.Int64
	link     drivers.LinkWatch // connection events from send results
}

var (
	_ drivers.Gauger      = (*producer)(nil)
	_ drivers.AsyncSender = (*producer)(nil)
)

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, opts *ProduceOptions) (drivers.Producer, error) {
	sc := t.clientConfig()
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.RequiredAcks, _ = acksOf(opts.Acks)
	sc.Producer.Compression, _ = compressionOf(opts.Compression)
	sc.Producer.Partitioner, _ = partitionerOf(opts.Partitioner)
	sc.Producer.Idempotent = opts.Idempotent
	if opts.BatchSize > 0 {
		sc.Producer.Flush.Bytes = int(opts.BatchSize)
	}
	sc.Producer.Flush.Frequency = opts.linger()
	switch {
	case opts.MaxInFlight > 0:
		sc.Net.MaxOpenRequests = opts.MaxInFlight
	case opts.Idempotent:
		sc.Net.MaxOpenRequests = 1
	}
	if opts.MaxMessageBytes > 0 {
		sc.Producer.MaxMessageBytes = int(opts.MaxMessageBytes)
	}
	// Room for every sending goroutine's message without blocking on the
	// hand-over to sarama's dispatcher.
	if spec.Threads > sc.ChannelBufferSize {
		sc.ChannelBufferSize = spec.Threads
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: producer for topic %s (workload %s): %w", spec.Topic, spec.Workload, configError("produce options", err))
	}

	p := &producer{topic: spec.Topic, workload: spec.Workload, linger: sc.Producer.Flush.Frequency, drained: make(chan struct{}),
		link: drivers.LinkWatch{Sink: spec.Events}}
	err := withContext(ctx, func() error {
		ap, err := sarama.NewAsyncProducer(t.brokers, sc)
		if err != nil {
			return err
		}
		p.ap = ap
		return nil
	}, func() {
		if p.ap != nil {
			p.ap.AsyncClose()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: producer for topic %s (workload %s): connect to %v: %w", spec.Topic, spec.Workload, t.brokers, err)
	}
	go p.route()
	return p, nil
}

// route hands each acknowledgement or failure back to the waiting Send until
// sarama closes both channels on shutdown.
func (p *producer) route() {
	defer close(p.drained)
	succ, errs := p.ap.Successes(), p.ap.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			p.complete(m.Metadata.(*pending), nil)
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if pd, ok := e.Msg.Metadata.(*pending); ok {
				p.complete(pd, e.Err)
			}
		}
	}
}

// complete hands a message's outcome to its sender: the Send waiting on it,
// or SendAsync's completion, called here on route's goroutine.
func (p *producer) complete(pd *pending, err error) {
	if pd.async == nil {
		pd.done <- err
		return
	}
	done := pd.async
	p.inflight.Add(-1)
	p.link.Result(err)
	if err != nil {
		p.failed.Add(1)
		err = fmt.Errorf("kafka: produce to topic %s: %w", pd.msg.Topic, err)
	}
	if err == nil {
		p.release(pd)
	}
	done.Done(err)
}

var errProducerClosed = errors.New("kafka: producer is closed")

// Send implements drivers.Producer. It returns when the broker acknowledged
// the message per acks, or failed it after sarama's retries. If ctx ends
// first, Send returns ctx.Err() but the message may still be delivered, and
// its key and value must stay untouched until then.
func (p *producer) Send(ctx context.Context, m *drivers.Message) error {
	pd, err := p.handOver(ctx, m, nil)
	if err != nil {
		return err
	}
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	select {
	case err := <-pd.done:
		topic := pd.msg.Topic
		p.link.Result(err)
		if err == nil {
			p.release(pd)
		}
		if err != nil {
			p.failed.Add(1)
			return fmt.Errorf("kafka: produce to topic %s: %w", topic, err)
		}
		return nil
	case <-ctx.Done():
		// sarama still holds pd; route's send lands in the buffered
		// channel and pd is left to the garbage collector.
		return ctx.Err()
	}
}

// SendAsync implements drivers.AsyncSender: the message goes to sarama's
// input and done is called from route when sarama returns it.
func (p *producer) SendAsync(ctx context.Context, m *drivers.Message, done drivers.Completion) error {
	p.inflight.Add(1)
	if _, err := p.handOver(ctx, m, done); err != nil {
		p.inflight.Add(-1)
		return err
	}
	return nil
}

// handOver gives m to sarama's dispatcher.
func (p *producer) handOver(ctx context.Context, m *drivers.Message, done drivers.Completion) (*pending, error) {
	topic := m.Topic
	if topic == "" {
		topic = p.topic
	}
	pd := pendingPool.Get().(*pending)
	pd.msg = sarama.ProducerMessage{Topic: topic, Metadata: pd}
	pd.async = done
	// A nil key must stay a nil interface: the partitioner spreads keyless
	// messages, while an empty key would hash every message alike.
	if m.Key != nil {
		pd.key = m.Key
		pd.msg.Key = &pd.key
	}
	if m.Value != nil {
		pd.value = m.Value
		pd.msg.Value = &pd.value
	}

	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.release(pd)
		return nil, errProducerClosed
	}
	select {
	case p.ap.Input() <- &pd.msg:
		return pd, nil
	case <-ctx.Done():
		p.release(pd)
		return nil, ctx.Err()
	}
}

// release puts a message sarama has finished with back in the pool. A
// failed message is left to the garbage collector instead: sarama may
// still read it after returning it (a partition producer that cannot find
// a leader returns the message, then backs off by its retry count).
func (p *producer) release(pd *pending) {
	pd.msg = sarama.ProducerMessage{}
	pd.key, pd.value = nil, nil
	pd.async = nil
	pendingPool.Put(pd)
}

// Close implements drivers.Producer: it flushes what sarama buffered, lets
// the waiting Sends return, and disconnects.
func (p *producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.drained
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	// AsyncClose, not Close: Close would drain the completion channels
	// itself and strand the Sends waiting on them.
	p.ap.AsyncClose()
	<-p.drained
	return nil
}

// Gather tells the workload that sends due within a millisecond of each
// other may be handed over together: with a linger of a millisecond or more
// they share a produce request anyway. Without linger, none is gathered.
func (p *producer) Gather() time.Duration { return min(p.linger, time.Millisecond) }

// Gauges implements drivers.Gauger.
func (p *producer) Gauges() map[string]float64 {
	return map[string]float64{
		"in_flight":   float64(p.inflight.Load()),
		"send_errors": float64(p.failed.Load()),
	}
}
