package mqtt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	pahopackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The lean client (client: lean) speaks MQTT 3.1, 3.1.1 and 5. It encodes
// and decodes the packets of the publish path itself and the others with
// the packet codec of github.com/mochi-mqtt/server/v2. A connection costs at
// most one goroutine at a time: one that dials and sends CONNECT, then one
// with a fresh, small stack that reads until the connection ends, then
// (with auto-reconnect) one that dials again. Writes are made by the caller
// under the connection's lock, keep-alive pings by a timer. A QoS 1/2
// publish made through the producer waits on a pooled waiter, so the
// publish path allocates nothing per message. It implements paho.Client so
// that fleets, producers and consumers drive both clients alike.
//
// As paho does, publishes in flight when a connection drops are kept and
// sent again (with the DUP flag) once the client has reconnected; a send
// fails only when send_timeout passes first. Subscriptions in flight fail.

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
	// maxRemaining is the largest packet body MQTT can carry.
	maxRemaining = 268435455
	// pooledBufferMax is the largest encode buffer kept for reuse.
	pooledBufferMax = 64 << 10
)

// newClient makes a client of the kind the target asks for.
func (t *Target) newClient(o *paho.ClientOptions) paho.Client {
	if t.cfg.lean() {
		return newLeanClient(o, byte(t.cfg.protocolVersion()))
	}
	return paho.NewClient(o)
}

var (
	errConnectionLost = errors.New("mqtt: connection lost before the broker acknowledged")
	errClientClosed   = errors.New("mqtt: client closed")
	// errNoAck is returned by publishWait when its timeout fires.
	errNoAck = errors.New("mqtt: no acknowledgement from the broker")
)

var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// wireBufs are the buffers the publish path encodes into.
var wireBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func putWireBuf(b *[]byte) {
	if cap(*b) <= pooledBufferMax {
		*b = (*b)[:0]
		wireBufs.Put(b)
	}
}

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

// waiter is a reusable completion for publishWait: the reader sends the
// outcome on ch (buffered, so it never blocks).
type waiter struct{ ch chan error }

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan error, 1)} }}

// pendingOp is an exchange waiting for the broker: a publish (QoS 1 and 2),
// a subscription or an unsubscription. A publish keeps what it needs to be
// sent again after a reconnect.
type pendingOp struct {
	tok     *leanToken // completed by the broker's answer; or
	w       *waiter    // signalled instead (nil once its sender gave up)
	quota   bool       // holds a slot of the broker's receive maximum
	publish bool
	rel     bool // QoS 2: PUBREC came, PUBREL sent, PUBCOMP awaited
	qos     byte
	retain  bool
	topic   string
	payload []byte
}

func (p *pendingOp) complete(err error) {
	switch {
	case p.tok != nil:
		p.tok.complete(err)
	case p.w != nil:
		p.w.ch <- err
	}
}

