package rabbitmq

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
)

const (
	defaultConnectTimeout = 30 * time.Second
	defaultHeartbeat      = 10 * time.Second
	defaultReconnect      = 5 * time.Second
	defaultSendTimeout    = 30 * time.Second
	defaultPrefetch       = 100
)

// TargetConfig is a RabbitMQ target's section of a plan.
type TargetConfig struct {
	URL               string                    `yaml:"url" secret:"true" doc:"Broker URL amqp://user:password@host:5672/vhost, or amqps:// for TLS (port 5671 by default); the vhost is the path, %2F-escaped (/ is the default vhost). The URL is a secret: reports name the host and vhost only."`
	Username          string                    `yaml:"username" doc:"User name, instead of the URL's (default guest)."`
	Password          string                    `yaml:"password" secret:"true" doc:"Password, instead of the URL's."`
	TLS               tlsconf.Config            `yaml:"tls" doc:"TLS settings for amqps:// URLs."`
	ConnectTimeout    time.Duration             `yaml:"connect_timeout" default:"30s" doc:"Longest one connection attempt (TCP, TLS and the AMQP handshake) may take (default 30s)."`
	Heartbeat         time.Duration             `yaml:"heartbeat" default:"10s" doc:"AMQP heartbeat interval the client asks for: a silent broker is taken for gone after about two of them (default 10s)."`
	ReconnectInterval time.Duration             `yaml:"reconnect_interval" default:"5s" doc:"Longest pause between the reconnection attempts of a producer or consumer that lost its connection: the pause starts at 100ms, doubles after each failed attempt and stops growing here (default 5s)."`
	Exchanges         map[string]ExchangeConfig `yaml:"exchanges" doc:"Exchanges planrun declares when the target opens, by name; producers with exchange: name publish to them, and planrun matches their routing the way the broker does to account every message."`
	Queues            map[string]QueueConfig    `yaml:"queues" doc:"Queues planrun declares when the target opens, by name, with their type, arguments and bindings. A queue a workload names that is not listed here is used as it is on the broker, or declared as a durable classic queue if it does not exist."`
}

// ExchangeConfig is an exchange the plan declares.
type ExchangeConfig struct {
	Type       string `yaml:"type" default:"direct" doc:"direct (a queue bound with key K gets routing key K), fanout (every bound queue gets every message) or topic (binding keys with * for one word and # for zero or more, words separated by dots) (default direct)."`
	Durable    *bool  `yaml:"durable" default:"true" doc:"Survive a broker restart (default true)."`
	AutoDelete bool   `yaml:"auto_delete" doc:"Delete the exchange when its last binding goes."`
}

// QueueConfig is a queue the plan declares.
type QueueConfig struct {
	Type       string         `yaml:"type" default:"classic" doc:"Queue type: classic, quorum (replicated, durable) or stream (an append-only log read from an offset; consumers do not remove messages) (default classic)."`
	Durable    *bool          `yaml:"durable" default:"true" doc:"Survive a broker restart (default true; quorum and stream queues are always durable)."`
	AutoDelete bool           `yaml:"auto_delete" doc:"Delete the queue when its last consumer goes (classic queues only)."`
	Arguments  map[string]any `yaml:"arguments" doc:"Further x- arguments of the declaration, such as x-max-length: 100000, x-overflow: reject-publish, x-max-length-bytes, x-message-ttl, x-stream-max-segment-size-bytes."`
	Purge      bool           `yaml:"purge" doc:"Remove the messages the queue holds when the target opens (not stream queues), so a run starts from an empty queue."`
	Bindings   []Binding      `yaml:"bindings" doc:"Bindings of the queue to exchanges of the plan: [{exchange: orders, key: \"eu.#\"}]."`
}

// Binding binds a queue to an exchange.
type Binding struct {
	Exchange string `yaml:"exchange" doc:"The exchange, one of the target's exchanges or a broker's amq.direct, amq.fanout, amq.topic."`
	Key      string `yaml:"key" doc:"Binding key: the routing key for direct exchanges, a pattern with * and # for topic exchanges, ignored by fanout exchanges."`
}

