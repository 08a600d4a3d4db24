package kafka

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
	"github.com/planrun/planrun/units"
)

// Embedded is the brokers value that starts an in-process cluster.
const Embedded = "embedded"

const (
	defaultClientID    = "planrun"
	defaultVersion     = "2.8.0"
	defaultDialTimeout = 10 * time.Second
	// embeddedPartitions is the partition count of topics the embedded
	// cluster creates on first use: enough for several consumers of a group
	// to share the work.
	embeddedPartitions = 8
	// defaultLinger is Kafka 4.0's linger.ms: evenly paced sends that arrive
	// within it share a produce request instead of paying for one each, and
	// a batch_size is never left waiting for bytes that synchronous senders
	// will never supply.
	defaultLinger = 5 * time.Millisecond
)

// TargetConfig is a Kafka target's section of a plan.
type TargetConfig struct {
	Brokers           string        `yaml:"brokers" required:"true" doc:"Comma-separated bootstrap brokers (host:port), or \"embedded\" to start an in-process Kafka-compatible cluster."`
	ClientID          string        `yaml:"client_id" default:"planrun" doc:"Client id sent to the brokers (default planrun)."`
	Version           string        `yaml:"version" default:"2.8.0" doc:"Kafka protocol version the client speaks, at least 0.11.0 (default 2.8.0)."`
	TLS               TLSConfig     `yaml:"tls" doc:"TLS for broker connections."`
	SASL              SASLConfig    `yaml:"sasl" doc:"SASL authentication."`
	DialTimeout       time.Duration `yaml:"dial_timeout" default:"10s" doc:"How long connecting to a broker may take (default 10s)."`
	ReplicationFactor int           `yaml:"replication_factor" doc:"Replication factor of topics planrun creates (default: the broker's default.replication.factor)."`
	// Routing dials through the target's proxy (proxy:) when it has one.
	drivers.Routing
}

// TLSConfig enables TLS towards the brokers: enabled beside the TLS file
// settings every driver shares.
type TLSConfig struct {
	Enabled        bool `yaml:"enabled" doc:"Connect with TLS."`
	tlsconf.Config `yaml:",inline"`
}

// SASLConfig authenticates to the brokers.
type SASLConfig struct {
	Mechanism string `yaml:"mechanism" doc:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty disables SASL."`
	User      string `yaml:"user" doc:"SASL user name."`
	Password  string `yaml:"password" secret:"true" doc:"SASL password."`
}

// ProduceOptions are the Kafka fields of a workload's produce section.
type ProduceOptions struct {
	Acks            string         `yaml:"acks" default:"all" doc:"Acknowledgements to wait for: all, leader or none (default all)."`
	Compression     string         `yaml:"compression" default:"none" doc:"Batch compression: none, gzip, snappy, lz4 or zstd (default none)."`
	BatchSize       units.Size     `yaml:"batch_size" default:"0" doc:"Bytes buffered per broker before a produce request is sent (default 0: send as soon as possible)."`
	Linger          *time.Duration `yaml:"linger" default:"5ms" doc:"Longest time a message waits for others to share its produce request, like linger.ms (default 5ms, as Kafka 4.0; 0 sends each message as soon as it is handed over; with batch_size set, 0 still waits 5ms). With a linger, sends due within 1ms (or the linger, if shorter) of each other are handed over together, at most that long after their due time, from which latency is measured."`
	Idempotent      bool           `yaml:"idempotent" doc:"Idempotent producer (needs acks all and max_in_flight 1)."`
	MaxInFlight     int            `yaml:"max_in_flight" default:"5" doc:"Unacknowledged produce requests per broker connection (default 5, or 1 when idempotent)."`
	Partitioner     string         `yaml:"partitioner" default:"hash" doc:"Partition choice: hash (of the key, random for keyless messages), murmur2 (Java client compatible), random or round_robin (default hash)."`
	MaxMessageBytes units.Size     `yaml:"max_message_bytes" default:"1000000" doc:"Largest message, and batch of messages per partition, the producer sends, like max.request.size (default 1000000)."`
}

// ConsumeOptions are the Kafka fields of a workload's consume section.
type ConsumeOptions struct {
	FetchSize      units.Size    `yaml:"fetch_size" default:"1MiB" doc:"Bytes asked for per partition in each fetch request, like kafka-consumer-perf-test --fetch-size (default 1MiB)."`
	MaxWait        time.Duration `yaml:"max_wait" default:"500ms" doc:"Longest time the broker holds a fetch waiting for data (default 500ms)."`
	SessionTimeout time.Duration `yaml:"session_timeout" default:"10s" doc:"Group session timeout after which a silent member is evicted (default 10s)."`
	Rebalance      string        `yaml:"rebalance" default:"range" doc:"Partition assignment strategy: range, roundrobin or sticky (default range)."`
}

