package mqtt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	pahopackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The lean client (client: lean) speaks MQTT 3.1, 3.1.1 and 5 with the
// packet codec of github.com/mochi-mqtt/server/v2. A connection costs one
// goroutine, which reads; writes are made by the caller under the
// connection's lock, keep-alive pings by a timer. It implements paho.Client
// so that fleets, producers and consumers drive both clients alike.

const (
	// leanReadBuffer is the read buffer of a connection: small, as most
	// connections of a large fleet are idle.
	leanReadBuffer = 512
	// leanMinBackoff and the options' MaxReconnectInterval bound the pause
	// between reconnection attempts, doubled after each failure.
	leanMinBackoff = 100 * time.Millisecond
	// sessionForever is the MQTT 5 session expiry of a persistent session:
	// kept until the broker's own limit, as MQTT 3.1.1 does.
	sessionForever = 0xFFFFFFFF
)

// newClient makes a client of the kind the target asks for.
func (t *Target) newClient(o *paho.ClientOptions) paho.Client {
	if t.cfg.lean() {
		return newLeanClient(o, byte(t.cfg.protocolVersion()))
	}
	return paho.NewClient(o)
}

var errConnectionLost = errors.New("mqtt: connection lost before the broker acknowledged")

var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// leanToken is a paho.Token that completes once.
type leanToken struct {
	done   chan struct{}
	err    error
	filter string // subscriptions: for the refusal message
}

func newLeanToken() *leanToken { return &leanToken{done: make(chan struct{})} }

func (t *leanToken) complete(err error) {
	t.err = err
	close(t.done)
}

func (t *leanToken) Wait() bool { <-t.done; return true }
func (t *leanToken) WaitTimeout(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-t.done:
		return true
	case <-tm.C:
		return false
	}
}
func (t *leanToken) Done() <-chan struct{} { return t.done }
func (t *leanToken) Error() error {
	select {
	case <-t.done:
		return t.err
	default:
		return nil
	}
}

func doneToken(err error) *leanToken {
	t := newLeanToken()
	t.complete(err)
	return t
}

// pendingOp is an exchange waiting for the broker: a publish (QoS 1 and 2),
// a subscription or an unsubscription.
type pendingOp struct {
	tok   *leanToken
	quota bool // holds a slot of the broker's receive maximum
}

// leanClient is one lean MQTT connection.
type leanClient struct {
	o       paho.ClientOptions
	version byte

	mu      sync.Mutex // guards conn, the writes, pending and nextID
	conn    net.Conn
	pending map[uint16]pendingOp
	nextID  uint16
	quota   chan struct{} // MQTT 5 receive maximum of the broker, or nil

	up       atomic.Bool
	closing  atomic.Bool
	stop     chan struct{}
	runDone  chan struct{} // closed when the connection goroutine ends; guarded by mu
	lastRead atomic.Int64  // unix nanoseconds
	lastSent atomic.Int64
	ping     *time.Timer
}

var _ paho.Client = (*leanClient)(nil)

func newLeanClient(o *paho.ClientOptions, version byte) *leanClient {
	return &leanClient{o: *o, version: version, pending: map[uint16]pendingOp{}, stop: make(chan struct{})}
}

func (c *leanClient) IsConnected() bool      { return c.up.Load() }
func (c *leanClient) IsConnectionOpen() bool { return c.up.Load() }
func (c *leanClient) OptionsReader() paho.ClientOptionsReader {
	return paho.NewOptionsReader(&c.o)
}
func (c *leanClient) AddRoute(string, paho.MessageHandler) {}

// Connect starts the connection goroutine; the token completes with the
// first attempt's outcome. After a failed first attempt Connect may be
// called again.
func (c *leanClient) Connect() paho.Token {
	if c.closing.Load() {
		return doneToken(errors.New("mqtt: client closed"))
	}
	c.mu.Lock()
	if c.runDone != nil {
		select {
		case <-c.runDone:
		default:
			c.mu.Unlock()
			return doneToken(errors.New("mqtt: client is already connecting"))
		}
	}
	done := make(chan struct{})
	c.runDone = done
	c.mu.Unlock()
	tok := newLeanToken()
	go c.run(tok, done)
	return tok
}