// leanClient is one lean MQTT connection.
type leanClient struct {
	o       paho.ClientOptions
	version byte

	mu      sync.Mutex // guards conn, the writes, pending, nextID, quota and scratch
	conn    net.Conn
	pending map[uint16]pendingOp
	nextID  uint16
	quota   chan struct{} // MQTT 5 receive maximum of the broker, or nil
	scratch [8]byte       // small packets written under mu

	up       atomic.Bool
	closing  atomic.Bool
	stop     chan struct{}
	runDone  chan struct{} // closed when the connection's goroutines end; guarded by mu
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

// Connect starts connecting; the token completes with the first attempt's
// outcome. After a failed first attempt Connect may be called again.
func (c *leanClient) Connect() paho.Token {
	if c.closing.Load() {
		return doneToken(errClientClosed)
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
	go c.first(tok, done)
	return tok
}

// first makes the first connection and hands it to a reader.
func (c *leanClient) first(tok *leanToken, done chan struct{}) {
	br, inflight, err := c.connect()
	tok.complete(err)
	if err != nil {
		close(done)
		return
	}
	c.established(br, inflight, done)
}

// established starts the reader of a new connection (in a goroutine of its
// own: the dialing one's stack has grown) and sends again what was in
// flight when the previous connection dropped.
func (c *leanClient) established(br *bufio.Reader, inflight []uint16, done chan struct{}) {
	c.connected()
	go c.readLoop(br, done)
	c.resend(inflight)
}

// readLoop reads until the connection ends, then reconnects or stops.
func (c *leanClient) readLoop(br *bufio.Reader, done chan struct{}) {
	err := c.read(br)
	reconnect := c.o.AutoReconnect && !c.closing.Load()
	c.lost(!reconnect)
	if c.closing.Load() {
		close(done)
		return
	}
	if c.o.OnConnectionLost != nil {
		c.o.OnConnectionLost(c, err)
	}
	if !reconnect {
		close(done)
		return
	}
	go c.reconnect(done)
}

// reconnect dials again, backing off, until it succeeds or the client is
// closed.
func (c *leanClient) reconnect(done chan struct{}) {
	backoff := leanMinBackoff
	for {
		tm := time.NewTimer(backoff)
		select {
		case <-tm.C:
		case <-c.stop:
			tm.Stop()
			c.lost(true)
			close(done)
			return
		}
		backoff = min(backoff*2, max(c.o.MaxReconnectInterval, leanMinBackoff))
		if c.o.OnReconnecting != nil {
			c.o.OnReconnecting(c, &c.o)
		}
		if c.closing.Load() {
			c.lost(true)
			close(done)
			return
		}
		if br, inflight, err := c.connect(); err == nil {
			c.established(br, inflight, done)
			return
		}
	}
}

// connect dials and exchanges CONNECT and CONNACK within ConnectTimeout. It
// returns the ids of the publishes that were in flight before: those made
// from now on go out on the new connection.
func (c *leanClient) connect() (*bufio.Reader, []uint16, error) {
	if len(c.o.Servers) == 0 || c.o.CustomOpenConnectionFn == nil {
		return nil, nil, errors.New("mqtt: lean client without a server")
	}
	conn, err := c.o.CustomOpenConnectionFn(c.o.Servers[0], c.o)
	if err != nil {
		return nil, nil, err
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
		return nil, nil, fmt.Errorf("mqtt: send CONNECT: %w", err)
	}
	br := bufio.NewReaderSize(conn, leanReadBuffer)
	fh, body, err := c.readPacket(br, nil)
	if err == nil && fh.Type != packets.Connack {
		err = fmt.Errorf("mqtt: the broker answered CONNECT with packet type %d", fh.Type)
	}
	if err == nil && c.version == 5 && len(body) == 2 && body[1] == 0x01 {
		// A broker that speaks only MQTT 3.1.1 answers in its own
		// version: "unacceptable protocol version", without properties.
		err = pahopackets.ErrorRefusedBadProtocolVersion
	}
	ack := packets.Packet{FixedHeader: fh, ProtocolVersion: c.version}
	if err == nil {
		err = ack.ConnackDecode(body)
	}
	if err == nil && ack.ReasonCode != 0 {
		err = connackError(ack.ReasonCode, c.version)
	}
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	c.mu.Lock()
	c.conn = conn
	var inflight []uint16
	for id, p := range c.pending {
		if p.publish {
			inflight = append(inflight, id)
		}
	}
	// The quota outlives reconnects: publishes in flight keep their slots.
	if c.quota == nil && c.version == 5 && ack.Properties.ReceiveMaximum > 0 && ack.Properties.ReceiveMaximum < 0xFFFF {
		c.quota = make(chan struct{}, ack.Properties.ReceiveMaximum)
	}
	c.mu.Unlock()
	if c.closing.Load() {
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		_ = conn.Close()
		return nil, nil, errClientClosed
	}
	return br, inflight, nil
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
		// The handler may subscribe and wait for SUBACK, which the reader
		// reads.
		go c.o.OnConnect(c)
	}
}

func (c *leanClient) keepAlive() time.Duration { return time.Duration(c.o.KeepAlive) * time.Second }

// keepAliveTick pings when nothing was sent for half the keep-alive
// interval, and drops a connection that stayed silent for two intervals.
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
		_ = c.writeSmall(packets.Pingreq<<4, 0, false)
	}
	c.mu.Lock()
	if c.ping != nil {
		c.ping.Reset(ka / 2)
	}
	c.mu.Unlock()
}

