package mqtt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/planrun/planrun/drivers"
)

const (
	// maxPendingConnects bounds connection handshakes in progress at once,
	// so an unlimited connect_rate does not overflow the broker's accept
	// queue (SYN retries then cost whole seconds).
	maxPendingConnects = 512
	// catchUp is how far the connect schedule may lag before it is reset:
	// a late timer is made up for by the next few connects, a long stall
	// does not turn into a burst. Connects never run ahead of the schedule
	// (the k-th no sooner than k/rate after the first).
	catchUp = 100 * time.Millisecond
	// Retries of failed first connections back off from minRetry to
	// maxRetry, with jitter so a fleet does not retry in lock step.
	minRetry = 500 * time.Millisecond
	maxRetry = 10 * time.Second
	// disconnectWorkers disconnect a fleet in parallel: one by one, 100k
	// clients would take minutes.
	disconnectWorkers = 32
	// quiesceMillis is how long a disconnect waits for DISCONNECT to be
	// written.
	quiesceMillis = 250
)

// limiter spaces connection attempts 1/rate apart. Waiters are served in
// turn; a nil limiter never waits.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return nil
	}
	iv := time.Duration(float64(time.Second) / rate)
	if iv <= 0 {
		return nil
	}
	return &limiter{interval: iv}
}

