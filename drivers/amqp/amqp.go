// Package amqp is planrun's AMQP 1.0 driver, built on github.com/Azure/go-amqp:
// a topic is a node address (a queue or topic of ActiveMQ Artemis, Qpid,
// Solace, Azure Service Bus, RabbitMQ's AMQP 1.0 plugin), a send is
// acknowledged by the broker's disposition (unsettled, the default) or when
// it is written (settled), and a consumer is a receiver link with a credit
// window that accepts each message after counting it. Producers and
// consumers reconnect by themselves, reporting connection events.
package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
)

const (
	defaultConnectTimeout = 30 * time.Second
	defaultReconnect      = 5 * time.Second
	defaultSendTimeout    = 30 * time.Second
	defaultCredit         = 100
)

func init() {
	drivers.Register("amqp", Driver,
		"AMQP 1.0 through Azure/go-amqp: addresses as topics, settled or unsettled sends, receivers with credit (ActiveMQ Artemis, Qpid, Service Bus, RabbitMQ's AMQP 1.0 plugin)")
}

// TargetConfig is an AMQP 1.0 target's section of a plan.
type TargetConfig struct {
	URL               string         `yaml:"url" secret:"true" doc:"Broker URL amqp://host:5672 or amqps://host:5671 for TLS; user:password@ in it are SASL PLAIN credentials. The URL is a secret: reports name host:port only."`
	Username          string         `yaml:"username" doc:"SASL PLAIN user name, instead of the URL's."`
	Password          string         `yaml:"password" secret:"true" doc:"SASL PLAIN password, instead of the URL's."`
	SASL              string         `yaml:"sasl" default:"plain with a user name, else anonymous" doc:"SASL mechanism: plain (user name and password) or anonymous."`
	Hostname          string         `yaml:"hostname" doc:"Host name sent in the AMQP open frame (and TLS server name): RabbitMQ reads vhost:NAME here to pick a vhost; Service Bus wants the namespace's host name (default: the URL's host)."`
	TLS               tlsconf.Config `yaml:"tls" doc:"TLS settings for amqps:// URLs."`
	ConnectTimeout    time.Duration  `yaml:"connect_timeout" default:"30s" doc:"Longest one connection attempt (TCP, TLS, SASL, open, session and link) may take (default 30s)."`
	IdleTimeout       time.Duration  `yaml:"idle_timeout" default:"60s" doc:"The idle timeout the client announces: the broker sends something at least this often, and the client takes a silent broker for gone after it (default 60s)."`
	ReconnectInterval time.Duration  `yaml:"reconnect_interval" default:"5s" doc:"Longest pause between the reconnection attempts of a producer or consumer that lost its connection: it starts at 100ms and doubles (default 5s)."`
}

// ProduceOptions are the AMQP 1.0 fields of a workload's produce section.
type ProduceOptions struct {
	Settled     bool          `yaml:"settled" doc:"Send pre-settled (at most once): a send is acked when written and the broker sends no disposition. Default false: a send is acked by the broker's accepted disposition and fails on rejected, released or modified."`
	Durable     bool          `yaml:"durable" doc:"Mark messages durable (header durable = true): brokers keep them on disk across a restart."`
	SendTimeout time.Duration `yaml:"send_timeout" default:"30s" doc:"Longest a send waits for the connection to come back and for the broker's disposition before it counts as failed (default 30s)."`
}

// ConsumeOptions are the AMQP 1.0 fields of a workload's consume section.
type ConsumeOptions struct {
	Credit  int  `yaml:"credit" default:"100" doc:"Link credit: messages the broker may send ahead before planrun has taken them (default 100); planrun gives credit back as it takes messages."`
	Settled bool `yaml:"settled" doc:"Ask the broker to send messages pre-settled (at most once: what is in flight at a disconnect is lost). Default false: planrun accepts each message after counting it, and the broker sends again what was not accepted (counted as duplicates)."`
}

// Driver opens AMQP 1.0 targets.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Restart: true, Relay: true, Credentials: true,
})

