// Package redis is planrun's Redis driver, built on github.com/redis/go-redis/v9.
// It writes each message with one command (HSET by default), so a relay from
// a broker into Redis can stand in for a broker's rule engine, and answers
// probe queries such as HLEN. With addr: embedded it starts an in-process
// server (github.com/alicebob/miniredis/v2) that lives as long as the target.
package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/planrun/planrun/drivers"
)

// Embedded is the addr value that starts an in-process server.
const Embedded = "embedded"

const defaultDialTimeout = 10 * time.Second

func init() {
	drivers.Register("redis", Driver,
		"Redis through redis/go-redis: a destination for produce and relay workloads (a stand-in for a rule engine) and probes; addr: embedded starts miniredis in process")
	// go-redis logs dial failures itself; planrun reports them as errors
	// naming the target, once.
	goredis.SetLogger(silent{})
}

type silent struct{}

func (silent) Printf(context.Context, string, ...interface{}) {}

// TargetConfig is a Redis target's section of a plan.
type TargetConfig struct {
	Addr        string        `yaml:"addr" doc:"Redis server as host:port, or \"embedded\" to start an in-process server (miniredis)."`
	Username    string        `yaml:"username" doc:"ACL user name (Redis 6+); empty authenticates with password alone."`
	Password    string        `yaml:"password" secret:"true" doc:"Password (AUTH)."`
	DB          int           `yaml:"db" default:"0" doc:"Database number to SELECT (default 0)."`
	DialTimeout time.Duration `yaml:"dial_timeout" default:"10s" doc:"Longest connecting may take (default 10s)."`
	// Routing dials through the target's proxy (proxy:) when it has one.
	drivers.Routing
}

// ProduceOptions are the Redis fields of a workload's produce section.
type ProduceOptions struct {
	Command string `yaml:"command" default:"hset" doc:"Command each message becomes: hset (HSET key id value, default), xadd (XADD key * value V [key K]), lpush (LPUSH key value) or set (SET key value)."`
	Key     string `yaml:"key" default:"{topic}" doc:"Key template: {topic} is the workload's topic, {workload} its name, {id} the message's id, its key or else a counter (default {topic}, or {topic}:{id} for set)."`
}

// Driver opens Redis targets. They take no consume options: Redis is
// written to and probed, not consumed.
var Driver = drivers.Define(open, drivers.Capabilities{Credentials: true, Embedded: true, Probe: true})

var (
	_ drivers.TargetOf[ProduceOptions, drivers.NoOptions] = (*Target)(nil)
	_ drivers.Prober                                      = (*Target)(nil)
	_ drivers.Describer                                   = (*Target)(nil)
	_ drivers.Producer                                    = (*Producer)(nil)
)

func (c *TargetConfig) embedded() bool {
	return strings.EqualFold(strings.TrimSpace(c.Addr), Embedded)
}

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
)

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	a := strings.TrimSpace(c.Addr)
	if a == "" {
		return errors.New(`redis: addr is empty; give host:port or "embedded"`)
	}
	if !c.embedded() {
		if strings.Contains(a, "://") {
			return fmt.Errorf("redis: addr %q: write host:port, without a scheme", a)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("redis: addr %q: write host:port such as 127.0.0.1:6379", a)
		}
	}
	if c.DB < 0 {
		return fmt.Errorf("redis: db %d is negative", c.DB)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("redis: dial_timeout %s is negative", c.DialTimeout)
	}
	if c.Username != "" && c.Password == "" {
		return errors.New("redis: username is set but password is empty")
	}
	return nil
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

var commands = map[string]bool{"hset": true, "xadd": true, "lpush": true, "set": true}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if o.Command != "" && !commands[strings.ToLower(o.Command)] {
		return fmt.Errorf("redis: command %q: use hset, xadd, lpush or set", o.Command)
	}
	for _, p := range placeholder.FindAllString(o.Key, -1) {
		if p != "{topic}" && p != "{workload}" && p != "{id}" {
			return fmt.Errorf("redis: key %q: unknown placeholder %s; known: {topic}, {workload}, {id}", o.Key, p)
		}
	}
	if strings.ToLower(o.Command) == "set" && o.Key != "" && !strings.Contains(o.Key, "{id}") {
		return fmt.Errorf("redis: command set with key %q: without {id} every message overwrites the same key", o.Key)
	}
	return nil
}

// open starts the embedded server if asked and checks that the server
// answers PING.
func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	t := &Target{cfg: *c, addr: strings.TrimSpace(c.Addr), counters: map[string]*atomic.Uint64{}}
	if c.embedded() {
		t.server = miniredis.NewMiniRedis()
		if c.Password != "" {
			if c.Username != "" {
				t.server.RequireUserAuth(c.Username, c.Password)
			} else {
				t.server.RequireAuth(c.Password)
			}
		}
		if err := t.server.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("redis: start embedded server: %w", err)
		}
		t.addr = t.server.Addr()
	}
	t.client = t.newClient(4)
	if err := t.client.Ping(ctx).Err(); err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("redis: connect to %s: %s", t.addr, clientError(err))
	}
	return t, nil
}

// clientError phrases authentication failures; go-redis's texts never hold
// the password.
func clientError(err error) string {
	s := err.Error()
	if strings.Contains(s, "WRONGPASS") || strings.Contains(s, "NOAUTH") || strings.Contains(s, "invalid password") {
		return "the server refused the user name or password (" + s + ")"
	}
	return s
}

