package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/planrun/planrun/drivers"
)

// producer publishes on one channel of one connection in confirm mode:
// every publish gets the channel's next delivery tag, and the broker's
// basic.ack or basic.nack for the tag completes the send. Many sends are
// in flight at once (drivers.AsyncSender); one goroutine owns the
// connection, routes confirms and returns, and reconnects.
type producer struct {
	t        *Target
	workload string
	exchange string
	key      string
	dest     string
	opts     ProduceOptions
	confirm  bool
	timeout  time.Duration
	events   drivers.EventSink
	// confirmRoom is the confirm channel's buffer: the messages in flight.
	confirmRoom int

	ctx    context.Context // the producer's life
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	ch      *amqp.Channel // nil while disconnected
	up      chan struct{} // closed while connected
	pending map[uint64]*pend
	closing bool
	idle    chan struct{} // closed when closing and nothing is pending

	inflight     atomic.Int64
	failed       atomic.Int64
	returned     atomic.Int64
	nacked       atomic.Int64
	blockedNanos atomic.Int64 // time spent blocked, finished stretches
	blockedSince atomic.Int64 // unix nanos, 0 when not blocked
}

// pend is a published message waiting for its confirm.
type pend struct {
	done     drivers.Completion
	sent     time.Time
	returned string // the broker's reply text when it returned the message
}

var (
	_ drivers.AsyncSender   = (*producer)(nil)
	_ drivers.Gauger        = (*producer)(nil)
	_ drivers.TopicResolver = (*producer)(nil)
)

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, o *ProduceOptions) (drivers.Producer, error) {
	p := &producer{t: t, workload: spec.Workload, exchange: o.Exchange, key: spec.Topic, opts: *o,
		confirm: o.confirm(), timeout: o.sendTimeout(), events: spec.Events,
		up: make(chan struct{}), pending: map[uint64]*pend{}, done: make(chan struct{}),
		confirmRoom: max(2*spec.Threads, 64)}
	if o.Exchange != "" {
		if _, ok := t.cfg.exchangeType(o.Exchange); !ok {
			return nil, fmt.Errorf("rabbitmq: workload %s: exchange %q is not one of the target's exchanges; declare it under the target's exchanges (with its type) so planrun can account its routing", spec.Workload, o.Exchange)
		}
		if o.RoutingKey != "" {
			p.key = o.RoutingKey
		}
	} else if err := t.ensureQueue(ctx, spec.Topic); err != nil {
		return nil, err
	}
	p.dest = destination(p.exchange, p.key)
	conn, ch, n, err := p.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: producer of workload %s: %w", spec.Workload, err)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run(conn, ch, n)
	return p, nil
}

// notices are the notifications of one connection and its channel.
type notices struct {
	connClosed chan *amqp.Error
	chClosed   chan *amqp.Error
	confirms   chan amqp.Confirmation
	returns    chan amqp.Return
	blocked    chan amqp.Blocking
}

// connect opens the producer's connection and channel and puts the channel
// in confirm mode.
func (p *producer) connect(ctx context.Context) (*amqp.Connection, *amqp.Channel, notices, error) {
	var n notices
	conn, err := p.t.dial(ctx, "planrun producer "+p.workload)
	if err != nil {
		return nil, nil, n, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, n, fmt.Errorf("open a channel: %w", err)
	}
	n.connClosed = conn.NotifyClose(make(chan *amqp.Error, 1))
	n.chClosed = ch.NotifyClose(make(chan *amqp.Error, 1))
	n.blocked = conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	if p.confirm {
		if err := ch.Confirm(false); err != nil {
			conn.Close()
			return nil, nil, n, fmt.Errorf("confirm mode: %w", err)
		}
		// Room for every message in flight (threads): the connection's
		// reader never waits for run, which may wait for a publish.
		n.confirms = ch.NotifyPublish(make(chan amqp.Confirmation, p.confirmRoom))
	}
	if p.opts.Mandatory {
		// Unbuffered: the reader hands a return over before it reads the
		// confirm that follows it, so run sees the return first.
		n.returns = ch.NotifyReturn(make(chan amqp.Return))
	}
	return conn, ch, n, nil
}

