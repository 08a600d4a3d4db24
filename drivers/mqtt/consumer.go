package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/planrun/planrun/drivers"
)

// Consumer subscribes with one or more clients. Each client's messages are
// handed to handle in arrival order by a goroutine of its own, and a QoS 1/2
// message is acknowledged only after handle returned: paho's callback never
// blocks (a blocked callback would stall the connection's reader, keep-alive
// replies included, and the broker would drop the client), and a message
// that was never handled stays unacknowledged, so a persistent session gets
// it again.
type Consumer struct {
	t       *Target
	subs    []*subscriber
	qos     byte
	ids     []string
	running atomic.Bool

	connected, reconnects atomic.Int64
	closeOnce             sync.Once
	events                drivers.EventSink
}

// subscriber is one subscribing client and its queue of received messages.
type subscriber struct {
	c      *Consumer
	idx    int
	filter string
	client paho.Client
	up     atomic.Bool
	seen   atomic.Bool

	mu     sync.Mutex
	queue  []delivery
	head   int
	signal chan struct{}
	queued atomic.Int64
}

type delivery struct {
	msg paho.Message
	at  time.Time
}

// NewConsumer implements drivers.TargetOf. It connects and subscribes every
// client before it returns; the broker's messages are queued until Run.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, o *ConsumeOptions) (drivers.Consumer, error) {
	if err := checkFilter(spec.Topic); err != nil {
		return nil, err
	}
	n := max(o.Clients, 1)
	idTmpl := o.ClientID
	if idTmpl == "" {
		idTmpl = defaultConsumerID
	}
	if n > 1 && !containsClient(idTmpl) {
		return nil, fmt.Errorf("mqtt: client_id %q has no {client}: all %d clients would share one id and take each other's connection over", idTmpl, n)
	}
	instance := spec.Instance
	if instance == "" {
		instance = spec.Workload
	}
	ids := newExpander(idTmpl, map[string]string{"workload": spec.Workload, "group": spec.Group, "instance": instance})
	topic := spec.Topic
	if o.Shared && !strings.HasPrefix(topic, "$share/") {
		if spec.Group == "" || strings.ContainsAny(spec.Group, "/+#") {
			return nil, fmt.Errorf("mqtt: shared: true needs a group name without /, + or # (got %q)", spec.Group)
		}
		topic = "$share/" + spec.Group + "/" + topic
	}
	filters := newExpander(topic, map[string]string{"workload": spec.Workload})

	c := &Consumer{t: t, qos: qosOf(o.QoS), events: spec.Events}
	for i := range n {
		c.ids = append(c.ids, ids.client(i))
	}
	if err := t.claimIDs(c.ids); err != nil {
		return nil, err
	}
	if err := t.track(c); err != nil {
		t.releaseIDs(c.ids)
		return nil, err
	}
	base := t.clientOptions(keepAliveOf(o.KeepAlive), boolOf(o.CleanSession, true))
	base.SetOrderMatters(true)
	// Acknowledged by Run once handled; see Consumer.
	base.SetAutoAckDisabled(true)
	for i := range n {
		s := &subscriber{c: c, idx: i, filter: filters.client(i), signal: make(chan struct{}, 1)}
		opt := *base
		opt.ClientID = c.ids[i]
		opt.CustomOpenConnectionFn = t.dial(i)
		// The default handler also catches what a resumed persistent
		// session delivers right after CONNACK, before SUBSCRIBE.
		opt.DefaultPublishHandler = func(_ paho.Client, m paho.Message) { s.push(m) }
		opt.OnConnect = s.onConnect
		opt.OnConnectionLost = func(_ paho.Client, err error) {
			if s.up.CompareAndSwap(true, false) {
				c.connected.Add(-1)
			}
			s.event(drivers.Disconnected, err)
		}
		s.client = t.newClient(&opt)
		c.subs = append(c.subs, s)
	}

	errs := make(chan error, n)
	for _, s := range c.subs {
		go func() { errs <- s.start(ctx) }()
	}
	var first error
	for range c.subs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		_ = c.Close()
		return nil, first
	}
	return c, nil
}

// start connects and subscribes, bounded by ctx.
func (s *subscriber) start(ctx context.Context) error {
	tok := s.client.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return fmt.Errorf("mqtt: connecting to %s: %w", s.c.t.server, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("mqtt: connect to %s: %s", s.c.t.server, connectError(err))
	}
	return s.subscribe(ctx)
}

