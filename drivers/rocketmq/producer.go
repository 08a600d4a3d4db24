package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/planrun/planrun/drivers"
)

// rmqProducer sends through one client producer shared by all the workload's
// sending threads, like the Java benchmark's producer.sh -w.
type rmqProducer struct {
	topic    string
	workload string
	mode     string
	tags     string
	p        rmq.Producer

	// routed is set after the first successful send. Until then sends go one
	// at a time: the client publishes a new route before it records the
	// broker's address, and concurrent first sends fail in between.
	routed atomic.Bool
	first  chan struct{}

	batch *batcher // nil unless batch > 1

	mu     sync.RWMutex // held shared while a Send is under way
	closed bool

	inflight atomic.Int64
	failed   atomic.Int64
	link     drivers.LinkWatch // connection events from send results

	// Oneway only: what the topic held when the producer opened (-1 when
	// unknown) and how many messages were written since.
	target  *Target
	stored0 int64
	written atomic.Int64
}

var _ drivers.Gauger = (*rmqProducer)(nil)

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, opts *ProduceOptions) (drivers.Producer, error) {
	if t.isClosed() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mode, _ := modeOf(opts.Mode)
	instance := t.instanceName(spec.Workload)
	po := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(t.nameServers)),
		producer.WithInstanceName(instance),
		producer.WithGroupName(instance),
		producer.WithRetry(t.cfg.retries()),
		producer.WithSendMsgTimeout(t.cfg.sendTimeout()),
	}
	if t.cfg.acl() {
		po = append(po, producer.WithCredentials(t.credentials()))
	}
	if t.cfg.Namespace != "" {
		po = append(po, producer.WithNamespace(t.cfg.Namespace))
	}
	if opts.CompressOver > 0 {
		po = append(po, producer.WithCompressMsgBodyOverHowmuch(int(opts.CompressOver)))
	}
	fail := func(err error) error {
		return fmt.Errorf("rocketmq: producer for topic %s (workload %s): %w", spec.Topic, spec.Workload, err)
	}
	p, err := rmq.NewProducer(po...)
	if err != nil {
		return nil, fail(err)
	}
	if err := p.Start(); err != nil {
		_ = p.Shutdown()
		return nil, fail(err)
	}
	rp := &rmqProducer{topic: spec.Topic, workload: spec.Workload, mode: mode, tags: opts.Tags, p: p, first: make(chan struct{}, 1), link: drivers.LinkWatch{Sink: spec.Events},
		target: t, stored0: -1}
	if mode == modeOneway {
		if n, err := t.storedMessages(ctx, spec.Topic); err == nil {
			rp.stored0 = n
		}
	}
	if opts.Batch > 1 {
		rp.batch = newBatcher(rp, opts.Batch, spec.Threads)
	}
	return rp, nil
}

var errProducerClosed = errors.New("rocketmq: producer is closed")

// Send implements drivers.Producer. It returns when the broker answered
// (sync, async) or the request was written (oneway).
func (p *rmqProducer) Send(ctx context.Context, m *drivers.Message) error {
	topic := m.Topic
	if topic == "" {
		topic = p.topic
	}
	msg := primitive.NewMessage(topic, m.Value)
	if p.tags != "" {
		msg.WithTag(p.tags)
	}
	if m.Key != nil {
		msg.WithKeys([]string{string(m.Key)})
	}

	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return errProducerClosed
	}
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	var err error
	if p.batch != nil && topic == p.topic {
		err = p.batch.send(ctx, msg)
	} else {
		err = p.send(ctx, msg)
	}
	if err != nil && ctx.Err() == nil {
		p.failed.Add(1)
	}
	if ctx.Err() == nil {
		p.link.Result(err)
	}
	return err
}

// send sends one message or one batch, with the first send going alone.
func (p *rmqProducer) send(ctx context.Context, msgs ...*primitive.Message) error {
	if !p.routed.Load() {
		select {
		case p.first <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.routed.Load() {
			<-p.first // another send resolved the route meanwhile
		} else {
			defer func() { <-p.first }()
		}
	}
	err := p.sendNow(ctx, msgs)
	if err == nil {
		p.routed.Store(true)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("rocketmq: send to topic %s (workload %s): %w%s", msgs[0].Topic, p.workload, err, sendHint(err))
}

func (p *rmqProducer) sendNow(ctx context.Context, msgs []*primitive.Message) error {
	switch p.mode {
	case modeOneway:
		if err := p.p.SendOneWay(ctx, msgs...); err != nil {
			return err
		}
		p.written.Add(int64(len(msgs)))
		return nil
	case modeAsync:
		done := make(chan error, 1)
		err := p.p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			done <- resultErr(r, err)
		}, msgs...)
		if err != nil {
			return err
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
		r, err := p.p.SendSync(ctx, msgs...)
		return resultErr(r, err)
	}
}

// resultErr counts only SEND_OK as acknowledged, like the Java benchmark:
// the other statuses mean stored but not flushed or not replicated in time.
func resultErr(r *primitive.SendResult, err error) error {
	if err != nil {
		return err
	}
	if r == nil {
		return errors.New("no send result")
	}
	if r.Status != primitive.SendOK {
		return fmt.Errorf("broker answered %s", sendStatus(r.Status))
	}
	return nil
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case primitive.SendUnknownError:
		return "UNKNOWN_ERROR"
	}
	return fmt.Sprintf("status %d", s)
}

