package mqtt

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
)

// Embedded is the url value that starts an in-process broker.
const Embedded = "embedded"

const (
	defaultConnectTimeout = 30 * time.Second
	defaultKeepAlive      = 60 * time.Second
	defaultSendTimeout    = 30 * time.Second
	defaultReconnect      = 10 * time.Second
	defaultQoS            = 1
	defaultProducerID     = "planrun-{workload}-{client}"
	defaultConsumerID     = "planrun-{instance}-{client}"
)

// TargetConfig is an MQTT target's section of a plan.
type TargetConfig struct {
	URL             string         `yaml:"url" doc:"Broker URL: tcp://host:port, ssl://host:port (also tls://, mqtts://), ws:// or wss://host:port/path, or \"embedded\" to start an in-process broker (mochi-mqtt)."`
	Username        string         `yaml:"username" doc:"User name sent in CONNECT."`
	Password        string         `yaml:"password" secret:"true" doc:"Password sent in CONNECT (needs username)."`
	TLS             tlsconf.Config `yaml:"tls" doc:"TLS settings for ssl://, tls://, mqtts:// and wss:// URLs."`
	SourceAddrs     []string       `yaml:"source_addrs" doc:"Local IP addresses to spread client connections over, round robin, to go past the ~64k ephemeral ports of one address (tcp and ssl URLs)."`
	Client          string         `yaml:"client" default:"paho" doc:"MQTT client library: paho (eclipse/paho.mqtt.golang, default) or lean (planrun's own client: one goroutine per connection, a few KB per idle connection, MQTT 5)."`
	ProtocolVersion int            `yaml:"protocol_version" default:"4" doc:"MQTT protocol level: 3 (MQTT 3.1), 4 (MQTT 3.1.1, default) or 5 (MQTT 5, with client: lean only)."`
	ConnectTimeout  time.Duration  `yaml:"connect_timeout" default:"30s" doc:"Longest one connection attempt (TCP, TLS and CONNACK) may take (default 30s)."`
	// ReconnectInterval bounds the clients' reconnection back-off.
	ReconnectInterval time.Duration `yaml:"reconnect_interval" default:"10s" doc:"Longest pause between the reconnection attempts of a client that lost its connection: the pause starts at 1s (paho; lean: 100ms), doubles after each failed attempt and stops growing here (default 10s). Reconnects also keep to connect_rate."`
	// Routing dials through the target's proxy (proxy:) when it has one.
	drivers.Routing
}

// ProduceOptions are the MQTT fields of a workload's produce section; a
// connect workload reads the same fields (clients, connect_rate, keepalive,
// clean_session, client_id).
type ProduceOptions struct {
	Clients      int           `yaml:"clients" doc:"Client connections to publish from (default: the workload's threads); each message goes out on client (source mod clients)."`
	ConnectRate  float64       `yaml:"connect_rate" default:"0" doc:"New connection attempts per second, reconnects and retries included (default 0: as fast as the broker takes them)."`
	KeepAlive    time.Duration `yaml:"keepalive" default:"60s" doc:"MQTT keep-alive interval in whole seconds (default 60s)."`
	CleanSession *bool         `yaml:"clean_session" default:"true" doc:"Start each connection with a clean session (default true)."`
	ClientID     string        `yaml:"client_id" default:"planrun-{workload}-{client}" doc:"Client id template: {client} is the client's index, {workload} the workload's name (default planrun-{workload}-{client})."`
	QoS          *int          `yaml:"qos" default:"1" doc:"Publish QoS: 0 (a send ends when written), 1 (when PUBACK arrives) or 2 (when PUBCOMP arrives) (default 1)."`
	Retain       bool          `yaml:"retain" doc:"Publish with the retain flag."`
	SendTimeout  time.Duration `yaml:"send_timeout" default:"30s" doc:"Longest one send waits for its client to connect and for the broker's acknowledgement before it counts as failed (default 30s)."`
	// ClientBase is the {client} index of this process's first client when
	// a workload is split over worker processes.
	ClientBase int `yaml:"-"`
}

// ConsumeOptions are the MQTT fields of a workload's consume section.
type ConsumeOptions struct {
	QoS          *int          `yaml:"qos" default:"1" doc:"Subscription QoS: 0, 1 or 2 (default 1)."`
	Clients      int           `yaml:"clients" default:"1" doc:"Subscribing connections per consumer (default 1); each subscribes to the topic with {client} replaced by its index."`
	Shared       bool          `yaml:"shared" doc:"Subscribe as $share/<group>/<topic> so all clients of the group split the messages (broker must support shared subscriptions)."`
	CleanSession *bool         `yaml:"clean_session" default:"true" doc:"Start with a clean session (default true); false with a fixed client_id resumes the broker-side session, so a restarted consumer gets the QoS 1/2 messages queued while it was stopped."`
	ClientID     string        `yaml:"client_id" default:"planrun-{instance}-{client}" doc:"Client id template with {client}, {workload}, {group} and {instance} (default planrun-{instance}-{client}); with clean_session false it must not contain {instance}."`
	KeepAlive    time.Duration `yaml:"keepalive" default:"60s" doc:"MQTT keep-alive interval in whole seconds (default 60s)."`
}