func (s *subscriber) subscribe(ctx context.Context) error {
	tok := s.client.Subscribe(s.filter, s.c.qos, nil)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return fmt.Errorf("mqtt: subscribing to %q: %w", s.filter, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("mqtt: subscribe to %q: %w", s.filter, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, code := range st.Result() {
			if code == 0x80 {
				return fmt.Errorf("mqtt: the broker refused the subscription to %q", f)
			}
		}
	}
	return nil
}

// onConnect counts the connection and, after a reconnect, subscribes again:
// a clean session starts without subscriptions.
func (s *subscriber) onConnect(paho.Client) {
	if s.up.CompareAndSwap(false, true) {
		s.c.connected.Add(1)
	}
	if s.seen.CompareAndSwap(false, true) {
		return
	}
	s.c.reconnects.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), s.c.t.cfg.connectTimeout())
	defer cancel()
	if err := s.subscribe(ctx); err != nil {
		s.event(drivers.ReceiveError, err)
	}
	s.event(drivers.Reconnected, nil)
}

// event reports a connection event of this subscriber to the workload.
func (s *subscriber) event(kind string, err error) {
	drivers.Emit(s.c.events, drivers.Event{Kind: kind, Reason: drivers.Reason(err), Client: s.idx, Of: len(s.c.ids)})
}

func (s *subscriber) push(m paho.Message) {
	d := delivery{msg: m, at: time.Now()}
	s.mu.Lock()
	s.queue = append(s.queue, d)
	s.mu.Unlock()
	s.queued.Add(1)
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *subscriber) pop(ctx context.Context) (delivery, bool) {
	for {
		s.mu.Lock()
		if s.head < len(s.queue) {
			d := s.queue[s.head]
			s.queue[s.head] = delivery{}
			s.head++
			if s.head == len(s.queue) {
				s.queue, s.head = s.queue[:0], 0
			} else if s.head >= 1024 && s.head*2 >= len(s.queue) {
				// Drop the consumed front so the backing array does not
				// only ever grow.
				s.queue = append(s.queue[:0:0], s.queue[s.head:]...)
				s.head = 0
			}
			s.mu.Unlock()
			s.queued.Add(-1)
			return d, true
		}
		s.mu.Unlock()
		select {
		case <-s.signal:
		case <-ctx.Done():
			return delivery{}, false
		}
	}
}

// Run implements drivers.Consumer: it hands every received message to
// handle, in order per client, until ctx is done.
func (c *Consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("mqtt: consumer is already running")
	}
	defer c.running.Store(false)
	var wg sync.WaitGroup
	for _, s := range c.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, ok := s.pop(ctx)
				if !ok {
					return
				}
				handle(&drivers.Message{Topic: d.msg.Topic(), Value: d.msg.Payload(), Source: s.idx,
					Partition: -1, Offset: -1, Received: d.at})
				if ctx.Err() != nil {
					// Stopped while handling: leave it unacknowledged so a
					// persistent session delivers it again.
					return
				}
				d.msg.Ack()
			}
		}()
	}
	wg.Wait()
	return nil
}

// Gauges implements drivers.Gauger.
func (c *Consumer) Gauges() map[string]float64 {
	var q int64
	for _, s := range c.subs {
		q += s.queued.Load()
	}
	return map[string]float64{
		"clients":    float64(len(c.subs)),
		"connected":  float64(c.connected.Load()),
		"reconnects": float64(c.reconnects.Load()),
		"queued":     float64(q),
	}
}

// Close disconnects the clients. With clean_session false the broker keeps
// their sessions (subscriptions and undelivered QoS 1/2 messages).
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, s := range c.subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.client.Disconnect(quiesceMillis)
				if s.up.CompareAndSwap(true, false) {
					c.connected.Add(-1)
				}
			}()
		}
		wg.Wait()
		c.t.releaseIDs(c.ids)
		c.t.untrack(c)
	})
	return nil
}

// claimIDs reserves consumer client ids: two live clients with one id take
// the connection from each other in a loop.
func (t *Target) claimIDs(ids []string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if t.consumerIDs[id] {
			return fmt.Errorf("mqtt: client id %q is already used by another running consumer of this target; with a fixed client_id use clients: N rather than several consumers", id)
		}
	}
	for _, id := range ids {
		t.consumerIDs[id] = true
	}
	return nil
}

func (t *Target) releaseIDs(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		delete(t.consumerIDs, id)
	}
}