var (
	_ drivers.TargetOf[ProduceOptions, ConsumeOptions] = (*Target)(nil)
	_ drivers.Describer                                = (*Target)(nil)
	_ drivers.Checker                                  = (*TargetConfig)(nil)
	_ drivers.Checker                                  = (*ProduceOptions)(nil)
	_ drivers.Checker                                  = (*ConsumeOptions)(nil)
)

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	_, err := c.parse()
	if err != nil {
		return err
	}
	if err := c.TLS.Check(); err != nil {
		return fmt.Errorf("amqp: %w", err)
	}
	for what, d := range map[string]time.Duration{"connect_timeout": c.ConnectTimeout, "idle_timeout": c.IdleTimeout, "reconnect_interval": c.ReconnectInterval} {
		if d < 0 {
			return fmt.Errorf("amqp: %s %s is negative", what, d)
		}
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if o.SendTimeout < 0 {
		return fmt.Errorf("amqp: send_timeout %s is negative", o.SendTimeout)
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	if o.Credit < 0 || o.Credit > 1<<20 {
		return fmt.Errorf("amqp: credit must be from 1 to %d, got %d", 1<<20, o.Credit)
	}
	return nil
}

// endpoint is a parsed target config.
type endpoint struct {
	addr       string // host:port
	host       string
	tls        bool
	user, pass string
	sasl       string
}

func (c *TargetConfig) parse() (endpoint, error) {
	raw := strings.TrimSpace(c.URL)
	if raw == "" {
		return endpoint{}, errors.New("amqp: url is empty; give amqp://host:5672 or amqps://host:5671")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return endpoint{}, errors.New("amqp: url: want amqp://host:5672 or amqps://host:5671 (with user:password@ for SASL PLAIN)")
	}
	var e endpoint
	switch strings.ToLower(u.Scheme) {
	case "amqp":
	case "amqps", "amqp+ssl":
		e.tls = true
	default:
		return endpoint{}, fmt.Errorf("amqp: url scheme %q is not supported; use amqp or amqps", u.Scheme)
	}
	if c.TLS.Given() && !e.tls {
		return endpoint{}, errors.New("amqp: tls settings are given but the url is amqp://; use amqps:// for TLS")
	}
	e.host = u.Hostname()
	port := u.Port()
	if port == "" {
		port = "5672"
		if e.tls {
			port = "5671"
		}
	}
	e.addr = net.JoinHostPort(e.host, port)
	if u.User != nil {
		e.user = u.User.Username()
		e.pass, _ = u.User.Password()
	}
	if c.Username != "" {
		e.user = c.Username
	}
	if c.Password != "" {
		e.pass = c.Password
	}
	e.sasl = strings.ToLower(c.SASL)
	switch e.sasl {
	case "":
		e.sasl = "anonymous"
		if e.user != "" {
			e.sasl = "plain"
		}
	case "plain":
		if e.user == "" {
			return endpoint{}, errors.New("amqp: sasl plain needs a user name: in the url (amqp://user:password@host) or username")
		}
	case "anonymous":
	default:
		return endpoint{}, fmt.Errorf("amqp: sasl %q: use plain or anonymous", c.SASL)
	}
	return e, nil
}

// Target is a reachable AMQP 1.0 broker.
type Target struct {
	cfg   TargetConfig
	ep    endpoint
	tls   *tls.Config
	props map[string]any // the broker's open properties
}

func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	ep, err := c.parse()
	if err != nil {
		return nil, err
	}
	t := &Target{cfg: *c, ep: ep}
	if ep.tls {
		if t.tls, err = c.TLS.Load(); err != nil {
			return nil, fmt.Errorf("amqp: %w", err)
		}
		if t.tls == nil {
			t.tls = &tls.Config{}
		}
	}
	// One connection to check that the broker answers and takes the
	// credentials, as the other drivers do at open.
	conn, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	t.props = conn.Properties()
	_ = conn.Close()
	return t, nil
}