// brokerList splits the brokers field.
func (c *TargetConfig) brokerList() []string {
	var out []string
	for _, b := range strings.Split(c.Brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// RunsEmbedded implements drivers.EmbeddedConfig: plans may stop and
// start the embedded cluster with the broker step.
func (c *TargetConfig) RunsEmbedded() bool { return c.embedded() }

func (c *TargetConfig) embedded() bool {
	return strings.EqualFold(strings.TrimSpace(c.Brokers), Embedded)
}

func (c *TargetConfig) version() (sarama.KafkaVersion, error) {
	v := c.Version
	if v == "" {
		v = defaultVersion
	}
	kv, err := sarama.ParseKafkaVersion(v)
	if err != nil {
		return kv, fmt.Errorf("kafka: version %q: want a Kafka release such as 2.8.0 or 3.6.0", v)
	}
	if !kv.IsAtLeast(sarama.V0_11_0_0) {
		return kv, fmt.Errorf("kafka: version %q is too old; planrun needs at least 0.11.0 (record headers, consumer groups)", v)
	}
	return kv, nil
}

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
	_ drivers.Checker = (*ConsumeOptions)(nil)
)

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	if strings.TrimSpace(c.Brokers) == "" {
		return errors.New(`kafka: brokers is empty; give host:port[,host:port...] or "embedded"`)
	}
	if !c.embedded() {
		for _, b := range c.brokerList() {
			if !strings.Contains(b, ":") {
				return fmt.Errorf("kafka: broker %q has no port; write host:port", b)
			}
		}
	}
	if _, err := c.version(); err != nil {
		return err
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("kafka: dial_timeout %s is negative", c.DialTimeout)
	}
	if c.ReplicationFactor < 0 {
		return fmt.Errorf("kafka: replication_factor %d is negative", c.ReplicationFactor)
	}
	tf := &c.TLS.Config
	if err := tf.Check(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	if !c.TLS.Enabled && tf.Given() {
		return errors.New("kafka: tls settings are given but tls.enabled is false")
	}
	if c.TLS.Enabled && c.embedded() {
		return errors.New("kafka: tls is not available with brokers: embedded")
	}
	s := c.SASL
	switch strings.ToUpper(s.Mechanism) {
	case "":
		if s.User != "" || s.Password != "" {
			return errors.New("kafka: sasl.user/password are given but sasl.mechanism is empty; set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
	case sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512:
		if s.User == "" {
			return fmt.Errorf("kafka: sasl.mechanism %s needs sasl.user", s.Mechanism)
		}
	default:
		return fmt.Errorf("kafka: sasl.mechanism %q is not supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if _, err := acksOf(o.Acks); err != nil {
		return err
	}
	if _, err := compressionOf(o.Compression); err != nil {
		return err
	}
	if _, err := partitionerOf(o.Partitioner); err != nil {
		return err
	}
	if o.BatchSize < 0 || o.MaxMessageBytes < 0 || (o.Linger != nil && *o.Linger < 0) || o.MaxInFlight < 0 {
		return errors.New("kafka: batch_size, linger, max_in_flight and max_message_bytes must not be negative")
	}
	if o.MaxMessageBytes > 1<<31-1 {
		return fmt.Errorf("kafka: max_message_bytes %s is larger than Kafka allows", o.MaxMessageBytes)
	}
	if o.Idempotent {
		if acks, _ := acksOf(o.Acks); acks != sarama.WaitForAll {
			return fmt.Errorf("kafka: idempotent needs acks: all (got acks: %s)", o.Acks)
		}
		if o.MaxInFlight > 1 {
			return fmt.Errorf("kafka: idempotent needs max_in_flight: 1 with this client (got %d)", o.MaxInFlight)
		}
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	if _, err := strategyOf(o.Rebalance); err != nil {
		return err
	}
	if o.FetchSize < 0 || o.FetchSize > 1<<31-1 {
		return fmt.Errorf("kafka: fetch_size %s is out of range", o.FetchSize)
	}
	if o.MaxWait < 0 || (o.MaxWait > 0 && o.MaxWait < time.Millisecond) {
		return fmt.Errorf("kafka: max_wait %s must be at least 1ms", o.MaxWait)
	}
	if o.SessionTimeout < 0 || (o.SessionTimeout > 0 && o.SessionTimeout < 10*time.Millisecond) {
		return fmt.Errorf("kafka: session_timeout %s is too short", o.SessionTimeout)
	}
	return nil
}

func acksOf(s string) (sarama.RequiredAcks, error) {
	switch strings.ToLower(s) {
	case "", "all", "-1":
		return sarama.WaitForAll, nil
	case "leader", "1":
		return sarama.WaitForLocal, nil
	case "none", "0":
		return sarama.NoResponse, nil
	}
	return 0, fmt.Errorf("kafka: acks %q: use all, leader or none", s)
}

func compressionOf(s string) (sarama.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("kafka: compression %q: use none, gzip, snappy, lz4 or zstd", s)
}

func partitionerOf(s string) (sarama.PartitionerConstructor, error) {
	switch strings.ToLower(s) {
	case "", "hash":
		return sarama.NewHashPartitioner, nil
	case "murmur2":
		return sarama.NewMurmur2Partitioner, nil
	case "random":
		return sarama.NewRandomPartitioner, nil
	case "round_robin", "roundrobin":
		return sarama.NewRoundRobinPartitioner, nil
	}
	return nil, fmt.Errorf("kafka: partitioner %q: use hash, murmur2, random or round_robin", s)
}

func strategyOf(s string) (sarama.BalanceStrategy, error) {
	switch strings.ToLower(s) {
	case "", "range":
		return sarama.NewBalanceStrategyRange(), nil
	case "roundrobin", "round_robin":
		return sarama.NewBalanceStrategyRoundRobin(), nil
	case "sticky":
		return sarama.NewBalanceStrategySticky(), nil
	}
	return nil, fmt.Errorf("kafka: rebalance %q: use range, roundrobin or sticky", s)
}

// baseConfig turns a checked target config into the sarama settings every
// client of the target shares.
func baseConfig(c *TargetConfig) (*sarama.Config, error) {
	sc := sarama.NewConfig()
	v, err := c.version()
	if err != nil {
		return nil, err
	}
	sc.Version = v
	sc.ClientID = c.ClientID
	if sc.ClientID == "" {
		sc.ClientID = defaultClientID
	}
	sc.Net.DialTimeout = c.DialTimeout
	if sc.Net.DialTimeout == 0 {
		sc.Net.DialTimeout = defaultDialTimeout
	}
	if c.Routed() {
		// Every broker address, the bootstrap ones and those metadata
		// names, is dialed through the target's proxy; TLS still checks
		// the broker's own name (sarama takes it from the address).
		sc.Net.Proxy.Enable = true
		sc.Net.Proxy.Dialer = c.Dialer(&net.Dialer{Timeout: sc.Net.DialTimeout, KeepAlive: sc.Net.KeepAlive})
	}
	if c.TLS.Enabled {
		tc, err := c.TLS.Load()
		if err != nil {
			return nil, fmt.Errorf("kafka: %w", err)
		}
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = tc
	}
	if m := strings.ToUpper(c.SASL.Mechanism); m != "" {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Mechanism = sarama.SASLMechanism(m)
		sc.Net.SASL.User = c.SASL.User
		sc.Net.SASL.Password = c.SASL.Password
		sc.Net.SASL.Handshake = true
		switch m {
		case sarama.SASLTypeSCRAMSHA256:
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAM(scram.SHA256) }
		case sarama.SASLTypeSCRAMSHA512:
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAM(scram.SHA512) }
		}
	}
	// Failures surface as errors to the workload; a long retry ladder only
	// turns a dead broker into a hang.
	sc.Metadata.Retry.Max = 2
	sc.Metadata.Retry.Backoff = 200 * time.Millisecond
	return sc, nil
}

// files is the part of the section that tlsconf reads.

// configError rewrites sarama's configuration errors, which name its Go
// fields, without ever echoing secrets (sarama's texts never hold them).
func configError(what string, err error) error {
	var ce sarama.ConfigurationError
	if errors.As(err, &ce) {
		return fmt.Errorf("kafka: %s: invalid client settings: %s", what, string(ce))
	}
	return err
}

// linger is the plan's linger, or the default when it gives none. With
// batch_size and linger: 0, a batch still leaves within the default linger.
func (o *ProduceOptions) linger() time.Duration {
	switch {
	case o.Linger == nil:
		return defaultLinger
	case *o.Linger == 0 && o.BatchSize > 0:
		return defaultLinger
	}
	return *o.Linger
}
