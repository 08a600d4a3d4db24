// Package rabbitmq is planrun's RabbitMQ driver over AMQP 0-9-1, built on
// github.com/rabbitmq/amqp091-go. Producers publish with publisher confirms
// (an ack is the broker's confirm) to a queue through the default exchange
// or to an exchange with a routing key; consumers read queues with a
// prefetch and manual or automatic acknowledgements. The exchanges, queues
// (classic, quorum, stream) and bindings a plan names are declared when the
// target opens, and planrun's accounting matches the exchanges' routing the
// way the broker does. The client library does not reconnect: producers and
// consumers do, reporting disconnects, reconnects and flow control
// (connection.blocked) as connection events.
package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/planrun/planrun/drivers"
)

// Event kinds of flow control, besides drivers' own.
const (
	// Blocked: the broker stopped reading the connection's publishes
	// (connection.blocked: a memory or disk alarm); Reason is the broker's.
	Blocked = "blocked"
	// Unblocked: the broker reads publishes again.
	Unblocked = "unblocked"
)

func init() {
	drivers.Register("rabbitmq", Driver,
		"RabbitMQ over AMQP 0-9-1 through rabbitmq/amqp091-go: publisher confirms, exchanges with direct, fanout and topic routing, classic, quorum and stream queues")
}

// Driver opens RabbitMQ targets.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Restart: true, Relay: true, Credentials: true, Lag: true,
})

var (
	_ drivers.TargetOf[ProduceOptions, ConsumeOptions] = (*Target)(nil)
	_ drivers.LagReader                                = (*Target)(nil)
	_ drivers.Describer                                = (*Target)(nil)
	_ drivers.SubscriptionMatcher                      = (*Target)(nil)
	_ drivers.SubscriptionGrouper                      = (*Target)(nil)
)

// Target is a reachable RabbitMQ broker (or cluster, through one address)
// with the plan's exchanges, queues and bindings declared.
type Target struct {
	cfg      TargetConfig
	url      brokerURL
	user     string
	password string
	tls      *tls.Config

	mu     sync.Mutex
	admin  *amqp.Connection // declarations and lag; reopened when lost
	closed bool
	// offsets is, per stream queue and group, the offset after the last
	// message a consumer of the group received in this run, so that a
	// consumer started again continues there.
	offsets map[[2]string]int64
}

func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	u, err := parseURL(strings.TrimSpace(c.URL))
	if err != nil {
		return nil, err
	}
	t := &Target{cfg: *c, url: u, user: u.uri.Username, password: u.uri.Password, offsets: map[[2]string]int64{}}
	if c.Username != "" {
		t.user = c.Username
	}
	if c.Password != "" {
		t.password = c.Password
	}
	if u.tls {
		if t.tls, err = c.TLS.Load(); err != nil {
			return nil, fmt.Errorf("rabbitmq: %w", err)
		}
		if t.tls == nil {
			t.tls = &tls.Config{}
		}
		if t.tls.ServerName == "" {
			t.tls.ServerName = u.uri.Host
		}
	}
	conn, err := t.dial(ctx, "planrun admin")
	if err != nil {
		return nil, err
	}
	t.admin = conn
	if err := t.declare(ctx); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// where names the broker without credentials: host:port and vhost.
func (t *Target) where() string {
	return fmt.Sprintf("%s:%d vhost %s", t.url.uri.Host, t.url.uri.Port, t.vhost())
}

func (t *Target) vhost() string {
	if t.url.uri.Vhost == "" {
		return "/"
	}
	return t.url.uri.Vhost
}

// dial opens one connection named name (the broker shows it in its
// connection list), within connect_timeout and ctx.
func (t *Target) dial(ctx context.Context, name string) (*amqp.Connection, error) {
	timeout := t.cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	hb := t.cfg.Heartbeat
	if hb <= 0 {
		hb = defaultHeartbeat
	}
	var tc *tls.Config
	if t.tls != nil {
		tc = t.tls.Clone()
	}
	addr := net.JoinHostPort(t.url.uri.Host, strconv.Itoa(t.url.uri.Port))
	cfg := amqp.Config{
		// A fresh authentication per dial: the library zeroes the password
		// of the one it used.
		SASL:            []amqp.Authentication{&amqp.PlainAuth{Username: t.user, Password: t.password}},
		Vhost:           t.vhost(),
		Heartbeat:       hb,
		TLSClientConfig: tc,
		Locale:          "en_US",
		Properties:      amqp.Table{"connection_name": name, "product": "planrun"},
		Dial: func(network, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: timeout}
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake's deadline; the library clears it once open.
			if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	scheme := "amqp"
	if t.url.tls {
		scheme = "amqps"
	}
	// The URL given to the library carries no credentials: they travel in
	// cfg.SASL, and the library's errors never quote them.
	conn, err := amqp.DialConfig(scheme+"://"+addr+"/", cfg)
	if err != nil {
		return nil, t.openError(err)
	}
	return conn, nil
}

// openError phrases a failed connection attempt, naming the broker and the
// user, never the password.
func (t *Target) openError(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
		if strings.Contains(ae.Reason, "vhost") {
			return fmt.Errorf("rabbitmq: connect to %s: user %q may not use vhost %q (%s); grant it with rabbitmqctl set_permissions -p %s %s \".*\" \".*\" \".*\"", t.where(), t.user, t.vhost(), ae.Reason, t.vhost(), t.user)
		}
		return fmt.Errorf("rabbitmq: connect to %s: the broker refused user %q: wrong user name or password (%s)", t.where(), t.user, ae.Reason)
	}
	return fmt.Errorf("rabbitmq: connect to %s: %w", t.where(), err)
}

// adminChannel opens a channel on the admin connection, dialling it again
// if it was lost (a broker restart).
func (t *Target) adminChannel(ctx context.Context) (*amqp.Channel, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("rabbitmq: target is closed")
	}
	if t.admin == nil || t.admin.IsClosed() {
		conn, err := t.dial(ctx, "planrun admin")
		if err != nil {
			return nil, err
		}
		t.admin = conn
	}
	ch, err := t.admin.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: open a channel on %s: %w", t.where(), err)
	}
	return ch, nil
}

// declare declares the plan's exchanges, then its queues and their
// bindings, and purges the queues that ask for it.
func (t *Target) declare(ctx context.Context) error {
	ch, err := t.adminChannel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	for _, name := range sortedKeys(t.cfg.Exchanges) {
		e := t.cfg.Exchanges[name]
		kind, _ := t.cfg.exchangeType(name)
		if err := ch.ExchangeDeclare(name, kind, durable(e.Durable), e.AutoDelete, false, false, nil); err != nil {
			return fmt.Errorf("rabbitmq: declare exchange %s (%s) on %s: %w", name, kind, t.where(), declareHint(err))
		}
	}
	for _, name := range sortedKeys(t.cfg.Queues) {
		q := t.cfg.Queues[name]
		args, _ := table(q.Arguments)
		if args == nil {
			args = amqp.Table{}
		}
		kind := t.cfg.queueType(name)
		args["x-queue-type"] = kind
		if _, err := ch.QueueDeclare(name, durable(q.Durable), q.AutoDelete, false, false, args); err != nil {
			return fmt.Errorf("rabbitmq: declare %s queue %s on %s: %w", kind, name, t.where(), declareHint(err))
		}
		for _, b := range q.Bindings {
			if err := ch.QueueBind(name, b.Key, b.Exchange, false, nil); err != nil {
				return fmt.Errorf("rabbitmq: bind queue %s to exchange %s with key %q: %w", name, b.Exchange, b.Key, err)
			}
		}
		if q.Purge {
			if _, err := ch.QueuePurge(name, false); err != nil {
				return fmt.Errorf("rabbitmq: purge queue %s: %w", name, err)
			}
		}
	}
	return nil
}

// declareHint explains the usual failure of declaring what exists already.
func declareHint(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
		return fmt.Errorf("%w; it exists on the broker with other settings: delete it or declare it as it is", err)
	}
	return err
}

// ensureQueue makes sure a queue a workload names exists: the plan's
// queues were declared at open; another is used as it is, or declared as a
// durable classic queue when the broker does not have it.
func (t *Target) ensureQueue(ctx context.Context, name string) error {
	if _, ok := t.cfg.Queues[name]; ok || name == "" {
		return nil
	}
	ch, err := t.adminChannel(ctx)
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err == nil {
		ch.Close()
		return nil
	}
	// A failed passive declaration closes the channel.
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return fmt.Errorf("rabbitmq: queue %s on %s: %w", name, t.where(), err)
	}
	if ch, err = t.adminChannel(ctx); err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		return fmt.Errorf("rabbitmq: declare queue %s on %s: %w", name, t.where(), declareHint(err))
	}
	return nil
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	scheme := "amqp"
	if t.url.tls {
		scheme = "amqps"
	}
	s := fmt.Sprintf("rabbitmq %s://%s@%s:%d/ vhost %s", scheme, t.user, t.url.uri.Host, t.url.uri.Port, t.vhost())
	t.mu.Lock()
	if t.admin != nil {
		if v, ok := t.admin.Properties["version"].(string); ok {
			s += " (RabbitMQ " + v + ")"
		}
	}
	t.mu.Unlock()
	return s
}

// Lag implements drivers.LagReader: the messages ready in the queue (a
// passive declaration's count, what rabbitmqctl lists as messages_ready).
// For a stream, whose messages stay, it is what the group has not read yet
// in this run: the stream's messages after the group's position.
func (t *Target) Lag(ctx context.Context, queue, group string) (int64, error) {
	ch, err := t.adminChannel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: queue %s: %w", queue, err)
	}
	n := int64(q.Messages)
	if t.cfg.queueType(queue) == "stream" {
		// A stream's count is its messages from offset 0 while no
		// retention has removed any: lag is what follows the group's
		// position.
		if next, ok := t.streamOffset(queue, group); ok {
			n -= next
		}
	}
	return max(n, 0), nil
}

func (t *Target) streamOffset(queue, group string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.offsets[[2]string{queue, group}]
	return n, ok
}

// received records that a consumer of group read a stream's offset.
func (t *Target) received(queue, group string, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := [2]string{queue, group}
	if next, ok := t.offsets[k]; !ok || offset+1 > next {
		t.offsets[k] = offset + 1
	}
}

// Close implements drivers.TargetOf; producers and consumers hold
// connections of their own and should be closed first.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.admin != nil && !t.admin.IsClosed() {
		_ = t.admin.CloseDeadline(time.Now().Add(5 * time.Second))
	}
	return nil
}

// closeReason names why a connection or channel closed, for events:
// the broker's own words when it closed it (a restart says
// CONNECTION_FORCED), else the kind of network error.
func closeReason(e *amqp.Error) string {
	if e == nil {
		return "connection closed"
	}
	switch e.Code {
	case amqp.ConnectionForced:
		return "closed by the broker"
	case amqp.FrameError, amqp.ChannelError:
		return "connection closed"
	}
	if !e.Server {
		if r := drivers.Reason(errors.New(e.Reason)); r != "" {
			return r
		}
	}
	return strings.ToLower(strings.ReplaceAll(amqpText(e), "_", " "))
}

func amqpText(e *amqp.Error) string {
	r, _, _ := strings.Cut(e.Reason, " - ")
	if r == "" {
		return "code " + strconv.Itoa(e.Code)
	}
	return r
}

// backoff is a reconnection pause that starts at 100ms and doubles up to
// the target's reconnect_interval.
type backoff struct {
	next, ceiling time.Duration
}

func (b *backoff) wait(ctx context.Context) bool {
	if b.next == 0 {
		b.next = 100 * time.Millisecond
	}
	tm := time.NewTimer(b.next)
	defer tm.Stop()
	b.next = min(2*b.next, b.ceiling)
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