// Shard implements drivers.Shardable: the part's share of the clients,
// numbered from where the part starts in the whole fleet, and the same
// share of the connect rate, so that the fleet together connects at the
// plan's connect_rate.
func (o *ProduceOptions) Shard(p drivers.Part) any {
	c := *o
	if o.Clients == 0 {
		// One client per thread: the part's threads are its clients.
		c.ClientBase = o.ClientBase + p.ThreadBase
		c.ConnectRate = o.ConnectRate / float64(p.Of)
		return &c
	}
	base, n := drivers.Split(o.Clients, p.Index, p.Of)
	c.ClientBase, c.Clients = o.ClientBase+base, n
	c.ConnectRate = o.ConnectRate * float64(n) / float64(o.Clients)
	return &c
}

// ShardUnits implements drivers.Shardable.
func (o *ProduceOptions) ShardUnits() int { return o.Clients }

// reconnectInterval is the reconnection back-off's ceiling.
func (c *TargetConfig) reconnectInterval() time.Duration {
	if c.ReconnectInterval <= 0 {
		return defaultReconnect
	}
	return c.ReconnectInterval
}

// RunsEmbedded implements drivers.EmbeddedConfig.
func (c *TargetConfig) RunsEmbedded() bool { return c.embedded() }

func (c *TargetConfig) embedded() bool {
	return strings.EqualFold(strings.TrimSpace(c.URL), Embedded)
}

var schemes = map[string]bool{ // scheme -> uses TLS
	"tcp": false, "mqtt": false,
	"ssl": true, "tls": true, "mqtts": true,
	"ws": false, "wss": true,
}

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
	_ drivers.Checker = (*ConsumeOptions)(nil)
)

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	raw := strings.TrimSpace(c.URL)
	if raw == "" {
		return errors.New(`mqtt: url is empty; give tcp://host:port, ssl://host:port or "embedded"`)
	}
	var tlsScheme, ws bool
	if !c.embedded() {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("mqtt: url %q: want scheme://host:port such as tcp://127.0.0.1:1883", raw)
		}
		if u.User != nil {
			return errors.New("mqtt: url holds credentials; put them in username and password instead")
		}
		isTLS, ok := schemes[strings.ToLower(u.Scheme)]
		if !ok {
			return fmt.Errorf("mqtt: url scheme %q is not supported; use tcp, ssl (tls, mqtts), ws or wss", u.Scheme)
		}
		if u.Port() == "" {
			return fmt.Errorf("mqtt: url %q has no port; write %s://%s:PORT", raw, u.Scheme, u.Hostname())
		}
		tlsScheme = isTLS
		ws = strings.HasPrefix(strings.ToLower(u.Scheme), "ws")
	}
	if c.ReconnectInterval < 0 {
		return fmt.Errorf("mqtt: reconnect_interval %s is negative", c.ReconnectInterval)
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("mqtt: password is set but username is empty; MQTT 3.1.1 sends a password only with a user name")
	}
	tlsGiven := c.TLS.Given()
	if err := c.TLS.Check(); err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	if tlsGiven && c.embedded() {
		return errors.New("mqtt: tls is not available with url: embedded")
	}
	if tlsGiven && !tlsScheme && !c.embedded() {
		return errors.New("mqtt: tls settings are given but the url is not ssl://, tls://, mqtts:// or wss://")
	}
	for _, a := range c.SourceAddrs {
		if net.ParseIP(strings.TrimSpace(a)) == nil {
			return fmt.Errorf("mqtt: source_addrs: %q is not an IP address", a)
		}
	}
	if len(c.SourceAddrs) > 0 && ws {
		return errors.New("mqtt: source_addrs works with tcp and ssl URLs, not websockets")
	}
	switch strings.ToLower(strings.TrimSpace(c.Client)) {
	case "", clientPaho, clientLean:
	default:
		return fmt.Errorf("mqtt: client %q: use paho or lean", c.Client)
	}
	switch c.ProtocolVersion {
	case 0, 3, 4:
	case 5:
		if !c.lean() {
			return errors.New("mqtt: protocol_version 5 needs client: lean; the default client (eclipse/paho.mqtt.golang) speaks MQTT 3.1 and 3.1.1 only")
		}
	default:
		return fmt.Errorf("mqtt: protocol_version %d: use 3 (MQTT 3.1), 4 (MQTT 3.1.1) or 5 (MQTT 5, client: lean)", c.ProtocolVersion)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("mqtt: connect_timeout %s is negative", c.ConnectTimeout)
	}
	return nil
}

const (
	clientPaho = "paho"
	clientLean = "lean"
)

func (c *TargetConfig) lean() bool {
	return strings.EqualFold(strings.TrimSpace(c.Client), clientLean)
}