// run connects, reads until the connection ends and, with auto-reconnect,
// connects again until Disconnect.
func (c *leanClient) run(first *leanToken, done chan struct{}) {
	defer close(done)
	br, err := c.connect()
	first.complete(err)
	if err != nil {
		return
	}
	backoff := leanMinBackoff
	for {
		c.connected()
		err := c.read(br)
		c.lost()
		if c.closing.Load() {
			return
		}
		if c.o.OnConnectionLost != nil {
			c.o.OnConnectionLost(c, err)
		}
		if !c.o.AutoReconnect {
			return
		}
		for {
			tm := time.NewTimer(backoff)
			select {
			case <-tm.C:
			case <-c.stop:
				tm.Stop()
				return
			}
			backoff = min(backoff*2, max(c.o.MaxReconnectInterval, leanMinBackoff))
			if c.o.OnReconnecting != nil {
				c.o.OnReconnecting(c, &c.o)
			}
			if c.closing.Load() {
				return
			}
			if br, err = c.connect(); err == nil {
				backoff = leanMinBackoff
				break
			}
		}
	}
}

// connect dials and exchanges CONNECT and CONNACK within ConnectTimeout.
func (c *leanClient) connect() (*bufio.Reader, error) {
	if len(c.o.Servers) == 0 || c.o.CustomOpenConnectionFn == nil {
		return nil, errors.New("mqtt: lean client without a server")
	}
	conn, err := c.o.CustomOpenConnectionFn(c.o.Servers[0], c.o)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(c.o.ConnectTimeout))
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: c.version}
	pk.Connect.ProtocolName = []byte("MQTT")
	if c.version == 3 {
		pk.Connect.ProtocolName = []byte("MQIsdp")
	}
	pk.Connect.ClientIdentifier = c.o.ClientID
	pk.Connect.Clean = c.o.CleanSession
	pk.Connect.Keepalive = uint16(c.o.KeepAlive)
	if c.o.Username != "" {
		pk.Connect.UsernameFlag = true
		pk.Connect.Username = []byte(c.o.Username)
		if c.o.Password != "" {
			pk.Connect.PasswordFlag = true
			pk.Connect.Password = []byte(c.o.Password)
		}
	}
	if c.version == 5 && !c.o.CleanSession {
		pk.Properties.SessionExpiryInterval = sessionForever
		pk.Properties.SessionExpiryIntervalFlag = true
	}
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	err = pk.ConnectEncode(buf)
	if err == nil {
		_, err = conn.Write(buf.Bytes())
	}
	encodeBufs.Put(buf)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("mqtt: send CONNECT: %w", err)
	}
	br := bufio.NewReaderSize(conn, leanReadBuffer)
	ack, body, err := c.readPacket(br)
	if err == nil && ack.FixedHeader.Type != packets.Connack {
		err = fmt.Errorf("mqtt: the broker answered CONNECT with packet type %d", ack.FixedHeader.Type)
	}
	if err == nil && c.version == 5 && len(body) == 2 && body[1] == 0x01 {
		// A broker that speaks only MQTT 3.1.1 answers in its own
		// version: "unacceptable protocol version", without properties.
		err = pahopackets.ErrorRefusedBadProtocolVersion
	}
	if err == nil {
		err = ack.ConnackDecode(body)
	}
	if err == nil && ack.ReasonCode != 0 {
		err = connackError(ack.ReasonCode, c.version)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	c.mu.Lock()
	c.conn = conn
	c.quota = nil
	if c.version == 5 && ack.Properties.ReceiveMaximum > 0 && ack.Properties.ReceiveMaximum < 0xFFFF {
		c.quota = make(chan struct{}, ack.Properties.ReceiveMaximum)
	}
	c.mu.Unlock()
	if c.closing.Load() {
		_ = conn.Close()
		return nil, errors.New("mqtt: client closed")
	}
	return br, nil
}