func (l *limiter) wait(ctx context.Context) error {
	if l == nil {
		return ctx.Err()
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.IsZero() {
		l.next = now
	}
	slot := l.next
	if earliest := now.Add(-catchUp); slot.Before(earliest) {
		slot = earliest
	}
	l.next = slot.Add(l.interval)
	l.mu.Unlock()
	d := slot.Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// member is one client of a fleet.
type member struct {
	client    paho.Client // set before the first connection attempt
	topic     string      // the fleet's publish topic for this client
	ready     chan struct{}
	readyOnce sync.Once
	up        atomic.Bool // connected now
	seen      atomic.Bool // connected at least once
	tries     int32       // failed first-connection attempts, for the backoff
}

// fleet is a set of clients connected at a bounded rate. Clients are made
// and connected in the background; each member's ready channel closes when
// it first connects.
type fleet struct {
	t       *Target
	base    int // {client} index of members[0]
	members []member
	lim     *limiter
	pending chan struct{}

	ctx      context.Context
	cancel   context.CancelFunc
	waiters  sync.WaitGroup // connection attempts and retries in progress
	dispatch chan struct{}  // closed when the dispatcher has returned
	first    chan struct{}  // closed when client 0's first attempt ended
	firstErr error

	fatalOnce sync.Once
	fatal     chan struct{} // closed on a refusal no retry can fix
	fatalErr  error

	events drivers.EventSink // the workload's, for disconnects and reconnects

	connected, failures, reconnects atomic.Int64
	latencySum, latencyN            atomic.Int64
	closeOnce                       sync.Once
}

// startFleet makes a fleet of n clients and returns once client 0 is
// connected, or with the error of its first attempt.
func (t *Target) startFleet(ctx context.Context, workload string, n int, o *ProduceOptions, topic string, events drivers.EventSink) (*fleet, error) {
	idTmpl := o.ClientID
	if idTmpl == "" {
		idTmpl = defaultProducerID
	}
	if n > 1 && !containsClient(idTmpl) {
		return nil, fmt.Errorf("mqtt: client_id %q has no {client}: all %d clients would share one id and take each other's connection over", idTmpl, n)
	}
	fixed := map[string]string{"workload": workload}
	ids := newExpander(idTmpl, fixed)
	topics := newExpander(topic, fixed)
	ids.base, topics.base = o.ClientBase, o.ClientBase

	fctx, cancel := context.WithCancel(context.Background())
	f := &fleet{
		t:        t,
		base:     o.ClientBase,
		members:  make([]member, n),
		lim:      newLimiter(o.ConnectRate),
		pending:  make(chan struct{}, maxPendingConnects),
		ctx:      fctx,
		cancel:   cancel,
		dispatch: make(chan struct{}),
		first:    make(chan struct{}),
		fatal:    make(chan struct{}),
		events:   events,
	}
	for i := range f.members {
		f.members[i].ready = make(chan struct{})
	}
	if err := t.track(f); err != nil {
		cancel()
		return nil, err
	}
	base := t.clientOptions(keepAliveOf(o.KeepAlive), boolOf(o.CleanSession, true))
	go f.run(base, ids, topics)

	select {
	case <-f.first:
	case <-ctx.Done():
		_ = f.Close()
		return nil, fmt.Errorf("mqtt: connecting to %s: %w", t.server, ctx.Err())
	}
	if f.firstErr != nil {
		_ = f.Close()
		return nil, fmt.Errorf("mqtt: connect to %s: %s", t.server, connectError(f.firstErr))
	}
	return f, nil
}

func containsClient(s string) bool {
	return newExpander(s, nil).perClient
}

// run makes and connects the clients in index order, one per limiter slot,
// with at most maxPendingConnects handshakes in flight.
func (f *fleet) run(base *paho.ClientOptions, ids, topics expander) {
	defer close(f.dispatch)
	for i := range f.members {
		if f.lim.wait(f.ctx) != nil {
			return
		}
		select {
		case f.pending <- struct{}{}:
		case <-f.ctx.Done():
			return
		case <-f.fatal:
			return
		}
		m := &f.members[i]
		m.topic = topics.client(i)
		o := *base
		o.ClientID = ids.client(i)
		o.CustomOpenConnectionFn = f.t.dial(i)
		o.OnConnect = func(paho.Client) {
			if m.up.CompareAndSwap(false, true) {
				f.connected.Add(1)
			}
			if !m.seen.CompareAndSwap(false, true) {
				f.reconnects.Add(1)
				f.event(i, drivers.Reconnected, nil)
			}
		}
		o.OnConnectionLost = func(_ paho.Client, err error) {
			if m.up.CompareAndSwap(true, false) {
				f.connected.Add(-1)
			}
			f.event(i, drivers.Disconnected, err)
		}
		// Reconnects keep to connect_rate too, so a broker restart does not
		// meet the whole fleet at once.
		o.OnReconnecting = func(paho.Client, *paho.ClientOptions) { _ = f.lim.wait(f.ctx) }
		m.client = f.t.newClient(&o)
		f.attempt(i)
		if i == 0 {
			select {
			case <-f.first:
			case <-f.ctx.Done():
				return
			}
			if f.firstErr != nil {
				return
			}
		}
	}
}

// attempt starts one connection attempt of member i, holding a pending
// slot, and handles its outcome in the background.
func (f *fleet) attempt(i int) {
	m := &f.members[i]
	start := time.Now()
	tok := m.client.Connect()
	f.waiters.Add(1)
	go func() {
		defer f.waiters.Done()
		<-tok.Done()
		<-f.pending
		err := tok.Error()
		if err == nil {
			f.latencySum.Add(int64(time.Since(start)))
			f.latencyN.Add(1)
			m.readyOnce.Do(func() { close(m.ready) })
			if i == 0 && m.tries == 0 {
				close(f.first)
			}
			return
		}
		f.failures.Add(1)
		if i == 0 && m.tries == 0 {
			f.firstErr = err
			close(f.first)
			return
		}
		if permanent(err) {
			f.fatalOnce.Do(func() {
				f.fatalErr = fmt.Errorf("mqtt: connect to %s: %s", f.t.server, connectError(err))
				close(f.fatal)
			})
			return
		}
		m.tries++
		d := min(minRetry<<min(m.tries-1, 10), maxRetry)
		d = d/2 + rand.N(d/2+1)
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-f.ctx.Done():
			return
		}
		if f.lim.wait(f.ctx) != nil {
			return
		}
		select {
		case f.pending <- struct{}{}:
		case <-f.ctx.Done():
			return
		}
		f.attempt(i)
	}()
}

// event reports a connection event of member i to the workload, numbered
// as {client} is across the whole fleet.
func (f *fleet) event(i int, kind string, err error) {
	drivers.Emit(f.events, drivers.Event{Kind: kind, Reason: drivers.Reason(err), Client: f.base + i, Of: len(f.members)})
}

// wait waits until member i is connected for the first time.
func (f *fleet) wait(ctx context.Context, i int, timeout <-chan time.Time) error {
	m := &f.members[i]
	select {
	case <-m.ready:
		return nil
	default:
	}
	select {
	case <-m.ready:
		return nil
	case <-f.fatal:
		return f.fatalErr
	case <-ctx.Done():
		return ctx.Err()
	case <-f.ctx.Done():
		return errors.New("mqtt: client closed")
	case <-timeout:
		return fmt.Errorf("mqtt: client %d is not connected yet", i)
	}
}

func (f *fleet) gauges() map[string]float64 {
	lat := 0.0
	if n := f.latencyN.Load(); n > 0 {
		lat = float64(f.latencySum.Load()) / float64(n) / 1e6
	}
	return map[string]float64{
		"clients":            float64(len(f.members)),
		"connected":          float64(f.connected.Load()),
		"connect_failures":   float64(f.failures.Load()),
		"connect_latency_ms": lat,
		"reconnects":         float64(f.reconnects.Load()),
	}
}

// Close stops connecting and disconnects every client, in parallel.
func (f *fleet) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		<-f.dispatch
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(disconnectWorkers, len(f.members)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(f.members) {
						return
					}
					m := &f.members[i]
					if m.client == nil {
						continue
					}
					m.client.Disconnect(quiesceMillis)
					if m.up.CompareAndSwap(true, false) {
						f.connected.Add(-1)
					}
				}
			}()
		}
		wg.Wait()
		f.waiters.Wait()
		f.t.untrack(f)
	})
	return nil
}