// lost ends a connection. Subscriptions in flight fail; publishes in flight
// are kept to be sent again on the next connection, unless final.
func (c *leanClient) lost(final bool) {
	c.up.Store(false)
	var failed []pendingOp
	c.mu.Lock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	if c.ping != nil {
		c.ping.Stop()
	}
	for id, p := range c.pending {
		if final || !p.publish {
			failed = append(failed, p)
			delete(c.pending, id)
			c.release(p)
		}
	}
	c.mu.Unlock()
	for _, p := range failed {
		p.complete(errConnectionLost)
	}
}

// resend sends again the publishes in flight when the previous connection
// dropped, in packet id order, as MQTT asks: PUBLISH with DUP, or PUBREL
// for a QoS 2 message whose PUBREC had come.
func (c *leanClient) resend(ids []uint16) {
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.mu.Lock()
		p, ok := c.pending[id]
		c.mu.Unlock()
		if !ok {
			continue
		}
		var err error
		if p.rel {
			err = c.writeSmall(packets.Pubrel<<4|2, id, true)
		} else {
			err = c.writePublish(p.topic, id, p.qos, p.retain, true, p.payload)
		}
		if err != nil {
			return // the connection dropped again; the next one resends
		}
	}
}

// release frees op's slot of the receive maximum; called with mu held.
func (c *leanClient) release(p pendingOp) {
	if p.quota && c.quota != nil {
		select {
		case <-c.quota:
		default:
		}
	}
}