// connackError maps CONNACK refusals to paho's errors, so both clients'
// refusals read alike and the same ones count as permanent.
func connackError(code, version byte) error {
	if version < 5 {
		if err, ok := pahopackets.ConnErrors[code]; ok {
			return err
		}
		return fmt.Errorf("mqtt: connection refused (code %d)", code)
	}
	switch code {
	case 0x84:
		return pahopackets.ErrorRefusedBadProtocolVersion
	case 0x85:
		return pahopackets.ErrorRefusedIDRejected
	case 0x86:
		return pahopackets.ErrorRefusedBadUsernameOrPassword
	case 0x87:
		return pahopackets.ErrorRefusedNotAuthorised
	case 0x88, 0x89:
		return pahopackets.ErrorRefusedServerUnavailable
	}
	return fmt.Errorf("mqtt: connection refused (reason code 0x%02x)", code)
}

func (c *leanClient) connected() {
	now := time.Now().UnixNano()
	c.lastRead.Store(now)
	c.lastSent.Store(now)
	c.up.Store(true)
	if ka := c.keepAlive(); ka > 0 {
		c.mu.Lock()
		if c.ping == nil {
			c.ping = time.AfterFunc(ka/2, c.keepAliveTick)
		} else {
			c.ping.Reset(ka / 2)
		}
		c.mu.Unlock()
	}
	if c.o.OnConnect != nil {
		// The handler may subscribe and wait for SUBACK, which this
		// goroutine reads.
		go c.o.OnConnect(c)
	}
}

func (c *leanClient) keepAlive() time.Duration { return time.Duration(c.o.KeepAlive) * time.Second }

// keepAliveTick pings when nothing was sent for most of the keep-alive
// interval, and drops a connection that stayed silent for two.
func (c *leanClient) keepAliveTick() {
	if !c.up.Load() {
		return
	}
	ka := c.keepAlive()
	now := time.Now()
	if now.Sub(time.Unix(0, c.lastRead.Load())) > 2*ka {
		c.mu.Lock()
		if c.conn != nil {
			_ = c.conn.Close()
		}
		c.mu.Unlock()
		return
	}
	if now.Sub(time.Unix(0, c.lastSent.Load())) >= ka/2 {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}
		_ = c.write(&pk, (*packets.Packet).PingreqEncode)
	}
	c.mu.Lock()
	if c.ping != nil {
		c.ping.Reset(ka / 2)
	}
	c.mu.Unlock()
}

// lost ends a connection: every exchange in flight fails (a persistent
// session gets the broker's side again on reconnect; a send is counted as
// failed, as its outcome is unknown).
func (c *leanClient) lost() {
	c.up.Store(false)
	c.mu.Lock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	if c.ping != nil {
		c.ping.Stop()
	}
	pend := c.pending
	c.pending = map[uint16]pendingOp{}
	c.quota = nil
	c.mu.Unlock()
	for _, p := range pend {
		p.tok.complete(errConnectionLost)
	}
}

// readPacket reads one packet; body is the packet's own buffer.
func (c *leanClient) readPacket(br *bufio.Reader) (packets.Packet, []byte, error) {
	pk := packets.Packet{ProtocolVersion: c.version}
	hb, err := br.ReadByte()
	if err != nil {
		return pk, nil, err
	}
	if err := pk.FixedHeader.Decode(hb); err != nil {
		return pk, nil, fmt.Errorf("mqtt: bad packet from the broker: %w", err)
	}
	n, _, err := packets.DecodeLength(br)
	if err != nil {
		return pk, nil, err
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return pk, nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	return pk, body, nil
}

// read handles the broker's packets until the connection ends.
func (c *leanClient) read(br *bufio.Reader) error {
	for {
		pk, body, err := c.readPacket(br)
		if err != nil {
			return err
		}
		switch pk.FixedHeader.Type {
		case packets.Publish:
			if err := pk.PublishDecode(body); err != nil {
				return err
			}
			c.deliver(&pk)
		case packets.Puback, packets.Pubcomp:
			if err := pk.PubackDecode(body); err != nil {
				return err
			}
			c.finish(pk.PacketID, ackError(pk.ReasonCode))
		case packets.Pubrec:
			if err := pk.PubrecDecode(body); err != nil {
				return err
			}
			if err := ackError(pk.ReasonCode); err != nil {
				c.finish(pk.PacketID, err)
				continue
			}
			rel := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1},
				PacketID: pk.PacketID, ProtocolVersion: c.version}
			if err := c.write(&rel, (*packets.Packet).PubrelEncode); err != nil {
				return err
			}
		case packets.Pubrel:
			if err := pk.PubrelDecode(body); err != nil {
				return err
			}
			comp := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubcomp},
				PacketID: pk.PacketID, ProtocolVersion: c.version}
			if err := c.write(&comp, (*packets.Packet).PubcompEncode); err != nil {
				return err
			}
		case packets.Suback:
			if err := pk.SubackDecode(body); err != nil {
				return err
			}
			c.finishSub(pk.PacketID, pk.ReasonCodes)
		case packets.Unsuback:
			c.finish(uint16(body[0])<<8|uint16(body[1]), nil)
		case packets.Pingresp:
		case packets.Disconnect:
			_ = pk.DisconnectDecode(body)
			return fmt.Errorf("mqtt: the broker disconnected (reason code 0x%02x)", pk.ReasonCode)
		default:
			return fmt.Errorf("mqtt: unexpected packet type %d from the broker", pk.FixedHeader.Type)
		}
	}
}