func (t *Target) dial(ctx context.Context) (*goamqp.Conn, error) {
	timeout := t.cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := &goamqp.ConnOptions{HostName: t.cfg.Hostname, IdleTimeout: t.cfg.IdleTimeout, Properties: map[string]any{"product": "planrun"}}
	if opts.HostName == "" {
		opts.HostName = t.ep.host
	}
	if t.ep.sasl == "plain" {
		opts.SASLType = goamqp.SASLTypePlain(t.ep.user, t.ep.pass)
	} else {
		opts.SASLType = goamqp.SASLTypeAnonymous()
	}
	scheme := "amqp://"
	if t.tls != nil {
		opts.TLSConfig = t.tls.Clone()
		scheme = "amqps://"
	}
	// No credentials in the address: they go in SASLType, and errors
	// never quote them.
	conn, err := goamqp.Dial(ctx, scheme+t.ep.addr, opts)
	if err != nil {
		return nil, t.openError(err)
	}
	return conn, nil
}

func (t *Target) openError(err error) error {
	s := err.Error()
	low := strings.ToLower(s)
	if strings.Contains(low, "sasl") || strings.Contains(low, "authentication") || strings.Contains(low, "unauthorized-access") {
		if t.ep.sasl == "plain" {
			return fmt.Errorf("amqp: connect to %s: the broker refused user %q: wrong user name or password (%s)", t.ep.addr, t.ep.user, s)
		}
		return fmt.Errorf("amqp: connect to %s: the broker refused an anonymous connection; give a user name and password (%s)", t.ep.addr, s)
	}
	return fmt.Errorf("amqp: connect to %s: %w", t.ep.addr, err)
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	s := "amqp " + t.ep.addr
	if t.ep.user != "" {
		s = "amqp " + t.ep.user + "@" + t.ep.addr
	}
	if p, ok := t.props["product"].(string); ok {
		s += " (" + p
		if v, ok := t.props["version"].(string); ok {
			s += " " + v
		}
		s += ")"
	}
	return s
}

// Close implements drivers.TargetOf: producers and consumers hold their
// own connections.
func (t *Target) Close() error { return nil }

// link is one connection with one session and one link that a producer or
// consumer holds, replaced when it is lost.
type link struct {
	conn     *goamqp.Conn
	sender   *goamqp.Sender
	receiver *goamqp.Receiver
}

func (l *link) close() {
	if l != nil && l.conn != nil {
		_ = l.conn.Close()
	}
}

// session opens a connection and a session on it.
func (t *Target) session(ctx context.Context) (*goamqp.Conn, *goamqp.Session, error) {
	conn, err := t.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("amqp: begin a session on %s: %w", t.ep.addr, err)
	}
	return conn, s, nil
}

func (t *Target) reconnectInterval() time.Duration {
	if t.cfg.ReconnectInterval <= 0 {
		return defaultReconnect
	}
	return t.cfg.ReconnectInterval
}

// lost reports whether err means the connection, session or link is gone.
func lost(err error) bool {
	var ce *goamqp.ConnError
	var se *goamqp.SessionError
	var le *goamqp.LinkError
	return errors.As(err, &ce) || errors.As(err, &se) || errors.As(err, &le) || errors.Is(err, errStalled)
}

// errStalled is a receiver whose credit could not be reset by a drain
// (the broker did not answer it, or refused the credit after it): its
// link is opened again, which starts both sides' credit count afresh.
var errStalled = errors.New("link credit stalled")

// reason names why a connection was lost, for events.
func reason(err error) string {
	var ae *goamqp.Error
	if errors.As(err, &ae) {
		switch ae.Condition {
		case goamqp.ErrCondConnectionForced:
			return "closed by the broker"
		case goamqp.ErrCondDetachForced:
			return "link detached by the broker"
		}
		return string(ae.Condition)
	}
	return drivers.Reason(err)
}

// keeper holds a producer's or consumer's link and brings it back when it
// is lost: one goroutine reconnects with a back-off while users wait.
type keeper struct {
	t      *Target
	make   func(ctx context.Context) (*link, error)
	events drivers.EventSink
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	cur    *link
	up     chan struct{} // closed while cur is set
	closed bool
	wg     sync.WaitGroup
	downs  atomic.Int64
}

func newKeeper(ctx context.Context, t *Target, events drivers.EventSink, mk func(ctx context.Context) (*link, error)) (*keeper, error) {
	l, err := mk(ctx)
	if err != nil {
		return nil, err
	}
	k := &keeper{t: t, make: mk, events: events, cur: l, up: make(chan struct{})}
	close(k.up)
	k.ctx, k.cancel = context.WithCancel(context.Background())
	return k, nil
}