// readPacket reads one packet. Its body goes into scratch when it fits
// and the packet is one that is decoded at once; else into a buffer of its
// own. It keeps no packets.Packet on the reader's stack, which stays small
// on an idle connection.
func (c *leanClient) readPacket(br *bufio.Reader, scratch []byte) (packets.FixedHeader, []byte, error) {
	var fh packets.FixedHeader
	hb, err := br.ReadByte()
	if err != nil {
		return fh, nil, err
	}
	if err := fh.Decode(hb); err != nil {
		return fh, nil, fmt.Errorf("mqtt: bad packet from the broker: %w", err)
	}
	n, _, err := packets.DecodeLength(br)
	if err != nil {
		return fh, nil, err
	}
	fh.Remaining = n
	var body []byte
	if n <= len(scratch) && fh.Type != packets.Publish && fh.Type != packets.Suback {
		body = scratch[:n]
	} else {
		body = make([]byte, n)
	}
	if _, err := io.ReadFull(br, body); err != nil {
		return fh, nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	return fh, body, nil
}

// ackOf decodes PUBACK, PUBREC, PUBREL and PUBCOMP: a packet id and, in
// MQTT 5, a reason code (absent means success).
func ackOf(body []byte) (uint16, byte, error) {
	if len(body) < 2 {
		return 0, 0, errors.New("mqtt: malformed acknowledgement from the broker")
	}
	id := uint16(body[0])<<8 | uint16(body[1])
	if len(body) > 2 {
		return id, body[2], nil
	}
	return id, 0, nil
}

// read handles the broker's packets until the connection ends.
func (c *leanClient) read(br *bufio.Reader) error {
	var scratch [16]byte
	for {
		fh, body, err := c.readPacket(br, scratch[:])
		if err != nil {
			return err
		}
		switch fh.Type {
		case packets.Publish:
			if err := c.deliver(fh, body); err != nil {
				return err
			}
		case packets.Puback, packets.Pubcomp:
			id, code, err := ackOf(body)
			if err != nil {
				return err
			}
			c.finish(id, ackError(code))
		case packets.Pubrec:
			id, code, err := ackOf(body)
			if err != nil {
				return err
			}
			if err := ackError(code); err != nil {
				c.finish(id, err)
				continue
			}
			c.mu.Lock()
			if p, ok := c.pending[id]; ok {
				p.rel = true
				c.pending[id] = p
			}
			c.mu.Unlock()
			if err := c.writeSmall(packets.Pubrel<<4|2, id, true); err != nil {
				return err
			}
		case packets.Pubrel:
			id, _, err := ackOf(body)
			if err != nil {
				return err
			}
			if err := c.writeSmall(packets.Pubcomp<<4, id, true); err != nil {
				return err
			}
		case packets.Suback:
			if err := c.suback(fh, body); err != nil {
				return err
			}
		case packets.Unsuback:
			id, _, err := ackOf(body)
			if err != nil {
				return err
			}
			c.finish(id, nil)
		case packets.Pingresp:
		case packets.Disconnect:
			return disconnectError(fh, body, c.version)
		default:
			return fmt.Errorf("mqtt: unexpected packet type %d from the broker", fh.Type)
		}
	}
}

func disconnectError(fh packets.FixedHeader, body []byte, version byte) error {
	pk := packets.Packet{FixedHeader: fh, ProtocolVersion: version}
	_ = pk.DisconnectDecode(body)
	return fmt.Errorf("mqtt: the broker disconnected (reason code 0x%02x)", pk.ReasonCode)
}

func (c *leanClient) suback(fh packets.FixedHeader, body []byte) error {
	pk := packets.Packet{FixedHeader: fh, ProtocolVersion: c.version}
	if err := pk.SubackDecode(body); err != nil {
		return err
	}
	c.finishSub(pk.PacketID, pk.ReasonCodes)
	return nil
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
		c.release(p)
	}
	c.mu.Unlock()
	return p, ok
}

func (c *leanClient) finish(id uint16, err error) {
	if p, ok := c.take(id); ok {
		p.complete(err)
	}
}

func (c *leanClient) finishSub(id uint16, codes []byte) {
	p, ok := c.take(id)
	if !ok {
		return
	}
	for _, code := range codes {
		if code >= 0x80 {
			p.complete(fmt.Errorf("mqtt: the broker refused the subscription to %q", p.tok.filter))
			return
		}
	}
	p.complete(nil)
}

// deliver decodes a PUBLISH and hands it to the default handler; Ack
// answers it.
func (c *leanClient) deliver(fh packets.FixedHeader, body []byte) error {
	pk := packets.Packet{FixedHeader: fh, ProtocolVersion: c.version}
	if err := pk.PublishDecode(body); err != nil {
		return err
	}
	m := &leanMessage{c: c, topic: pk.TopicName, payload: pk.Payload, qos: fh.Qos,
		id: pk.PacketID, dup: fh.Dup, retained: fh.Retain}
	if c.o.DefaultPublishHandler != nil {
		c.o.DefaultPublishHandler(c, m)
	}
	if !c.o.AutoAckDisabled {
		m.Ack()
	}
	return nil
}

// writeLocked writes b; called with mu held.
func (c *leanClient) writeLocked(b []byte) error {
	if c.conn == nil {
		return errConnectionLost
	}
	if c.o.WriteTimeout > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout))
	}
	if _, err := c.conn.Write(b); err != nil {
		_ = c.conn.Close()
		return err
	}
	c.lastSent.Store(time.Now().UnixNano())
	return nil
}