func (c *TargetConfig) protocolVersion() uint {
	if c.ProtocolVersion == 0 {
		return 4
	}
	return uint(c.ProtocolVersion)
}

func (c *TargetConfig) connectTimeout() time.Duration {
	if c.ConnectTimeout == 0 {
		return defaultConnectTimeout
	}
	return c.ConnectTimeout
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// checkTemplate reports placeholders in s other than the allowed ones, so a
// typo such as {clinet} is caught instead of ending up in every client id.
func checkTemplate(what, s string, allowed ...string) error {
	for _, p := range placeholder.FindAllString(s, -1) {
		ok := false
		for _, a := range allowed {
			if p == "{"+a+"}" {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("mqtt: %s %q: unknown placeholder %s; known: {%s}", what, s, p, strings.Join(allowed, "}, {"))
		}
	}
	return nil
}

func checkQoS(q *int) error {
	if q != nil && (*q < 0 || *q > 2) {
		return fmt.Errorf("mqtt: qos %d: use 0, 1 or 2", *q)
	}
	return nil
}

func qosOf(q *int) byte {
	if q == nil {
		return defaultQoS
	}
	return byte(*q)
}

func checkKeepAlive(d time.Duration) error {
	if d < 0 || (d > 0 && d < time.Second) || d%time.Second != 0 || d > 65535*time.Second {
		return fmt.Errorf("mqtt: keepalive %s: use whole seconds from 1s to 65535s (MQTT counts it in seconds)", d)
	}
	return nil
}

func keepAliveOf(d time.Duration) time.Duration {
	if d == 0 {
		return defaultKeepAlive
	}
	return d
}

func boolOf(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if o.Clients < 0 {
		return fmt.Errorf("mqtt: clients %d is negative", o.Clients)
	}
	if o.ConnectRate < 0 {
		return fmt.Errorf("mqtt: connect_rate %g is negative", o.ConnectRate)
	}
	if o.SendTimeout < 0 {
		return fmt.Errorf("mqtt: send_timeout %s is negative", o.SendTimeout)
	}
	if err := checkKeepAlive(o.KeepAlive); err != nil {
		return err
	}
	if err := checkQoS(o.QoS); err != nil {
		return err
	}
	if err := checkTemplate("client_id", o.ClientID, "client", "workload"); err != nil {
		return err
	}
	if o.ClientID != "" && o.Clients > 1 && !strings.Contains(o.ClientID, "{client}") {
		return fmt.Errorf("mqtt: client_id %q has no {client}: all %d clients would share one id and take each other's connection over", o.ClientID, o.Clients)
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	if o.Clients < 0 {
		return fmt.Errorf("mqtt: clients %d is negative", o.Clients)
	}
	if err := checkKeepAlive(o.KeepAlive); err != nil {
		return err
	}
	if err := checkQoS(o.QoS); err != nil {
		return err
	}
	if err := checkTemplate("client_id", o.ClientID, "client", "workload", "group", "instance"); err != nil {
		return err
	}
	if o.ClientID != "" && o.Clients > 1 && !strings.Contains(o.ClientID, "{client}") {
		return fmt.Errorf("mqtt: client_id %q has no {client}: all %d clients would share one id and take each other's connection over", o.ClientID, o.Clients)
	}
	if !boolOf(o.CleanSession, true) {
		if o.ClientID == "" {
			return errors.New("mqtt: clean_session: false needs a client_id that stays the same across starts (such as client_id: planrun-{workload}-{client}), or the broker cannot find the session again")
		}
		if strings.Contains(o.ClientID, "{instance}") {
			return fmt.Errorf("mqtt: clean_session: false with client_id %q: {instance} changes on every start, so the session would never be resumed; use {workload} and {client}", o.ClientID)
		}
	}
	return nil
}

// checkPublishTopic rejects what a broker would refuse or misroute.
func checkPublishTopic(t string) error {
	if t == "" {
		return errors.New("mqtt: topic is empty")
	}
	if strings.ContainsAny(t, "+#") {
		return fmt.Errorf("mqtt: cannot publish to %q: + and # are wildcards, valid only in subscriptions", t)
	}
	return checkTemplate("topic", t, "client", "workload")
}

func checkFilter(t string) error {
	if t == "" {
		return errors.New("mqtt: topic is empty")
	}
	return checkTemplate("topic", t, "client", "workload")
}

// expander fills a template's fixed placeholders once and {client} per client.
type expander struct {
	tmpl      string
	perClient bool
	base      int // added to every client index
}

func newExpander(tmpl string, fixed map[string]string) expander {
	for k, v := range fixed {
		tmpl = strings.ReplaceAll(tmpl, "{"+k+"}", v)
	}
	return expander{tmpl: tmpl, perClient: strings.Contains(tmpl, "{client}")}
}

func (e expander) client(i int) string {
	if !e.perClient {
		return e.tmpl
	}
	return strings.ReplaceAll(e.tmpl, "{client}", strconv.Itoa(e.base+i))
}
