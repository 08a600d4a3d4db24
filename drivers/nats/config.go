package nats

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
	"github.com/planrun/planrun/units"
)

// Embedded is the url value that starts an in-process nats-server.
const Embedded = "embedded"

const (
	defaultConnectTimeout = 5 * time.Second
	defaultReconnectWait  = 250 * time.Millisecond
	defaultSendTimeout    = 30 * time.Second
	defaultMaxPending     = 4096
	defaultAckWait        = 30 * time.Second
	defaultBatch          = 500
)

// TargetConfig is a NATS target's section of a plan.
type TargetConfig struct {
	URL            string                  `yaml:"url" doc:"Server URL: nats://host:port (tls://host:port for TLS), several separated by commas for a cluster, or \"embedded\" to start a nats-server in process with JetStream in a temporary directory."`
	Username       string                  `yaml:"username" doc:"User name (with password)."`
	Password       string                  `yaml:"password" secret:"true" doc:"Password of username."`
	Token          string                  `yaml:"token" secret:"true" doc:"Authentication token, instead of username and password."`
	CredsFile      string                  `yaml:"creds_file" doc:"NATS credentials file (JWT and NKey seed), as nats --creds."`
	TLS            tlsconf.Config          `yaml:"tls" doc:"TLS settings for tls:// URLs."`
	ConnectTimeout time.Duration           `yaml:"connect_timeout" default:"5s" doc:"Longest one connection attempt may take (default 5s)."`
	ReconnectWait  time.Duration           `yaml:"reconnect_wait" default:"250ms" doc:"Pause between the reconnection attempts of a connection that was lost (default 250ms); connections retry for as long as the run lasts."`
	Dir            string                  `yaml:"dir" doc:"Embedded server only: JetStream's store directory, kept after the run (default: a temporary directory, removed at the end)."`
	Streams        map[string]StreamConfig `yaml:"streams" doc:"JetStream streams to create (or update) when the target opens, by name."`
	// Routing dials through the target's proxy (proxy:) when it has one.
	drivers.Routing
}

// StreamConfig is one JetStream stream a target creates.
type StreamConfig struct {
	Subjects    []string      `yaml:"subjects" doc:"Subjects the stream stores, wildcards * and > allowed (default: the stream's name)."`
	Storage     string        `yaml:"storage" default:"file" doc:"file (default) or memory."`
	Replicas    int           `yaml:"replicas" default:"1" doc:"Copies of each message in a cluster, 1 to 5 (default 1)."`
	Retention   string        `yaml:"retention" default:"limits" doc:"limits (default: kept until a limit removes them), interest (kept while a consumer has not acknowledged them) or workqueue (removed once acknowledged)."`
	MaxMsgs     int64         `yaml:"max_msgs" default:"0" doc:"Most messages kept (default 0: no limit)."`
	MaxBytes    units.Size    `yaml:"max_bytes" default:"0" doc:"Most bytes kept (default 0: no limit)."`
	MaxAge      time.Duration `yaml:"max_age" default:"0s" doc:"Oldest message kept (default 0s: no limit)."`
	Discard     string        `yaml:"discard" default:"old" doc:"At a limit: old (default) removes the oldest messages, new refuses new ones (the publish fails)."`
	Compression string        `yaml:"compression" default:"none" doc:"none (default) or s2: file storage compressed on disk (nats-server 2.10 or later)."`
	Purge       bool          `yaml:"purge" doc:"Remove every message the stream holds when the target opens, so a run starts from an empty stream."`
}

// ProduceOptions are the NATS fields of a workload's produce section.
type ProduceOptions struct {
	JetStream   bool          `yaml:"jetstream" doc:"Publish through JetStream: a send is acknowledged when the stream stored it (its publish ack). Without it, a core publish is acknowledged once the server has read it (a PING sent after it was answered): at most once, nothing is stored."`
	MaxPending  int           `yaml:"max_pending" default:"4096" doc:"JetStream: publishes awaiting their ack at most per producer; more wait (default 4096)."`
	SendTimeout time.Duration `yaml:"send_timeout" default:"30s" doc:"Longest a send waits for its acknowledgement before it counts as failed (default 30s)."`
}

