// Package mqtt is planrun's MQTT driver, built on
// github.com/eclipse/paho.mqtt.golang (MQTT 3.1 and 3.1.1). It publishes from
// fleets of client connections, subscribes, and holds idle connections for
// connection-scale tests. With url: embedded it starts an in-process broker
// (github.com/mochi-mqtt/server/v2) that lives as long as the target.
//
// MQTT has no consumer groups with committed positions: a stopped consumer
// misses what is published meanwhile, unless it uses a persistent session
// (clean_session: false with a fixed client_id), in which case the broker
// queues QoS 1/2 messages for it until it comes back.
package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/planrun/planrun/drivers"
	embedded "github.com/planrun/planrun/embedded/mqtt"
)

func init() {
	drivers.Register("mqtt", Driver,
		"MQTT 3.1/3.1.1/5 brokers (mosquitto, EMQX, ActiveMQ...) through eclipse/paho.mqtt.golang or a lean client of its own, with client fleets; url: embedded starts mochi-mqtt in process")
}

// Driver opens MQTT targets.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Restart: true, Relay: true, Credentials: true, Embedded: true, Connect: true,
})

var (
	_ drivers.TargetOf[ProduceOptions, ConsumeOptions] = (*Target)(nil)
	_ drivers.ConnectorOf[ProduceOptions]              = (*Target)(nil)
	_ drivers.Describer                                = (*Target)(nil)
	_ drivers.BrokerController                         = (*Target)(nil)
	_ drivers.EmbeddedConfig                           = (*TargetConfig)(nil)
	_ drivers.Producer                                 = (*Producer)(nil)
	_ drivers.Sourcer                                  = (*Producer)(nil)
	_ drivers.Gauger                                   = (*Producer)(nil)
	_ drivers.Consumer                                 = (*Consumer)(nil)
	_ drivers.Gauger                                   = (*Consumer)(nil)
	_ drivers.Connections                              = (*Connections)(nil)
)

