// Package mqtt runs an in-process MQTT broker (github.com/mochi-mqtt/server/v2)
// for plans and tests that need one without installing anything.
package mqtt

import (
	"bytes"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Version is the broker library's version, for reports.
const Version = mochi.Version

// Limits of the embedded broker. mochi drops a QoS 1/2 message for a
// subscriber whose inflight store or write queue is full, so both are set
// far above what a load test keeps pending per client. The write queue is a
// channel allocated per connection (8 bytes a slot, touched only when used),
// which is what keeps it from being larger.
const (
	maxInflight      = math.MaxUint16
	receiveMaximum   = math.MaxUint16
	maxWritesPending = 16 * 1024
)

// Options configure the embedded broker.
type Options struct {
	// Addr is the listen address; "" means 127.0.0.1:0 (any free port).
	Addr string
	// Username and Password, when Username is set, are the only credentials
	// accepted; otherwise any client may connect.
	Username string
	Password string
	// TLS, when set, makes the listener speak TLS.
	TLS *tls.Config
}

// Broker is a running embedded broker.
type Broker struct {
	srv     *mochi.Server
	addr    string
	tls     bool
	closeMu sync.Mutex
	closed  bool
}

// Start starts a broker listening on o.Addr and returns once it accepts
// connections.
func Start(o Options) (*Broker, error) {
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumInflight = maxInflight
	caps.ReceiveMaximum = receiveMaximum
	caps.MaximumClientWritesPending = maxWritesPending
	// Persistent sessions of stopped consumers are kept until the broker
	// stops, as a broker with no session expiry would.
	caps.MaximumSessionExpiryInterval = math.MaxUint32
	// A message's expiry must not cut short a long-stopped persistent
	// consumer's queue in a test plan.
	caps.MaximumMessageExpiryInterval = 0
	srv := mochi.New(&mochi.Options{
		Capabilities: caps,
		// planrun reports what matters; the broker's own log lines would
		// interleave with its output.
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		SysTopicResendInterval: 60,
	})
	if err := srv.AddHook(&authHook{user: []byte(o.Username), pass: []byte(o.Password)}, nil); err != nil {
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	if err := srv.AddHook(newResumeGate(srv), nil); err != nil {
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded mqtt: listen on %s: %w", addr, err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	l := &listener{ln: ln, srv: srv}
	if err := srv.AddListener(l); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	return &Broker{srv: srv, addr: l.Address(), tls: o.TLS != nil}, nil
}

// Addr is the host:port the broker listens on.
func (b *Broker) Addr() string { return b.addr }

// URL is the broker's address as a client URL.
func (b *Broker) URL() string {
	if b.tls {
		return "ssl://" + b.addr
	}
	return "tcp://" + b.addr
}

// Stats are broker-side counters, for tests and reports.
type Stats struct {
	ClientsConnected int64
	// Dropped counts messages the broker discarded for a subscriber whose
	// queue or inflight store was full.
	Dropped int64
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	info := b.srv.Info
	return Stats{
		ClientsConnected: atomic.LoadInt64(&info.ClientsConnected),
		Dropped:          atomic.LoadInt64(&info.MessagesDropped) + atomic.LoadInt64(&info.InflightDropped),
	}
}

// RemoteAddrs maps the id of every connected client to its address as the
// broker sees it.
func (b *Broker) RemoteAddrs() map[string]string {
	out := map[string]string{}
	for id, cl := range b.srv.Clients.GetAll() {
		if !cl.Closed() {
			out[id] = cl.Net.Remote
		}
	}
	return out
}

// Close stops the broker, disconnecting its clients.
func (b *Broker) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.srv.Close()
	// Close returns before the client connections are torn down; wait a
	// little so a stopped broker leaves no client behind.
	deadline := time.Now().Add(5 * time.Second)
	for atomic.LoadInt64(&b.srv.Info.ClientsConnected) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// listener is a TCP listener for the broker that, unlike mochi's, stops
// accepting before it disconnects the clients: clients reconnecting at once
// then meet a refused connection rather than a socket nobody serves, which
// would hold them until their connect timeout.
type listener struct {
	ln      net.Listener
	srv     *mochi.Server
	closing atomic.Bool
}

func (l *listener) Init(*slog.Logger) error { return nil }
func (l *listener) ID() string              { return "planrun" }
func (l *listener) Address() string         { return l.ln.Addr().String() }
func (l *listener) Protocol() string        { return "tcp" }

func (l *listener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		if l.closing.Load() {
			_ = conn.Close()
			return
		}
		go func() { _ = establish(l.ID(), conn) }()
	}
}

// Close stops accepting and disconnects the listener's clients. It lists
// them with one read lock (Clients.GetAll) rather than through the closeFn
// mochi passes, whose Clients.GetByListener takes the read lock twice and
// deadlocks when a disconnecting client waits for the write lock between.
func (l *listener) Close(listeners.CloseFn) {
	if l.closing.CompareAndSwap(false, true) {
		_ = l.ln.Close()
		for _, cl := range l.srv.Clients.GetAll() {
			if cl.Net.Listener == l.ID() && !cl.Closed() {
				_ = l.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
			}
		}
	}
}

// authHook accepts every client, or only the configured credentials.
type authHook struct {
	mochi.HookBase
	user, pass []byte
}

func (h *authHook) ID() string { return "planrun-auth" }

func (h *authHook) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnConnectAuthenticate, mochi.OnACLCheck}, []byte{b})
}

func (h *authHook) OnConnectAuthenticate(_ *mochi.Client, pk packets.Packet) bool {
	if len(h.user) == 0 {
		return true
	}
	u := subtle.ConstantTimeCompare(pk.Connect.Username, h.user)
	p := subtle.ConstantTimeCompare(pk.Connect.Password, h.pass)
	return u&p == 1
}

func (h *authHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }
