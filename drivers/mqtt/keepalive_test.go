package mqtt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/internal/testenv"
)

// wireProxy sits between the clients and a broker on loopback. It decodes
// the packets the clients send (their types and the CONNECT's protocol
// level) and can stall: stop forwarding in both directions while keeping
// the connections open, as a broker host that vanished from the network.
type wireProxy struct {
	ln       net.Listener
	upstream string
	stalled  atomic.Bool
	hold     atomic.Bool   // drop what the broker sends
	stall    chan struct{} // closed at the end, releasing the stalled forwarders

	mu       sync.Mutex
	versions []byte       // protocol level of every CONNECT
	sent     map[byte]int // packets from the clients by type
	dups     int          // PUBLISH packets with the DUP flag
	live     []net.Conn   // client sides of the connections forwarded now
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newWireProxy(t *testing.T, upstream string) *wireProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &wireProxy{ln: ln, upstream: strings.TrimPrefix(upstream, "tcp://"), stall: make(chan struct{}), sent: map[byte]int{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *wireProxy) url() string { return "tcp://" + p.ln.Addr().String() }

func (p *wireProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.stalled.Load() {
			// Accepted by the kernel, never answered.
			p.track(c)
			continue
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c)
		p.track(up)
		p.mu.Lock()
		p.live = append(p.live, c)
		p.mu.Unlock()
		p.wg.Add(2)
		// Either side ending ends both, as a real connection would.
		go func() { defer p.wg.Done(); p.fromClient(c, up); p.end(c, up) }()
		go func() { defer p.wg.Done(); p.pipe(c, up); p.end(c, up) }()
	}
}

func (p *wireProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// fromClient forwards the client's packets one by one, noting each.
func (p *wireProxy) fromClient(c, up net.Conn) {
	br := bufio.NewReader(c)
	for {
		var fh packets.FixedHeader
		b, err := br.ReadByte()
		if err != nil {
			return
		}
		if fh.Decode(b) != nil {
			return
		}
		n, _, err := packets.DecodeLength(br)
		if err != nil {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		if p.stalled.Load() {
			<-p.stall
			return
		}
		p.mu.Lock()
		p.sent[fh.Type]++
		if fh.Type == packets.Publish && fh.Dup {
			p.dups++
		}
		if fh.Type == packets.Connect && len(body) > 0 {
			// Protocol name (2-byte length and text), then the level.
			if l := int(body[0])<<8 | int(body[1]); len(body) > 2+l {
				p.versions = append(p.versions, body[2+l])
			}
		}
		p.mu.Unlock()
		pk := appendLength([]byte{b}, n)
		if _, err := up.Write(append(pk, body...)); err != nil {
			return
		}
	}
}

// pipe forwards the broker's bytes until the proxy stalls.
func (p *wireProxy) pipe(c, up net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		if p.stalled.Load() {
			<-p.stall
			return
		}
		if p.hold.Load() {
			continue
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// end closes both sides of a connection; a stalled proxy keeps the
// client's side open (silent) until the test ends.
func (p *wireProxy) end(c, up net.Conn) {
	_ = up.Close()
	if p.stalled.Load() {
		<-p.stall
	}
	_ = c.Close()
}

// cut closes every connection forwarded now, as a broker restart would.
func (p *wireProxy) cut() {
	p.mu.Lock()
	live := p.live
	p.live = nil
	p.mu.Unlock()
	for _, c := range live {
		_ = c.Close()
	}
}

// Stall stops all forwarding; connections stay open.
func (p *wireProxy) Stall() {
	p.stalled.Store(true)
}

func (p *wireProxy) count(typ byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[typ]
}

func (p *wireProxy) close() {
	_ = p.ln.Close()
	p.stalled.Store(true)
	close(p.stall)
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// keepAlive holds idle clients with a 2 s keep-alive through a proxy: they
// ping, the broker keeps them, and when the broker falls silent the clients
// notice and drop the connection. The proxy also checks the protocol level
// each client variant puts in CONNECT.
func keepAlive(t *testing.T, cl, broker string) {
	px := newWireProxy(t, broker)
	tg := mustOpen(t, &TargetConfig{Client: cl, URL: px.url(), ConnectTimeout: 2 * time.Second})
	// 2 s: mochi drops a client silent for keep-alive * 1.5 in whole
	// seconds, which for 1 s leaves no room.
	const n, ka = 3, 2 * time.Second
	conns, err := tg.Connect(testCtx(t, 10*time.Second), drivers.ConnectSpec{Workload: "idle"},
		&ProduceOptions{Clients: n, KeepAlive: ka})
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	eventually(t, 10*time.Second, "3 connected", func() bool { return conns.Gauges()["connected"] == n })

	want := byte(4)
	if cl == clientLean5 {
		want = 5
	}
	px.mu.Lock()
	for _, v := range px.versions {
		if v != want {
			t.Errorf("CONNECT with protocol level %d, want %d (all: %v)", v, want, px.versions)
		}
	}
	px.mu.Unlock()

	// Idle: a broker drops a client that sends nothing for 1.5 keep-alive
	// intervals, so the clients must ping.
	eventually(t, 15*time.Second, "2 pings per client", func() bool { return px.count(packets.Pingreq) >= 2*n })
	if g := conns.Gauges(); g["connected"] != n || g["reconnects"] != 0 {
		t.Fatalf("after idling with keep-alive %s: gauges %v", ka, g)
	}

	// The broker falls silent: no PINGRESP comes back. paho waits its
	// ping timeout (10 s) on top; the lean client gives up after two
	// keep-alive intervals without a packet.
	px.Stall()
	stalled := time.Now()
	bound := 4 * ka
	if cl == clientPaho {
		bound = 20 * time.Second
	}
	eventually(t, bound, "the clients to drop the silent connection", func() bool { return conns.Gauges()["connected"] == 0 })
	t.Logf("%s: silent broker noticed after %s", cl, time.Since(stalled).Round(10*time.Millisecond))
}

func TestKeepAliveEmbedded(t *testing.T) {
	t.Parallel() // mostly waiting
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, clientPaho)
		keepAlive(t, cl, "tcp://"+tg.Broker().Addr())
	})
}

func TestKeepAliveMosquitto(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, cl string) { keepAlive(t, cl, testenv.Broker(t, "PLANRUN_TEST_MOSQUITTO")) })
}

// TestMQTT5RefusedByActiveMQ: a broker that speaks only MQTT 3.1.1 refuses
// protocol_version 5 at open, and the error says what to change.
func TestMQTT5RefusedByActiveMQ(t *testing.T) {
	url := testenv.Broker(t, "PLANRUN_TEST_ACTIVEMQ")
	_, err := Driver.Open(testCtx(t, 20*time.Second), &TargetConfig{Client: clientLean, ProtocolVersion: 5, URL: url, ConnectTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "protocol_version") {
		t.Fatalf("open ActiveMQ with MQTT 5: %v", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("open ActiveMQ with MQTT 5 timed out instead of being refused: %v", err)
	}
}

// TestInFlightResent: publishes whose acknowledgement was lost with the
// connection are sent again, with DUP, after the client reconnects, and
// their sends succeed rather than count as failed.
func TestInFlightResent(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg0 := openEmbedded(t, clientPaho)
		px := newWireProxy(t, "tcp://"+tg0.Broker().Addr())
		tg := mustOpen(t, &TargetConfig{Client: cl, URL: px.url(), ConnectTimeout: 5 * time.Second})
		topic := unique("planrun/resend")
		col := collect(t, newConsumer(t, tg0, topic, "g", "c", nil))
		p := newProducer(t, tg, topic, 1, &ProduceOptions{Clients: 1, QoS: intp(1), SendTimeout: 20 * time.Second})

		px.hold.Store(true) // PUBACKs get lost
		const n = 5
		errs := make(chan error, n)
		for i := range n {
			go func() {
				errs <- p.Send(testCtx(t, 30*time.Second), &drivers.Message{Topic: topic, Value: []byte(fmt.Sprint("m-", i))})
			}()
		}
		eventually(t, 10*time.Second, "5 publishes through the proxy", func() bool { return px.count(packets.Publish) >= n })
		px.hold.Store(false)
		px.cut()
		for range n {
			select {
			case err := <-errs:
				if err != nil {
					t.Errorf("send in flight across a reconnect: %v", err)
				}
			case <-time.After(25 * time.Second):
				t.Fatal("send in flight across a reconnect did not return")
			}
		}
		col.wait(t, n, 10*time.Second)
		checkAll(t, col, "m", n)
		px.mu.Lock()
		dups, all := px.dups, px.sent[packets.Publish]
		px.mu.Unlock()
		t.Logf("%s: %d publishes through the proxy, %d with DUP", cl, all, dups)
		if cl != clientPaho && (all < 2*n || dups < n) {
			t.Errorf("%d publishes through the proxy, %d of them with DUP; want %d sent and %d sent again with DUP", all, dups, n, n)
		}
	})
}