// get returns the current link, waiting up to wait (0: no limit but ctx)
// for a lost one to come back.
func (k *keeper) get(ctx context.Context, wait time.Duration) (*link, error) {
	var timer <-chan time.Time
	for {
		k.mu.Lock()
		l, up, closed := k.cur, k.up, k.closed
		k.mu.Unlock()
		if closed {
			return nil, errors.New("amqp: closed")
		}
		if l != nil {
			return l, nil
		}
		if timer == nil && wait > 0 {
			tm := time.NewTimer(wait)
			defer tm.Stop()
			timer = tm.C
		}
		select {
		case <-up:
		case <-timer:
			return nil, fmt.Errorf("amqp: not connected to %s for %s: %w", k.t.ep.addr, wait, context.DeadlineExceeded)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// failed reports that l failed with err: the first report of a lost link
// starts the reconnection.
func (k *keeper) failed(l *link, err error) {
	if !lost(err) {
		return
	}
	k.mu.Lock()
	if k.cur != l || k.closed {
		k.mu.Unlock()
		return
	}
	k.cur = nil
	k.up = make(chan struct{})
	k.mu.Unlock()
	l.close()
	k.downs.Add(1)
	drivers.Emit(k.events, drivers.Event{Kind: drivers.Disconnected, Reason: reason(err)})
	k.wg.Add(1)
	go k.reconnect()
}

func (k *keeper) reconnect() {
	defer k.wg.Done()
	next := 100 * time.Millisecond
	for {
		tm := time.NewTimer(next)
		select {
		case <-k.ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		next = min(2*next, k.t.reconnectInterval())
		l, err := k.make(k.ctx)
		if err != nil {
			continue
		}
		k.mu.Lock()
		if k.closed {
			k.mu.Unlock()
			l.close()
			return
		}
		k.cur = l
		close(k.up)
		k.mu.Unlock()
		drivers.Emit(k.events, drivers.Event{Kind: drivers.Reconnected})
		return
	}
}

func (k *keeper) close() {
	k.mu.Lock()
	k.closed = true
	l := k.cur
	k.cur = nil
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	l.close()
}

// producer sends on one sender link; concurrent Sends wait for their
// dispositions together, so threads are the messages in flight.
type producer struct {
	k       *keeper
	opts    ProduceOptions
	timeout time.Duration
	address string
	failed  atomic.Int64
}

var _ drivers.Gauger = (*producer)(nil)

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, o *ProduceOptions) (drivers.Producer, error) {
	mode := goamqp.SenderSettleModeUnsettled
	if o.Settled {
		mode = goamqp.SenderSettleModeSettled
	}
	mk := func(ctx context.Context) (*link, error) {
		conn, s, err := t.session(ctx)
		if err != nil {
			return nil, err
		}
		snd, err := s.NewSender(ctx, spec.Topic, &goamqp.SenderOptions{SettlementMode: &mode, Name: "planrun-" + spec.Workload})
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("amqp: attach a sender to address %s on %s: %w", spec.Topic, t.ep.addr, err)
		}
		return &link{conn: conn, sender: snd}, nil
	}
	k, err := newKeeper(ctx, t, spec.Events, mk)
	if err != nil {
		return nil, err
	}
	timeout := o.SendTimeout
	if timeout <= 0 {
		timeout = defaultSendTimeout
	}
	return &producer{k: k, opts: *o, timeout: timeout, address: spec.Topic}, nil
}

// Send implements drivers.Producer: it returns when the broker settled the
// message as accepted (or, settled: true, when it was written).
func (p *producer) Send(ctx context.Context, m *drivers.Message) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	l, err := p.k.get(ctx, p.timeout)
	if err != nil {
		p.failed.Add(1)
		return err
	}
	msg := &goamqp.Message{Data: [][]byte{m.Value}}
	if p.opts.Durable {
		msg.Header = &goamqp.MessageHeader{Durable: true}
	}
	if err := l.sender.Send(ctx, msg, nil); err != nil {
		p.failed.Add(1)
		p.k.failed(l, err)
		return fmt.Errorf("amqp: send to %s: %w", p.address, err)
	}
	return nil
}

// Close implements drivers.Producer.
func (p *producer) Close() error {
	p.k.close()
	return nil
}

// Gauges implements drivers.Gauger.
func (p *producer) Gauges() map[string]float64 {
	return map[string]float64{"send_errors": float64(p.failed.Load())}
}

// consumer receives on one receiver link.
type consumer struct {
	k        *keeper
	opts     ConsumeOptions
	address  string
	credit   int
	received atomic.Int64
}

// NewConsumer implements drivers.TargetOf.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, o *ConsumeOptions) (drivers.Consumer, error) {
	credit := o.Credit
	if credit <= 0 {
		credit = defaultCredit
	}
	// Credit is managed here, not by the library: planrun gives credit
	// back every half window, and a receiver idle for a second drains its
	// link and grants a full window again. RabbitMQ 3.x's AMQP 1.0 plugin
	// now and then sends more transfers than the credit granted; the
	// client's count of the credit left then wraps around and neither
	// side sends credit or messages any more. The drain resets both.
	ro := &goamqp.ReceiverOptions{Credit: -1, Name: "planrun-" + spec.Instance}
	if o.Settled {
		ro.RequestedSenderSettleMode = goamqp.SenderSettleModeSettled.Ptr()
	}
	mk := func(ctx context.Context) (*link, error) {
		conn, s, err := t.session(ctx)
		if err != nil {
			return nil, err
		}
		r, err := s.NewReceiver(ctx, spec.Topic, ro)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("amqp: attach a receiver to address %s on %s: %w", spec.Topic, t.ep.addr, err)
		}
		if err := r.IssueCredit(uint32(credit)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("amqp: credit for address %s: %w", spec.Topic, err)
		}
		return &link{conn: conn, receiver: r}, nil
	}
	k, err := newKeeper(ctx, t, spec.Events, mk)
	if err != nil {
		return nil, err
	}
	return &consumer{k: k, opts: *o, address: spec.Topic, credit: credit}, nil
}