// Target is a reachable Redis server.
type Target struct {
	cfg    TargetConfig
	addr   string
	server *miniredis.Miniredis // nil unless embedded
	client *goredis.Client      // probes

	mu       sync.Mutex
	counters map[string]*atomic.Uint64
	closed   bool
}

func (t *Target) newClient(pool int) *goredis.Client {
	dt := t.cfg.DialTimeout
	if dt == 0 {
		dt = defaultDialTimeout
	}
	o := &goredis.Options{
		Addr:        t.addr,
		Username:    t.cfg.Username,
		Password:    t.cfg.Password,
		DB:          t.cfg.DB,
		DialTimeout: dt,
		// Every sender waits for its own command; a pool as large as the
		// number of senders keeps them from queueing for connections.
		PoolSize: pool,
		// Failures are counted by the workload; go-redis's retries would
		// hide them and double the latency of a failing server.
		MaxRetries: -1,
		// Without this, go-redis sends CLIENT SETINFO on every connection,
		// which older servers and miniredis answer with an error.
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
		// RESP2 replies are numbers, strings and flat lists, which is what
		// probe results promise (RESP3 would answer HGETALL with a map).
		Protocol: 2,
	}
	if t.cfg.Routed() {
		// Through the target's proxy: go-redis's own dialer, to the
		// proxy's listener in front of the server.
		dial := goredis.NewDialer(o)
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			to, err := t.cfg.Route(addr)
			if err != nil {
				return nil, err
			}
			return dial(ctx, network, to)
		}
	}
	return goredis.NewClient(o)
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	extra := []string{"db " + strconv.Itoa(t.cfg.DB)}
	if t.server != nil {
		extra = append([]string{"embedded miniredis"}, extra...)
	}
	if t.cfg.Username != "" {
		extra = append(extra, "user "+t.cfg.Username)
	}
	return "redis " + t.addr + " (" + strings.Join(extra, ", ") + ")"
}

// Close implements drivers.TargetOf; producers hold clients of their own and
// should be closed first. The embedded server stops here.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if t.client != nil {
		err = t.client.Close()
	}
	if t.server != nil {
		t.server.Close()
	}
	if err != nil {
		return fmt.Errorf("redis: close: %w", err)
	}
	return nil
}

// Server returns the embedded server, or nil.
func (t *Target) Server() *miniredis.Miniredis { return t.server }

// counter is the id source of messages without a key, per key template: it
// lives as long as the target, so a restarted producer does not write over
// the ids of the previous start.
func (t *Target) counter(name string) *atomic.Uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.counters[name]
	if !ok {
		c = new(atomic.Uint64)
		t.counters[name] = c
	}
	return c
}

// NewProducer implements drivers.TargetOf.
func (t *Target) NewProducer(_ context.Context, spec drivers.ProducerSpec, o *ProduceOptions) (drivers.Producer, error) {
	cmd := strings.ToLower(o.Command)
	if cmd == "" {
		cmd = "hset"
	}
	key := o.Key
	if key == "" {
		key = "{topic}"
		if cmd == "set" {
			key = "{topic}:{id}"
		}
	}
	key = strings.NewReplacer("{topic}", spec.Topic, "{workload}", spec.Workload).Replace(key)
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errors.New("redis: target is closed")
	}
	return &Producer{
		client: t.newClient(max(spec.Threads, 1)),
		cmd:    cmd,
		key:    key,
		perID:  strings.Contains(key, "{id}"),
		ids:    t.counter(cmd + "\x00" + key),
	}, nil
}

// NewConsumer implements drivers.TargetOf: Redis targets are written to and
// probed, not consumed.
func (t *Target) NewConsumer(context.Context, drivers.ConsumerSpec, *drivers.NoOptions) (drivers.Consumer, error) {
	return nil, errors.New("redis targets can only be written to or probed")
}

// Probe implements drivers.Prober: it runs one command, such as
// ["HLEN", "k"], and returns the reply as an int64, a string or a list; a
// nil reply is nil.
func (t *Target) Probe(ctx context.Context, args []string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redis: probe needs a command, such as [HLEN, key]")
	}
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	v, err := t.client.Do(ctx, a...).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %s: %w", strings.ToUpper(args[0]), err)
	}
	return v, nil
}

// Producer writes each message with one command.
type Producer struct {
	client *goredis.Client
	cmd    string
	key    string
	perID  bool
	ids    *atomic.Uint64
}

// Send implements drivers.Producer; it returns when the server replied.
func (p *Producer) Send(ctx context.Context, m *drivers.Message) error {
	id := string(m.Key)
	if id == "" && (p.cmd == "hset" || p.perID) {
		id = strconv.FormatUint(p.ids.Add(1)-1, 10)
	}
	key := p.key
	if p.perID {
		key = strings.ReplaceAll(key, "{id}", id)
	}
	var err error
	switch p.cmd {
	case "hset":
		err = p.client.HSet(ctx, key, id, m.Value).Err()
	case "xadd":
		vals := []any{"value", m.Value}
		if len(m.Key) > 0 {
			vals = append(vals, "key", m.Key)
		}
		err = p.client.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: vals}).Err()
	case "lpush":
		err = p.client.LPush(ctx, key, m.Value).Err()
	case "set":
		err = p.client.Set(ctx, key, m.Value, 0).Err()
	}
	if err != nil {
		return fmt.Errorf("redis: %s %s: %w", strings.ToUpper(p.cmd), key, err)
	}
	return nil
}

// Close closes the producer's connections.
func (p *Producer) Close() error { return p.client.Close() }