// ProduceOptions are the RabbitMQ fields of a workload's produce section.
type ProduceOptions struct {
	Exchange    string        `yaml:"exchange" doc:"Exchange to publish to; empty (the default exchange) sends each message to the queue named by topic. A named exchange must be one of the target's exchanges or amq.direct, amq.fanout, amq.topic, so that planrun knows how it routes."`
	RoutingKey  string        `yaml:"routing_key" default:"the workload's topic" doc:"Routing key of each message when exchange is set (default: the workload's topic)."`
	Confirm     *bool         `yaml:"confirm" default:"true" doc:"Publisher confirms: a send is acknowledged when the broker confirms it (basic.ack) and fails on a nack (default true); false: a send ends when it is written to the connection, and acked means written, not received."`
	Persistent  bool          `yaml:"persistent" doc:"Delivery mode 2: the broker writes the message to disk in durable queues, so it survives a broker restart."`
	Mandatory   bool          `yaml:"mandatory" doc:"Ask the broker to return messages no queue takes (basic.return); a returned message counts as failed."`
	SendTimeout time.Duration `yaml:"send_timeout" default:"30s" doc:"Longest a send waits for the connection to come back and for the broker's confirm before it counts as failed (default 30s)."`
}

// ConsumeOptions are the RabbitMQ fields of a workload's consume section.
type ConsumeOptions struct {
	Prefetch *int `yaml:"prefetch" default:"100" doc:"Unacknowledged messages the broker sends a consumer ahead (basic.qos prefetch count; default 100); 0 means no limit."`
	AutoAck  bool `yaml:"auto_ack" doc:"Automatic acknowledgement: the broker forgets a message as soon as it sends it (faster; messages in flight at a disconnect are lost). Default false: planrun acknowledges each message after counting it, and what was not acknowledged is redelivered (counted as duplicates). Not for stream queues."`
	// StreamOffset overrides from for stream queues.
	StreamOffset string `yaml:"stream_offset" doc:"Stream queues: where a consumer with no position of its own in this run starts: first, last, next, an offset number, or a time (RFC 3339) (default: first, or next with from: latest). A consumer stopped and started again in the same run continues after the last message its group received."`
}

// durable is a config's durable flag, true unless set false.
func durable(b *bool) bool { return b == nil || *b }

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
	_ drivers.Checker = (*ConsumeOptions)(nil)
)

// builtinExchanges are the exchanges every RabbitMQ vhost has, by type.
var builtinExchanges = map[string]string{"amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic"}

var exchangeTypes = map[string]bool{"direct": true, "fanout": true, "topic": true}

var queueTypes = map[string]bool{"classic": true, "quorum": true, "stream": true}

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	raw := strings.TrimSpace(c.URL)
	if raw == "" {
		return errors.New("rabbitmq: url is empty; give amqp://user:password@host:5672/vhost")
	}
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	if c.TLS.Given() && !u.tls {
		return errors.New("rabbitmq: tls settings are given but the url is amqp://; use amqps:// for TLS")
	}
	if err := c.TLS.Check(); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	for what, d := range map[string]time.Duration{"connect_timeout": c.ConnectTimeout, "heartbeat": c.Heartbeat, "reconnect_interval": c.ReconnectInterval} {
		if d < 0 {
			return fmt.Errorf("rabbitmq: %s %s is negative", what, d)
		}
	}
	for _, name := range sortedKeys(c.Exchanges) {
		e := c.Exchanges[name]
		if name == "" || strings.HasPrefix(name, "amq.") {
			return fmt.Errorf("rabbitmq: exchanges: %q: names starting with amq. are the broker's own; use another name", name)
		}
		if e.Type != "" && !exchangeTypes[e.Type] {
			return fmt.Errorf("rabbitmq: exchanges.%s.type %q: use direct, fanout or topic (headers exchanges route on headers planrun does not set)", name, e.Type)
		}
	}
	for _, name := range sortedKeys(c.Queues) {
		q := c.Queues[name]
		if name == "" {
			return errors.New("rabbitmq: queues: a queue needs a name")
		}
		if q.Type != "" && !queueTypes[q.Type] {
			return fmt.Errorf("rabbitmq: queues.%s.type %q: use classic, quorum or stream", name, q.Type)
		}
		if q.Type == "quorum" || q.Type == "stream" {
			if !durable(q.Durable) {
				return fmt.Errorf("rabbitmq: queues.%s: %s queues are always durable; remove durable: false", name, q.Type)
			}
			if q.AutoDelete {
				return fmt.Errorf("rabbitmq: queues.%s: %s queues cannot be auto_delete", name, q.Type)
			}
		}
		if q.Type == "stream" && q.Purge {
			return fmt.Errorf("rabbitmq: queues.%s: stream queues cannot be purged; remove purge", name)
		}
		if _, ok := q.Arguments["x-queue-type"]; ok {
			return fmt.Errorf("rabbitmq: queues.%s.arguments: give the queue type as type: classic|quorum|stream, not x-queue-type", name)
		}
		if _, err := table(q.Arguments); err != nil {
			return fmt.Errorf("rabbitmq: queues.%s.arguments: %w", name, err)
		}
		for i, b := range q.Bindings {
			if _, ok := c.exchangeType(b.Exchange); !ok {
				return fmt.Errorf("rabbitmq: queues.%s.bindings[%d]: exchange %q is not one of the target's exchanges (%s) nor amq.direct, amq.fanout, amq.topic", name, i, b.Exchange, strings.Join(sortedKeys(c.Exchanges), ", "))
			}
		}
	}
	return nil
}