// writeSmall writes a packet of a fixed header byte and, with withID, a
// packet id: PINGREQ, DISCONNECT and the acknowledgements.
func (c *leanClient) writeSmall(header byte, id uint16, withID bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.scratch[:0]
	b = append(b, header)
	if withID {
		b = append(b, 2, byte(id>>8), byte(id))
	} else {
		b = append(b, 0)
	}
	return c.writeLocked(b)
}

// write encodes pk with mochi's codec into a pooled buffer and writes it.
func (c *leanClient) write(pk *packets.Packet, encode func(*packets.Packet, *bytes.Buffer) error) error {
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer encodeBufs.Put(buf)
	if err := encode(pk, buf); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(buf.Bytes())
}

// appendPublish encodes a PUBLISH packet.
func appendPublish(b []byte, version byte, topic string, id uint16, qos byte, retain, dup bool, payload []byte) ([]byte, error) {
	rem := 2 + len(topic) + len(payload)
	if qos > 0 {
		rem += 2
	}
	if version == 5 {
		rem++ // no properties
	}
	if rem > maxRemaining {
		return b, fmt.Errorf("mqtt: a message of %d bytes is larger than MQTT allows", len(payload))
	}
	if len(topic) > 0xFFFF {
		return b, errors.New("mqtt: topic name longer than 65535 bytes")
	}
	h := byte(packets.Publish<<4) | qos<<1
	if retain {
		h |= 1
	}
	if dup {
		h |= 8
	}
	b = appendLength(append(b, h), rem)
	b = append(b, byte(len(topic)>>8), byte(len(topic)))
	b = append(b, topic...)
	if qos > 0 {
		b = append(b, byte(id>>8), byte(id))
	}
	if version == 5 {
		b = append(b, 0)
	}
	return append(b, payload...), nil
}

// appendLength encodes a packet's remaining length.
func appendLength(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// writePublish encodes a PUBLISH into a pooled buffer and writes it.
func (c *leanClient) writePublish(topic string, id uint16, qos byte, retain, dup bool, payload []byte) error {
	bp := wireBufs.Get().(*[]byte)
	defer putWireBuf(bp)
	b, err := appendPublish((*bp)[:0], c.version, topic, id, qos, retain, dup, payload)
	*bp = b
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(b)
}

// register records op under a fresh packet id.
func (c *leanClient) register(op pendingOp) (uint16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil && !op.publish {
		return 0, errConnectionLost
	}
	if len(c.pending) >= 0xFFFF {
		return 0, errors.New("mqtt: 65535 messages in flight on one connection")
	}
	for {
		c.nextID++
		if _, used := c.pending[c.nextID]; c.nextID != 0 && !used {
			break
		}
	}
	c.pending[c.nextID] = op
	return c.nextID, nil
}

// acquire takes a slot of the broker's receive maximum, if it set one.
func (c *leanClient) acquire(ctx context.Context, timeout <-chan time.Time) (bool, error) {
	c.mu.Lock()
	q := c.quota
	c.mu.Unlock()
	if q == nil {
		return false, nil
	}
	select {
	case q <- struct{}{}:
		return true, nil
	case <-c.stop:
		return false, errClientClosed
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timeout:
		return false, errNoAck
	}
}

func (c *leanClient) releaseQuota() {
	c.mu.Lock()
	c.release(pendingOp{quota: true})
	c.mu.Unlock()
}

// publishWait publishes and waits for the outcome: written (QoS 0),
// PUBACK (QoS 1) or PUBCOMP (QoS 2), without allocating per message. It
// returns ctx.Err() when ctx ends first and errNoAck when timeout fires;
// the message then stays in flight, and a late acknowledgement is dropped.
func (c *leanClient) publishWait(ctx context.Context, topic string, qos byte, retain bool, payload []byte, timeout <-chan time.Time) error {
	if c.closing.Load() {
		return errClientClosed
	}
	if qos == 0 {
		return c.writePublish(topic, 0, 0, retain, false, payload)
	}
	quota, err := c.acquire(ctx, timeout)
	if err != nil {
		return err
	}
	w := waiters.Get().(*waiter)
	id, err := c.register(pendingOp{w: w, quota: quota, publish: true, qos: qos, retain: retain, topic: topic, payload: payload})
	if err != nil {
		waiters.Put(w)
		if quota {
			c.releaseQuota()
		}
		return err
	}
	// A write error means the connection dropped: the message stays in
	// flight and goes out again after the reconnect.
	_ = c.writePublish(topic, id, qos, retain, false, payload)
	select {
	case err := <-w.ch:
		waiters.Put(w)
		return err
	case <-ctx.Done():
		c.abandon(id, w)
		return ctx.Err()
	case <-timeout:
		c.abandon(id, w)
		return errNoAck
	}
}

// abandon detaches a waiter whose sender gave up. If the reader already
// took the exchange, its outcome is on the way: drain it before the waiter
// is reused.
func (c *leanClient) abandon(id uint16, w *waiter) {
	c.mu.Lock()
	p, ok := c.pending[id]
	mine := ok && p.w == w
	if mine {
		p.w = nil
		c.pending[id] = p
	}
	c.mu.Unlock()
	if !mine {
		<-w.ch
	}
	waiters.Put(w)
}

// Publish sends a message; the token completes when it is written (QoS 0),
// acknowledged (QoS 1) or completed (QoS 2). The producer uses publishWait
// instead, which needs no token.
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
	if qos == 0 {
		return doneToken(c.writePublish(topic, 0, 0, retained, false, body))
	}
	quota, err := c.acquire(context.Background(), nil)
	if err != nil {
		return doneToken(err)
	}
	tok := newLeanToken()
	id, err := c.register(pendingOp{tok: tok, quota: quota, publish: true, qos: qos, retain: retained, topic: topic, payload: body})
	if err != nil {
		if quota {
			c.releaseQuota()
		}
		return doneToken(err)
	}
	_ = c.writePublish(topic, id, qos, retained, false, body)
	return tok
}