// open starts the embedded broker if asked and makes one probe connection,
// so a wrong address or bad credentials show up before any workload starts.
func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	t := &Target{cfg: *c, open: map[closer]struct{}{}, consumerIDs: map[string]bool{}}
	raw := strings.TrimSpace(c.URL)
	if c.embedded() {
		b, err := embedded.Start(embedded.Options{Username: c.Username, Password: c.Password})
		if err != nil {
			return nil, err
		}
		t.broker = b
		raw = b.URL()
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.stopBroker()
		return nil, fmt.Errorf("mqtt: url %q: %w", raw, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	t.server = u
	if schemes[u.Scheme] {
		if t.tls, err = c.TLS.Load(); err != nil {
			t.stopBroker()
			return nil, fmt.Errorf("mqtt: %w", err)
		}
	}
	t.dialers = makeDialers(c)
	if c.Routed() && strings.HasPrefix(u.Scheme, "ws") {
		t.stopBroker()
		return nil, errors.New("mqtt: proxy: works with tcp and ssl URLs, not websockets")
	}
	if c.Routed() && len(c.SourceAddrs) > 0 {
		// The proxy's own connections to the broker would all leave from
		// one address, which is what source_addrs is there to avoid.
		t.stopBroker()
		return nil, errors.New("mqtt: proxy: and source_addrs do not go together: the proxy connects to the broker from one address; remove one of them")
	}
	if err := t.probe(ctx); err != nil {
		t.stopBroker()
		return nil, err
	}
	return t, nil
}

// makeDialers returns one dialer per source address (or one default). TCP
// keep-alive is off: MQTT's own keep-alive already probes each connection,
// and with 100k idle connections the kernel's probes are pure overhead.
func makeDialers(c *TargetConfig) []*net.Dialer {
	if len(c.SourceAddrs) == 0 {
		return []*net.Dialer{{Timeout: c.connectTimeout(), KeepAlive: -1}}
	}
	ds := make([]*net.Dialer, len(c.SourceAddrs))
	for i, a := range c.SourceAddrs {
		ds[i] = &net.Dialer{Timeout: c.connectTimeout(), KeepAlive: -1,
			LocalAddr: &net.TCPAddr{IP: net.ParseIP(strings.TrimSpace(a))}}
	}
	return ds
}

// closer is what the target closes on Close if its owner did not.
type closer interface{ Close() error }

// Target is a reachable MQTT broker.
type Target struct {
	cfg     TargetConfig
	server  *url.URL
	tls     *tls.Config
	dialers []*net.Dialer
	// broker is nil unless embedded; brokerDown is set while a plan has
	// it stopped.
	brokerMu   sync.Mutex
	broker     *embedded.Broker
	brokerDown bool

	mu          sync.Mutex
	closed      bool
	open        map[closer]struct{}
	consumerIDs map[string]bool
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	var extra []string
	if t.Broker() != nil {
		extra = append(extra, "embedded mochi-mqtt "+embedded.Version)
	}
	switch t.cfg.protocolVersion() {
	case 3:
		extra = append(extra, "MQTT 3.1")
	case 5:
		extra = append(extra, "MQTT 5")
	default:
		extra = append(extra, "MQTT 3.1.1")
	}
	if t.cfg.lean() {
		extra = append(extra, "lean client")
	}
	if t.tls != nil {
		extra = append(extra, "tls")
	}
	if t.cfg.Username != "" {
		extra = append(extra, "user "+t.cfg.Username)
	}
	if n := len(t.cfg.SourceAddrs); n > 0 {
		extra = append(extra, fmt.Sprintf("%d source addresses", n))
	}
	return "mqtt " + t.server.String() + " (" + strings.Join(extra, ", ") + ")"
}

// Broker returns the embedded broker, or nil.
func (t *Target) Broker() *embedded.Broker {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	return t.broker
}

var errNotEmbedded = errors.New("mqtt: the target does not run an embedded broker (url: embedded)")

// StopBroker implements drivers.BrokerController: the embedded broker
// stops, dropping every client connection and session, as a broker without
// persistence does when it goes down.
func (t *Target) StopBroker(context.Context) error {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	if t.broker == nil {
		return errNotEmbedded
	}
	if t.brokerDown {
		return errors.New("mqtt: the embedded broker is already stopped")
	}
	t.brokerDown = true
	return t.broker.Close()
}

// StartBroker implements drivers.BrokerController: a new embedded broker
// listens on the stopped one's address.
func (t *Target) StartBroker(context.Context) error {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	if t.broker == nil {
		return errNotEmbedded
	}
	if !t.brokerDown {
		return errors.New("mqtt: the embedded broker is already running")
	}
	b, err := embedded.Start(embedded.Options{Addr: t.broker.Addr(), Username: t.cfg.Username, Password: t.cfg.Password})
	if err != nil {
		return err
	}
	t.broker, t.brokerDown = b, false
	return nil
}

// Close implements drivers.TargetOf: it closes what workloads left open and
// stops the embedded broker.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	left := make([]closer, 0, len(t.open))
	for c := range t.open {
		left = append(left, c)
	}
	t.mu.Unlock()
	for _, c := range left {
		_ = c.Close()
	}
	t.stopBroker()
	return nil
}

func (t *Target) stopBroker() {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	if t.broker != nil && !t.brokerDown {
		_ = t.broker.Close()
	}
}

func (t *Target) track(c closer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("mqtt: target is closed")
	}
	t.open[c] = struct{}{}
	return nil
}

func (t *Target) untrack(c closer) {
	t.mu.Lock()
	delete(t.open, c)
	t.mu.Unlock()
}

// clientOptions returns the paho settings every client of the target shares;
// callers set the client id, session and handlers.
func (t *Target) clientOptions(keepAlive time.Duration, clean bool) *paho.ClientOptions {
	o := paho.NewClientOptions()
	o.Servers = []*url.URL{t.server}
	o.Username = t.cfg.Username
	o.Password = t.cfg.Password
	o.SetProtocolVersion(t.cfg.protocolVersion())
	o.TLSConfig = t.tls
	o.SetConnectTimeout(t.cfg.connectTimeout())
	o.SetKeepAlive(keepAlive)
	o.SetCleanSession(clean)
	// planrun retries failed first connections itself (counting them and
	// keeping to connect_rate); paho reconnects established ones.
	o.SetConnectRetry(false)
	o.SetAutoReconnect(true)
	o.SetMaxReconnectInterval(t.cfg.reconnectInterval())
	o.SetWriteTimeout(t.cfg.connectTimeout())
	return o
}