func ackError(code byte) error {
	if code >= 0x80 {
		return fmt.Errorf("mqtt: the broker refused the message (reason code 0x%02x)", code)
	}
	return nil
}

func (c *leanClient) take(id uint16) (pendingOp, bool) {
	c.mu.Lock()
	p, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	q := c.quota
	c.mu.Unlock()
	if ok && p.quota && q != nil {
		select {
		case <-q:
		default:
		}
	}
	return p, ok
}

func (c *leanClient) finish(id uint16, err error) {
	if p, ok := c.take(id); ok {
		p.tok.complete(err)
	}
}

func (c *leanClient) finishSub(id uint16, codes []byte) {
	p, ok := c.take(id)
	if !ok {
		return
	}
	for _, code := range codes {
		if code >= 0x80 {
			p.tok.complete(fmt.Errorf("mqtt: the broker refused the subscription to %q", p.tok.filter))
			return
		}
	}
	p.tok.complete(nil)
}

// deliver hands a PUBLISH to the default handler; Ack answers it.
func (c *leanClient) deliver(pk *packets.Packet) {
	m := &leanMessage{c: c, topic: pk.TopicName, payload: pk.Payload, qos: pk.FixedHeader.Qos,
		id: pk.PacketID, dup: pk.FixedHeader.Dup, retained: pk.FixedHeader.Retain}
	if c.o.DefaultPublishHandler != nil {
		c.o.DefaultPublishHandler(c, m)
	}
	if !c.o.AutoAckDisabled {
		m.Ack()
	}
}

// write encodes pk into a pooled buffer and writes it.
func (c *leanClient) write(pk *packets.Packet, encode func(*packets.Packet, *bytes.Buffer) error) error {
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer encodeBufs.Put(buf)
	if err := encode(pk, buf); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return errConnectionLost
	}
	if _, err := c.conn.Write(buf.Bytes()); err != nil {
		_ = c.conn.Close()
		return err
	}
	c.lastSent.Store(time.Now().UnixNano())
	return nil
}

// send registers an exchange under a fresh packet id and writes it.
func (c *leanClient) send(pk *packets.Packet, encode func(*packets.Packet, *bytes.Buffer) error, op pendingOp) error {
	c.mu.Lock()
	if c.conn == nil {
		c.mu.Unlock()
		return errConnectionLost
	}
	if len(c.pending) >= 0xFFFF {
		c.mu.Unlock()
		return errors.New("mqtt: 65535 messages in flight on one connection")
	}
	for {
		c.nextID++
		if _, used := c.pending[c.nextID]; c.nextID != 0 && !used {
			break
		}
	}
	pk.PacketID = c.nextID
	c.pending[pk.PacketID] = op
	c.mu.Unlock()
	if err := c.write(pk, encode); err != nil {
		c.take(pk.PacketID)
		return err
	}
	return nil
}