// send registers a subscription or unsubscription under a fresh packet id
// and writes it.
func (c *leanClient) send(pk *packets.Packet, encode func(*packets.Packet, *bytes.Buffer) error, tok *leanToken) error {
	id, err := c.register(pendingOp{tok: tok})
	if err != nil {
		return err
	}
	pk.PacketID = id
	if err := c.write(pk, encode); err != nil {
		c.take(id)
		return err
	}
	return nil
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
	if err := c.send(&pk, (*packets.Packet).SubscribeEncode, tok); err != nil {
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
	if err := c.send(&pk, (*packets.Packet).UnsubscribeEncode, tok); err != nil {
		return doneToken(err)
	}
	return tok
}

// Disconnect sends DISCONNECT, closes the connection and stops
// reconnecting; it waits for the connection's goroutines at most quiesce
// ms. Exchanges still in flight fail.
func (c *leanClient) Disconnect(quiesce uint) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	close(c.stop)
	_ = c.writeSmall(packets.Disconnect<<4, 0, false)
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
		c.lost(true)
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
	acked    atomic.Bool
}

func (m *leanMessage) Duplicate() bool   { return m.dup }
func (m *leanMessage) Qos() byte         { return m.qos }
func (m *leanMessage) Retained() bool    { return m.retained }
func (m *leanMessage) Topic() string     { return m.topic }
func (m *leanMessage) MessageID() uint16 { return m.id }
func (m *leanMessage) Payload() []byte   { return m.payload }

// Ack answers a QoS 1 message with PUBACK and a QoS 2 one with PUBREC.
func (m *leanMessage) Ack() {
	if m.qos == 0 || !m.acked.CompareAndSwap(false, true) {
		return
	}
	h := byte(packets.Puback << 4)
	if m.qos == 2 {
		h = packets.Pubrec << 4
	}
	_ = m.c.writeSmall(h, m.id, true)
}