// dial connects client i's network connection from its source address. It
// replaces paho's dialer, which would go through an ALL_PROXY from the
// environment: a load generator must reach the broker directly.
func (t *Target) dial(i int) paho.OpenConnectionFunc {
	d := t.dialers[i%len(t.dialers)]
	return func(u *url.URL, o paho.ClientOptions) (net.Conn, error) {
		switch u.Scheme {
		case "tcp", "mqtt":
			return t.cfg.Dial(context.Background(), d, "tcp", u.Host)
		case "ssl", "tls", "mqtts":
			addr, err := t.cfg.Route(u.Host)
			if err != nil {
				return nil, err
			}
			tc := o.TLSConfig
			if addr != u.Host && (tc == nil || tc.ServerName == "") {
				// Through the proxy, the certificate is still the broker's.
				if tc == nil {
					tc = &tls.Config{}
				} else {
					tc = tc.Clone()
				}
				tc.ServerName = u.Hostname()
			}
			return tls.DialWithDialer(d, "tcp", addr, tc)
		case "ws", "wss":
			wu := *u
			wu.User = nil
			return paho.NewWebsocket(wu.String(), o.TLSConfig, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
		}
		return nil, fmt.Errorf("mqtt: unsupported scheme %q", u.Scheme)
	}
}

// probe makes and drops one connection.
func (t *Target) probe(ctx context.Context) error {
	o := t.clientOptions(defaultKeepAlive, true)
	o.SetClientID("planrun-probe-" + randomHex(6))
	o.SetAutoReconnect(false)
	o.SetCustomOpenConnectionFn(t.dial(0))
	c := t.newClient(o)
	tok := c.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		go func() { <-tok.Done(); c.Disconnect(0) }()
		return fmt.Errorf("mqtt: connect to %s: %w", t.server, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("mqtt: connect to %s: %s", t.server, connectError(err))
	}
	c.Disconnect(250)
	return nil
}

// connectError phrases a failed connection; the CONNACK codes that no retry
// can fix say what to change.
func connectError(err error) string {
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword):
		return "the broker refused the user name or password"
	case errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return "the broker refused the connection as not authorised (check username and password)"
	case errors.Is(err, packets.ErrorRefusedIDRejected):
		return "the broker rejected the client id"
	case errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return "the broker does not accept this protocol_version"
	}
	return err.Error()
}

// permanent reports CONNACK refusals that retrying cannot fix.
func permanent(err error) bool {
	return errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword) ||
		errors.Is(err, packets.ErrorRefusedNotAuthorised) ||
		errors.Is(err, packets.ErrorRefusedIDRejected) ||
		errors.Is(err, packets.ErrorRefusedBadProtocolVersion)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewProducer implements drivers.TargetOf. It returns once the first client
// is connected; the others connect in the background at connect_rate, and a
// send on a client that is not connected yet waits for it (send_timeout).
func (t *Target) NewProducer(ctx context.Context, spec drivers.ProducerSpec, o *ProduceOptions) (drivers.Producer, error) {
	if err := checkPublishTopic(spec.Topic); err != nil {
		return nil, err
	}
	n := o.Clients
	if n == 0 {
		n = max(spec.Threads, 1)
	}
	f, err := t.startFleet(ctx, spec.Workload, n, o, spec.Topic, spec.Events)
	if err != nil {
		return nil, err
	}
	p := &Producer{f: f, topic: spec.Topic, workload: spec.Workload, qos: qosOf(o.QoS), retain: o.Retain,
		timeout: o.SendTimeout}
	if p.timeout == 0 {
		p.timeout = defaultSendTimeout
	}
	return p, nil
}

// Connect implements drivers.ConnectorOf: it holds clients idle connections,
// made at connect_rate in the background; the first one is made before it
// returns, so configuration errors surface at once.
func (t *Target) Connect(ctx context.Context, spec drivers.ConnectSpec, o *ProduceOptions) (drivers.Connections, error) {
	n := o.Clients
	if n == 0 {
		n = 1
	}
	f, err := t.startFleet(ctx, spec.Workload, n, o, "", spec.Events)
	if err != nil {
		return nil, err
	}
	return &Connections{f: f}, nil
}

// Connections are idle client connections held by a connect workload.
type Connections struct{ f *fleet }

// Gauges implements drivers.Gauger.
func (c *Connections) Gauges() map[string]float64 { return c.f.gauges() }

// Close disconnects every client.
func (c *Connections) Close() error { return c.f.Close() }