// ConsumeOptions are the NATS fields of a workload's consume section.
type ConsumeOptions struct {
	JetStream      bool          `yaml:"jetstream" doc:"Consume through a durable JetStream consumer named after the group, which keeps the group's position on the server. Without it, a core subscription in a queue group named after the group: it gets only what is published while it is subscribed."`
	Stream         string        `yaml:"stream" doc:"JetStream: the stream to consume from (default: the stream whose subjects cover the topic)."`
	Mode           string        `yaml:"mode" default:"pull" doc:"JetStream: pull (default: the consumer fetches batches) or push (the server sends to a deliver subject, a queue group shared by the group's consumers)."`
	AckPolicy      string        `yaml:"ack_policy" default:"explicit" doc:"JetStream: explicit (default: every message acknowledged after it is counted), all (an ack covers every earlier message) or none (delivered counts as acknowledged)."`
	AckWait        time.Duration `yaml:"ack_wait" default:"30s" doc:"JetStream: how long the server waits for an ack before it delivers the message again (default 30s)."`
	MaxAckPending  int           `yaml:"max_ack_pending" default:"1000" doc:"JetStream: messages delivered and not yet acknowledged at most, for the whole group (default 1000)."`
	MaxDeliver     int           `yaml:"max_deliver" default:"0" doc:"JetStream: deliveries of one message at most (default 0: no limit)."`
	Batch          int           `yaml:"batch" default:"500" doc:"JetStream pull: messages asked for per pull request (default 500)."`
	FilterSubjects []string      `yaml:"filter_subjects" doc:"JetStream: several subjects the consumer takes from the stream instead of the topic alone (nats-server 2.10 or later)."`
}

// RunsEmbedded implements drivers.EmbeddedConfig.
func (c *TargetConfig) RunsEmbedded() bool { return c.embedded() }

func (c *TargetConfig) embedded() bool {
	return strings.EqualFold(strings.TrimSpace(c.URL), Embedded)
}

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
	_ drivers.Checker = (*ConsumeOptions)(nil)
)

// servers splits a url list.
func (c *TargetConfig) servers() []string {
	var out []string
	for _, s := range strings.Split(c.URL, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	if strings.TrimSpace(c.URL) == "" {
		return errors.New(`nats: url is empty; give nats://host:port or "embedded"`)
	}
	tlsScheme := false
	if !c.embedded() {
		for _, raw := range c.servers() {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" {
				return fmt.Errorf("nats: url %q: want nats://host:port such as nats://127.0.0.1:4222", raw)
			}
			if u.User != nil {
				return errors.New("nats: url holds credentials; put them in username and password (or token) instead")
			}
			switch strings.ToLower(u.Scheme) {
			case "nats":
			case "tls":
				tlsScheme = true
			default:
				return fmt.Errorf("nats: url scheme %q is not supported; use nats:// or tls://", u.Scheme)
			}
		}
	}
	if err := c.TLS.Check(); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if c.TLS.Given() && c.embedded() {
		return errors.New("nats: tls is not available with url: embedded")
	}
	if c.TLS.Given() && !tlsScheme && !c.embedded() {
		return errors.New("nats: tls settings are given but the url is not tls://")
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("nats: password is set but username is empty")
	}
	if c.Token != "" && c.Username != "" {
		return errors.New("nats: give token or username and password, not both")
	}
	if c.ConnectTimeout < 0 || c.ReconnectWait < 0 {
		return errors.New("nats: connect_timeout and reconnect_wait must not be negative")
	}
	if c.Dir != "" && !c.embedded() {
		return errors.New("nats: dir is for url: embedded only (the embedded server's JetStream store)")
	}
	for name, s := range c.Streams {
		if err := s.check(name); err != nil {
			return err
		}
	}
	return nil
}

func oneOf(what, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("nats: %s %q: use %s", what, v, strings.Join(allowed, ", "))
}