// exchangeType is the type of a named exchange of the plan or of the
// broker's built-in ones.
func (c *TargetConfig) exchangeType(name string) (string, bool) {
	if t, ok := builtinExchanges[name]; ok {
		return t, true
	}
	e, ok := c.Exchanges[name]
	if !ok {
		return "", false
	}
	if e.Type == "" {
		return "direct", true
	}
	return e.Type, true
}

func (c *TargetConfig) queueType(name string) string {
	if q, ok := c.Queues[name]; ok && q.Type != "" {
		return q.Type
	}
	return "classic"
}

func (c *TargetConfig) reconnectInterval() time.Duration {
	if c.ReconnectInterval <= 0 {
		return defaultReconnect
	}
	return c.ReconnectInterval
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if o.RoutingKey != "" && o.Exchange == "" {
		return errors.New("rabbitmq: routing_key is set without exchange; on the default exchange the routing key is the queue, given as topic")
	}
	if o.SendTimeout < 0 {
		return fmt.Errorf("rabbitmq: send_timeout %s is negative", o.SendTimeout)
	}
	return nil
}

func (o *ProduceOptions) confirm() bool { return o.Confirm == nil || *o.Confirm }

func (o *ProduceOptions) sendTimeout() time.Duration {
	if o.SendTimeout <= 0 {
		return defaultSendTimeout
	}
	return o.SendTimeout
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	if p := o.prefetch(); p < 0 || p > 65535 {
		return fmt.Errorf("rabbitmq: prefetch must be from 0 to 65535, got %d", p)
	}
	if o.StreamOffset != "" {
		if _, err := streamOffset(o.StreamOffset); err != nil {
			return err
		}
	}
	return nil
}

func (o *ConsumeOptions) prefetch() int {
	if o.Prefetch == nil {
		return defaultPrefetch
	}
	return *o.Prefetch
}

// streamOffset is the x-stream-offset argument of a stream_offset setting.
func streamOffset(s string) (any, error) {
	switch s {
	case "first", "last", "next":
		return s, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return nil, fmt.Errorf("rabbitmq: stream_offset %q: use first, last, next, an offset (0 or more) or an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
}

// brokerURL is a parsed url setting.
type brokerURL struct {
	uri amqp.URI
	tls bool
}

func parseURL(raw string) (brokerURL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return brokerURL{}, errors.New("rabbitmq: url: want amqp://user:password@host:5672/vhost (or amqps://)")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "amqp" && scheme != "amqps" {
		return brokerURL{}, fmt.Errorf("rabbitmq: url scheme %q is not supported; use amqp or amqps", u.Scheme)
	}
	uri, err := amqp.ParseURI(raw)
	if err != nil {
		// The parser's message may quote the URL: keep it out.
		return brokerURL{}, errors.New("rabbitmq: url: want amqp://user:password@host:5672/vhost (or amqps://); the url does not parse")
	}
	return brokerURL{uri: uri, tls: scheme == "amqps"}, nil
}

// table turns plan arguments into an AMQP table, checking their types.
func table(args map[string]any) (amqp.Table, error) {
	if len(args) == 0 {
		return nil, nil
	}
	t := amqp.Table{}
	for _, k := range sortedKeys(args) {
		switch v := args[k].(type) {
		case int:
			t[k] = int64(v)
		case int64, float64, bool, string:
			t[k] = v
		default:
			return nil, fmt.Errorf("%s: give a number, a string or true/false, not %T", k, v)
		}
	}
	return t, t.Validate()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