// Publish sends a message; the token completes when it is written (QoS 0),
// acknowledged (QoS 1) or completed (QoS 2).
func (c *leanClient) Publish(topic string, qos byte, retained bool, payload any) paho.Token {
	var body []byte
	switch p := payload.(type) {
	case []byte:
		body = p
	case string:
		body = []byte(p)
	default:
		return doneToken(fmt.Errorf("mqtt: unknown payload type %T", payload))
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: retained},
		TopicName: topic, Payload: body, ProtocolVersion: c.version}
	if qos == 0 {
		return doneToken(c.write(&pk, (*packets.Packet).PublishEncode))
	}
	c.mu.Lock()
	q := c.quota
	c.mu.Unlock()
	if q != nil {
		select {
		case q <- struct{}{}:
		case <-c.stop:
			return doneToken(errors.New("mqtt: client closed"))
		}
	}
	tok := newLeanToken()
	if err := c.send(&pk, (*packets.Packet).PublishEncode, pendingOp{tok: tok, quota: q != nil}); err != nil {
		if q != nil {
			select {
			case <-q:
			default:
			}
		}
		return doneToken(err)
	}
	return tok
}

// Subscribe subscribes to one filter; the handler is the client's default
// one, as planrun's consumers use it.
func (c *leanClient) Subscribe(topic string, qos byte, _ paho.MessageHandler) paho.Token {
	return c.SubscribeMultiple(map[string]byte{topic: qos}, nil)
}

func (c *leanClient) SubscribeMultiple(filters map[string]byte, _ paho.MessageHandler) paho.Token {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: c.version}
	tok := newLeanToken()
	for f, q := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: q})
		tok.filter = f
	}
	if err := c.send(&pk, (*packets.Packet).SubscribeEncode, pendingOp{tok: tok}); err != nil {
		return doneToken(err)
	}
	return tok
}

func (c *leanClient) Unsubscribe(topics ...string) paho.Token {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Unsubscribe, Qos: 1}, ProtocolVersion: c.version}
	for _, f := range topics {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	tok := newLeanToken()
	if err := c.send(&pk, (*packets.Packet).UnsubscribeEncode, pendingOp{tok: tok}); err != nil {
		return doneToken(err)
	}
	return tok
}

// Disconnect sends DISCONNECT, closes the connection and stops
// reconnecting; it waits for the connection goroutine at most quiesce ms.
func (c *leanClient) Disconnect(quiesce uint) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	close(c.stop)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ProtocolVersion: c.version}
	_ = c.write(&pk, (*packets.Packet).DisconnectEncode)
	c.mu.Lock()
	if c.conn != nil {
		_ = c.conn.Close()
	}
	if c.ping != nil {
		c.ping.Stop()
	}
	done := c.runDone
	c.mu.Unlock()
	if done == nil {
		return
	}
	tm := time.NewTimer(time.Duration(quiesce) * time.Millisecond)
	defer tm.Stop()
	select {
	case <-done:
	case <-tm.C:
	}
}

// leanMessage is a received PUBLISH.
type leanMessage struct {
	c        *leanClient
	topic    string
	payload  []byte
	id       uint16
	qos      byte
	dup      bool
	retained bool
	once     sync.Once
}

func (m *leanMessage) Duplicate() bool   { return m.dup }
func (m *leanMessage) Qos() byte         { return m.qos }
func (m *leanMessage) Retained() bool    { return m.retained }
func (m *leanMessage) Topic() string     { return m.topic }
func (m *leanMessage) MessageID() uint16 { return m.id }
func (m *leanMessage) Payload() []byte   { return m.payload }

// Ack answers a QoS 1 message with PUBACK and a QoS 2 one with PUBREC.
func (m *leanMessage) Ack() {
	if m.qos == 0 {
		return
	}
	m.once.Do(func() {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: m.id, ProtocolVersion: m.c.version}
		enc := (*packets.Packet).PubackEncode
		if m.qos == 2 {
			pk.FixedHeader.Type = packets.Pubrec
			enc = (*packets.Packet).PubrecEncode
		}
		_ = m.c.write(&pk, enc)
	})
}