// run owns the connection: it routes confirms and returns, fails sends
// whose confirm is overdue, and reconnects when the connection is lost.
func (p *producer) run(conn *amqp.Connection, ch *amqp.Channel, n notices) {
	defer close(p.done)
	b := backoff{ceiling: p.t.cfg.reconnectInterval()}
	reconnected := false
	for {
		p.mu.Lock()
		p.ch = ch
		close(p.up)
		p.mu.Unlock()
		if reconnected {
			drivers.Emit(p.events, drivers.Event{Kind: drivers.Reconnected})
		}
		b.next = 0
		reason, stopped := p.serve(conn, n)
		// Down: no more publishes on this channel; what it did not
		// confirm fails.
		p.mu.Lock()
		p.ch = nil
		p.up = make(chan struct{})
		p.mu.Unlock()
		if stopped {
			_ = conn.CloseDeadline(time.Now().Add(5 * time.Second))
		} else {
			conn.Close()
		}
		if n.confirms != nil {
			for c := range n.confirms { // closed by the library with the channel
				p.confirmed(c)
			}
		}
		p.failPending(fmt.Errorf("rabbitmq: connection to %s lost before the broker confirmed (%s)", p.t.where(), reason))
		p.endBlocked()
		if stopped {
			return
		}
		drivers.Emit(p.events, drivers.Event{Kind: drivers.Disconnected, Reason: reason})
		for {
			if !b.wait(p.ctx) {
				return
			}
			var err error
			conn, ch, n, err = p.connect(p.ctx)
			if err == nil {
				reconnected = true
				break
			}
		}
	}
}

// serve handles one connection's notifications until it is lost (reason)
// or the producer stops.
func (p *producer) serve(conn *amqp.Connection, n notices) (reason string, stopped bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return "closed", true
		case e := <-n.connClosed:
			return closeReason(e), false
		case e := <-n.chClosed:
			return closeReason(e), false
		case c, ok := <-n.confirms:
			if !ok {
				return "connection closed", false
			}
			p.confirmed(c)
		case r := <-n.returns:
			p.returnedMsg(r)
		case bl := <-n.blocked:
			p.flow(bl)
		case <-tick.C:
			p.expire()
		}
	}
}

func (p *producer) confirmed(c amqp.Confirmation) {
	p.mu.Lock()
	pd := p.pending[c.DeliveryTag]
	delete(p.pending, c.DeliveryTag)
	p.checkIdleLocked()
	p.mu.Unlock()
	if pd == nil {
		return // expired already
	}
	switch {
	case pd.returned != "":
		p.returned.Add(1)
		p.finish(pd.done, fmt.Errorf("rabbitmq: the broker returned the message to %s: %s", p.dest, pd.returned))
	case !c.Ack:
		p.nacked.Add(1)
		p.finish(pd.done, fmt.Errorf("rabbitmq: the broker refused (nack) the message to %s", p.dest))
	default:
		p.finish(pd.done, nil)
	}
}