// sendHint explains the refusals people meet first.
func sendHint(err error) string {
	s := strings.ToLower(err.Error())
	switch {
	case strings.Contains(s, "signature") || strings.Contains(s, "accesskey") || strings.Contains(s, "acl"):
		return " (check access_key and secret_key)"
	case strings.Contains(s, "route info not found"):
		return " (the topic does not exist and the broker does not create topics: create it under the target's topics:)"
	}
	return ""
}

// Close implements drivers.Producer: it waits for Sends under way and shuts
// the client producer down.
func (p *rmqProducer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.batch != nil {
		p.batch.close()
	}
	p.awaitStored()
	if err := p.p.Shutdown(); err != nil {
		return fmt.Errorf("rocketmq: close producer for topic %s (workload %s): %w", p.topic, p.workload, err)
	}
	return nil
}

// onewayDrain bounds how long Close waits for the broker to store what a
// oneway producer wrote.
const onewayDrain = 5 * time.Second

// awaitStored waits until the topic holds what this oneway producer wrote.
// The client sends oneway requests unmarked, so the broker answers them;
// closing the connection with answers unread resets it, and the broker then
// discards requests it had not read yet.
func (p *rmqProducer) awaitStored() {
	want := p.stored0 + p.written.Load()
	if p.mode != modeOneway || p.stored0 < 0 || want == p.stored0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), onewayDrain)
	defer cancel()
	for {
		if n, err := p.target.storedMessages(ctx, p.topic); err != nil || n >= want {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(createPoll):
		}
	}
}

// Gauges implements drivers.Gauger.
func (p *rmqProducer) Gauges() map[string]float64 {
	g := map[string]float64{
		"in_flight":   float64(p.inflight.Load()),
		"send_errors": float64(p.failed.Load()),
	}
	if p.batch != nil {
		if n := p.batch.requests.Load(); n > 0 {
			g["avg_batch"] = float64(p.batch.messages.Load()) / float64(n)
		}
	}
	return g
}

// batcher gathers concurrent Sends into batch requests. Each sender takes
// the first waiting message, adds whatever else is already waiting (up to
// max messages and the broker's size limit) and sends them in one request,
// so batches are as large as the load makes them, without a linger delay.
type batcher struct {
	p        *rmqProducer
	max      int
	in       chan *pendingMsg
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	requests atomic.Int64
	messages atomic.Int64
}

type pendingMsg struct {
	ctx  context.Context
	msg  *primitive.Message
	done chan error
}

func newBatcher(p *rmqProducer, maxMsgs, threads int) *batcher {
	ctx, cancel := context.WithCancel(context.Background())
	b := &batcher{p: p, max: maxMsgs, in: make(chan *pendingMsg, max(threads, maxMsgs)), ctx: ctx, cancel: cancel}
	// Enough senders for every thread's message to be in some batch.
	senders := max(1, (threads+maxMsgs-1)/maxMsgs)
	for range senders {
		b.wg.Add(1)
		go b.run()
	}
	return b
}

func (b *batcher) send(ctx context.Context, msg *primitive.Message) error {
	pm := &pendingMsg{ctx: ctx, msg: msg, done: make(chan error, 1)}
	select {
	case b.in <- pm:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-pm.done:
		return err
	case <-ctx.Done():
		// The sender still answers into the buffered done channel.
		return ctx.Err()
	}
}

func (b *batcher) run() {
	defer b.wg.Done()
	var carry *pendingMsg
	for {
		first := carry
		carry = nil
		if first == nil {
			var ok bool
			if first, ok = <-b.in; !ok {
				return
			}
		}
		batch := []*pendingMsg{first}
		size := len(first.msg.Body)
	fill:
		for len(batch) < b.max {
			select {
			case pm, ok := <-b.in:
				if !ok {
					break fill
				}
				if size+len(pm.msg.Body) > maxBatchBytes {
					carry = pm
					break fill
				}
				batch = append(batch, pm)
				size += len(pm.msg.Body)
			default:
				break fill
			}
		}
		b.flush(batch)
	}
}

// flush sends one batch and answers each of its Sends.
func (b *batcher) flush(batch []*pendingMsg) {
	live := batch[:0]
	for _, pm := range batch {
		if err := pm.ctx.Err(); err != nil {
			pm.done <- err // given up on: not sent
			continue
		}
		live = append(live, pm)
	}
	if len(live) == 0 {
		return
	}
	msgs := make([]*primitive.Message, len(live))
	for i, pm := range live {
		msgs[i] = pm.msg
	}
	b.requests.Add(1)
	b.messages.Add(int64(len(msgs)))
	err := b.p.send(b.ctx, msgs...)
	for _, pm := range live {
		pm.done <- err
	}
}

// close lets the senders finish what was handed to them, then stops them.
func (b *batcher) close() {
	close(b.in)
	b.wg.Wait()
	b.cancel()
}