// Run implements drivers.Consumer.
func (c *consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	var cur *link
	owed := 0 // messages taken since credit was last given back
	for {
		l, err := c.k.get(ctx, 0)
		if err != nil {
			return nil // stopped
		}
		if l != cur {
			cur, owed = l, 0 // a new link starts with a full window
		}
		rctx, cancel := context.WithTimeout(ctx, idleResync)
		msg, err := l.receiver.Receive(rctx, nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, context.DeadlineExceeded) {
				// Idle: drain the link and grant a full window again, so
				// a credit count the broker and the client disagree on
				// (see NewConsumer) is reset.
				if err := c.resync(ctx, l); err != nil {
					c.k.failed(l, err)
				}
				owed = 0
				continue
			}
			c.k.failed(l, err)
			continue
		}
		m := drivers.Message{Topic: c.address, Value: msg.GetData(), Partition: -1, Offset: -1, Received: time.Now()}
		handle(&m)
		c.received.Add(1)
		if !c.opts.Settled {
			// Not ctx: a message counted must be accepted even at a stop.
			actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := l.receiver.AcceptMessage(actx, msg)
			cancel()
			if err != nil {
				c.k.failed(l, err)
				continue
			}
		}
		if owed++; owed >= max(c.credit/2, 1) {
			if err := l.receiver.IssueCredit(uint32(owed)); err != nil {
				c.k.failed(l, err)
				continue
			}
			owed = 0
		}
	}
}

// idleResync is how long a receiver waits for a message before it drains
// its link and grants its credit again.
const idleResync = time.Second

// resync drains the link's credit (the broker answers once it has used or
// dropped what it had) and grants a full window.
func (c *consumer) resync(ctx context.Context, l *link) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.receiver.DrainCredit(dctx, nil); err != nil {
		if ctx.Err() != nil {
			return nil // stopping
		}
		if lost(err) {
			return err
		}
		return fmt.Errorf("%w: draining it: %v", errStalled, err)
	}
	if err := l.receiver.IssueCredit(uint32(c.credit)); err != nil {
		if lost(err) {
			return err
		}
		return fmt.Errorf("%w: granting %d: %v", errStalled, c.credit, err)
	}
	return nil
}

// Close implements drivers.Consumer: the connection closes; what was not
// accepted goes back to the broker.
func (c *consumer) Close() error {
	c.k.close()
	return nil
}