// returnedMsg marks a mandatory message no queue took; its confirm follows.
func (p *producer) returnedMsg(r amqp.Return) {
	tag, err := strconv.ParseUint(r.MessageId, 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	if pd := p.pending[tag]; pd != nil {
		pd.returned = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
	}
	p.mu.Unlock()
}

// flow reports connection.blocked and connection.unblocked.
func (p *producer) flow(b amqp.Blocking) {
	if b.Active {
		if p.blockedSince.CompareAndSwap(0, time.Now().UnixNano()) {
			drivers.Emit(p.events, drivers.Event{Kind: Blocked, Reason: b.Reason})
		}
		return
	}
	if p.endBlocked() {
		drivers.Emit(p.events, drivers.Event{Kind: Unblocked})
	}
}

// endBlocked closes a blocked stretch, if one is open.
func (p *producer) endBlocked() bool {
	since := p.blockedSince.Swap(0)
	if since == 0 {
		return false
	}
	p.blockedNanos.Add(time.Now().UnixNano() - since)
	return true
}

// expire fails the sends whose confirm is overdue; a confirm arriving
// later is ignored.
func (p *producer) expire() {
	now := time.Now()
	var late []*pend
	p.mu.Lock()
	for tag, pd := range p.pending {
		if now.Sub(pd.sent) > p.timeout {
			late = append(late, pd)
			delete(p.pending, tag)
		}
	}
	p.checkIdleLocked()
	p.mu.Unlock()
	for _, pd := range late {
		p.finish(pd.done, fmt.Errorf("rabbitmq: no confirm from the broker for the message to %s within %s: %w", p.dest, p.timeout, context.DeadlineExceeded))
	}
}

func (p *producer) failPending(err error) {
	p.mu.Lock()
	all := p.pending
	p.pending = map[uint64]*pend{}
	p.checkIdleLocked()
	p.mu.Unlock()
	for _, pd := range all {
		p.finish(pd.done, err)
	}
}

func (p *producer) checkIdleLocked() {
	if p.closing && len(p.pending) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

func (p *producer) finish(done drivers.Completion, err error) {
	p.inflight.Add(-1)
	if err != nil {
		p.failed.Add(1)
	}
	done.Done(err)
}

var errClosed = errors.New("rabbitmq: producer is closed")

// SendAsync implements drivers.AsyncSender: it publishes m and returns;
// done gets the broker's confirm. While the connection is down it waits
// for it to come back, up to send_timeout.
func (p *producer) SendAsync(ctx context.Context, m *drivers.Message, done drivers.Completion) error {
	var timer <-chan time.Time
	for {
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			return errClosed
		}
		if ch := p.ch; ch != nil {
			err := p.publishLocked(ch, m, done)
			p.mu.Unlock()
			return err
		}
		up := p.up
		p.mu.Unlock()
		if timer == nil {
			tm := time.NewTimer(p.timeout)
			defer tm.Stop()
			timer = tm.C
		}
		select {
		case <-up:
		case <-timer:
			return fmt.Errorf("rabbitmq: not connected to %s for %s: %w", p.t.where(), p.timeout, context.DeadlineExceeded)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *producer) publishLocked(ch *amqp.Channel, m *drivers.Message, done drivers.Completion) error {
	msg := amqp.Publishing{Body: m.Value}
	if p.opts.Persistent {
		msg.DeliveryMode = amqp.Persistent
	}
	var tag uint64
	if p.confirm {
		tag = ch.GetNextPublishSeqNo()
		if p.opts.Mandatory {
			msg.MessageId = strconv.FormatUint(tag, 10)
		}
	}
	if err := ch.Publish(p.exchange, p.key, p.opts.Mandatory, false, msg); err != nil {
		return fmt.Errorf("rabbitmq: publish to %s: %w", p.dest, err)
	}
	p.inflight.Add(1)
	if !p.confirm {
		// Written to the connection: that is all an unconfirmed send gets.
		p.finish(done, nil)
		return nil
	}
	p.pending[tag] = &pend{done: done, sent: time.Now()}
	return nil
}

// syncDone is the completion a Send waits on.
type syncDone chan error

func (s syncDone) Done(err error) { s <- err }

var syncPool = sync.Pool{New: func() any { return make(syncDone, 1) }}

// Send implements drivers.Producer: it returns when the broker confirmed m.
func (p *producer) Send(ctx context.Context, m *drivers.Message) error {
	s := syncPool.Get().(syncDone)
	if err := p.SendAsync(ctx, m, s); err != nil {
		syncPool.Put(s)
		return err
	}
	select {
	case err := <-s:
		syncPool.Put(s)
		return err
	case <-ctx.Done():
		// The completion still comes, into s's buffer; s is dropped.
		return ctx.Err()
	}
}

// ResolveTopic implements drivers.TopicResolver: a message to an exchange
// is accounted as exchange/routing-key (see match.go).
func (p *producer) ResolveTopic(*drivers.Message) string { return p.dest }

// Close implements drivers.Producer: it waits up to send_timeout for the
// confirms of what was published, then disconnects; sends still owed fail.
func (p *producer) Close() error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closing = true
	idle := make(chan struct{})
	p.idle = idle
	p.checkIdleLocked()
	p.mu.Unlock()
	tm := time.NewTimer(p.timeout)
	select {
	case <-idle:
	case <-tm.C:
	case <-p.done:
	}
	tm.Stop()
	p.cancel()
	<-p.done
	return nil
}

// Gauges implements drivers.Gauger.
func (p *producer) Gauges() map[string]float64 {
	blocked := p.blockedNanos.Load()
	if since := p.blockedSince.Load(); since != 0 {
		blocked += time.Now().UnixNano() - since
	}
	return map[string]float64{
		"in_flight":       float64(p.inflight.Load()),
		"send_errors":     float64(p.failed.Load()),
		"returned":        float64(p.returned.Load()),
		"nacked":          float64(p.nacked.Load()),
		"blocked_seconds": float64(blocked) / 1e9,
	}
}