func (s *StreamConfig) check(name string) error {
	if err := checkName("stream", name); err != nil {
		return err
	}
	where := "stream " + name + ": "
	for _, sub := range s.Subjects {
		if err := checkSubject(sub, true); err != nil {
			return fmt.Errorf("%s%w", where, err)
		}
	}
	for _, e := range []error{
		oneOf(where+"storage", s.Storage, "file", "memory"),
		oneOf(where+"retention", s.Retention, "limits", "interest", "workqueue"),
		oneOf(where+"discard", s.Discard, "old", "new"),
		oneOf(where+"compression", s.Compression, "none", "s2"),
	} {
		if e != nil {
			return e
		}
	}
	if s.Replicas < 0 || s.Replicas > 5 {
		return fmt.Errorf("nats: %sreplicas %d: use 1 to 5", where, s.Replicas)
	}
	if s.MaxMsgs < 0 || s.MaxBytes < 0 || s.MaxAge < 0 {
		return fmt.Errorf("nats: %smax_msgs, max_bytes and max_age must not be negative", where)
	}
	return nil
}

// checkName rejects what the server refuses in stream and consumer names.
func checkName(what, n string) error {
	if n == "" || strings.ContainsAny(n, ". *>\t\r\n/\\") {
		return fmt.Errorf("nats: %s name %q: use letters, digits, - and _ (no dots, spaces, wildcards or slashes)", what, n)
	}
	return nil
}

// checkSubject rejects subjects the server refuses: empty tokens, and
// wildcards where they are not allowed (publishing) or not whole tokens.
func checkSubject(s string, wildcards bool) error {
	if s == "" {
		return errors.New("nats: subject is empty")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("nats: subject %q has white space", s)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("nats: subject %q has an empty token (two dots, or a dot at an end)", s)
		case t == "*" || t == ">":
			if !wildcards {
				return fmt.Errorf("nats: cannot publish to %q: * and > are wildcards, valid only in subscriptions", s)
			}
			if t == ">" && i != len(toks)-1 {
				return fmt.Errorf("nats: subject %q: > must be the last token", s)
			}
		case strings.ContainsAny(t, "*>"):
			if wildcards {
				return fmt.Errorf("nats: subject %q: * and > are wildcards only as whole tokens", s)
			}
		}
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if o.MaxPending < 0 {
		return fmt.Errorf("nats: max_pending %d is negative", o.MaxPending)
	}
	if o.SendTimeout < 0 {
		return fmt.Errorf("nats: send_timeout %s is negative", o.SendTimeout)
	}
	return nil
}

func (o *ProduceOptions) sendTimeout() time.Duration {
	if o.SendTimeout == 0 {
		return defaultSendTimeout
	}
	return o.SendTimeout
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	if err := oneOf("mode", o.Mode, "pull", "push"); err != nil {
		return err
	}
	if err := oneOf("ack_policy", o.AckPolicy, "explicit", "all", "none"); err != nil {
		return err
	}
	if o.AckWait < 0 || o.MaxAckPending < 0 || o.MaxDeliver < 0 || o.Batch < 0 {
		return errors.New("nats: ack_wait, max_ack_pending, max_deliver and batch must not be negative")
	}
	if !o.JetStream {
		var set []string
		if o.Stream != "" {
			set = append(set, "stream")
		}
		if o.Mode != "" {
			set = append(set, "mode")
		}
		if o.AckPolicy != "" {
			set = append(set, "ack_policy")
		}
		if o.AckWait != 0 {
			set = append(set, "ack_wait")
		}
		if o.MaxAckPending != 0 {
			set = append(set, "max_ack_pending")
		}
		if o.MaxDeliver != 0 {
			set = append(set, "max_deliver")
		}
		if o.Batch != 0 {
			set = append(set, "batch")
		}
		if len(o.FilterSubjects) > 0 {
			set = append(set, "filter_subjects")
		}
		if len(set) > 0 {
			return fmt.Errorf("nats: %s: JetStream settings; add jetstream: true (a core subscription has none)", strings.Join(set, ", "))
		}
	}
	if o.Stream != "" {
		if err := checkName("stream", o.Stream); err != nil {
			return err
		}
	}
	for _, s := range o.FilterSubjects {
		if err := checkSubject(s, true); err != nil {
			return err
		}
	}
	if o.Mode == "push" && o.Batch != 0 {
		return errors.New("nats: batch is for mode: pull")
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
