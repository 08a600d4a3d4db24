// Package drivers defines what a protocol driver provides to planrun and keeps
// the registry of drivers by name. A driver only connects, sends and receives:
// pacing, counting and timing stay in package workloads.
package drivers

import (
	"context"
	"strings"
	"time"

	"github.com/planrun/planrun/registry"
)

// Message is one message as a workload sends it or a consumer receives it.
type Message struct {
	Topic string
	Key   []byte
	Value []byte
	// Source is the index of the sending client for drivers that hold many
	// client connections (MQTT fleets); the workload sets it, the driver may
	// use it to pick the connection and expand topic templates.
	Source int
	// Partition and Offset are set on received messages when the protocol
	// has them (Kafka partition, RocketMQ queue); -1 when unknown.
	Partition int32
	Offset    int64
	// Received is when the driver got the message, for end-to-end latency.
	Received time.Time
}

// Driver opens targets of one protocol. Config types are plain structs with
// `yaml` tags; the plan loader decodes the target's section into them and
// reports unknown keys with their position, so drivers never see raw YAML.
// Drivers are made with Define, which keeps this untyped face for the
// loader and gives the driver its own types.
type Driver interface {
	// NewTargetConfig returns a pointer to a zero target config struct.
	NewTargetConfig() any
	// Open connects (or starts an embedded broker) for a decoded config.
	Open(ctx context.Context, cfg any) (Target, error)
}

// ProduceOptioner is implemented by drivers with driver-specific fields in a
// workload's produce section (acks, qos, clients...). The returned pointer is
// decoded from the same YAML mapping as the generic produce fields.
type ProduceOptioner interface {
	NewProduceOptions() any
}

// ConsumeOptioner is the consume-side counterpart of ProduceOptioner.
type ConsumeOptioner interface {
	NewConsumeOptions() any
}

// ConfigChecker lets a driver check, at load time, a decoded target config
// or produce/consume options (whatever its New* functions returned), beyond
// what types express: mutually exclusive fields and so on.
type ConfigChecker interface {
	CheckConfig(cfg any) error
}

// Target is one connected endpoint (a cluster). Its optional abilities
// (LagReader, TopicCreator, Describer, Prober, Connector) are found with As.
type Target interface {
	NewProducer(ctx context.Context, spec ProducerSpec) (Producer, error)
	NewConsumer(ctx context.Context, spec ConsumerSpec) (Consumer, error)
	Close() error
}

// ProducerSpec says what a workload wants to send.
type ProducerSpec struct {
	Workload string // workload name, for error messages and client ids
	Topic    string
	Threads  int // how many goroutines will call Send concurrently
	Options  any // the driver's produce options (ProduceOptioner), or nil; Define hands them to the driver typed
	// Events receives the producer's connection events (may be nil: use Emit).
	Events EventSink
}

// ConsumerSpec says what a workload wants to receive.
type ConsumerSpec struct {
	Workload string
	Topic    string
	Group    string
	// FromLatest starts a group with no committed offset at the end of the
	// topic instead of the beginning.
	FromLatest bool
	// Instance distinguishes several consumers of one group in one process.
	Instance string
	Options  any
	// Events receives the consumer's connection events (may be nil: use Emit).
	Events EventSink
}

// Producer sends messages. Send is called from many goroutines at once and
// returns when the broker acknowledged the message (or failed).
type Producer interface {
	Send(ctx context.Context, m *Message) error
	Close() error
}

// Consumer receives messages for a group. Run calls handle for every message
// (possibly from several goroutines) until ctx is done and returns nil then.
// handle may block: that is how a bounded relay pushes back. Close commits the
// group's position so that a later consumer of the group continues from it.
type Consumer interface {
	Run(ctx context.Context, handle func(*Message)) error
	Close() error
}

// LagReader is a Target that can ask the broker how far a group is behind.
type LagReader interface {
	Lag(ctx context.Context, topic, group string) (int64, error)
}

// TopicCreator is a Target that can create topics with a partition (queue) count.
type TopicCreator interface {
	CreateTopic(ctx context.Context, topic string, partitions int) error
}

// Gauger is a Producer or Consumer with figures of its own (connected
// clients, connect failures...). Values are read while the workload runs.
type Gauger interface {
	Gauges() map[string]float64
}

// Describer is a Target that can say what it is connected to, for reports
// ("kafka 127.0.0.1:9092 (embedded)").
type Describer interface {
	Describe() string
}

var registered = registry.New[Driver]("driver")

var driverDocs = registry.New[string]("driver doc")

// Register makes a driver available to plans under name. Drivers call it
// from init; registering a name twice is a programming error. doc says in
// a line what the driver talks to, for planrun explain.
func Register(name string, d Driver, doc ...string) {
	registered.Register(name, d)
	driverDocs.Register(name, strings.Join(doc, " "))
}

// Doc is the line a driver registered to describe itself.
func Doc(name string) string {
	d, _ := driverDocs.Lookup(name)
	return d
}

// Lookup returns the driver registered under name.
func Lookup(name string) (Driver, bool) { return registered.Lookup(name) }

// Names lists registered drivers, sorted.
func Names() []string { return registered.Names() }

// Sourcer is a Producer that holds several client connections (an MQTT
// fleet). The workload spreads Message.Source over 0..Sources()-1 and an
// `interval` pace means one message per source per interval.
type Sourcer interface {
	Sources() int
}

// TopicResolver is a Producer that sends a message to a topic other than
// Message.Topic as written (a template expanded per client): ResolveTopic
// says which, so what was acknowledged is accounted where it went.
type TopicResolver interface {
	ResolveTopic(m *Message) string
}

// SubscriptionMatcher is a Target whose subscriptions cover more than the
// topic they name (MQTT + and # wildcards, $share/ groups, templates
// expanded per client): Matcher returns whether a concrete topic a producer
// sent to reaches a consumer of spec. Without it a subscription covers the
// topic of its name only.
type SubscriptionMatcher interface {
	Matcher(spec ConsumerSpec) func(topic string) bool
}

// SubscriptionGrouper is a SubscriptionMatcher whose consumers may share
// one subscription across workloads (MQTT $share/<group>/ subscriptions):
// AccountingGroup returns the subscription and group name consumers are
// accounted under, so that consumers giving the same pair form one group
// that expects each message once. Without it a consumer is accounted under
// its spec's Topic and Group.
type SubscriptionGrouper interface {
	AccountingGroup(spec ConsumerSpec) (subscription, group string)
}

// ConnectCapable is a Driver whose targets are Connectors, so the plan
// loader can accept `connect:` workloads for it before anything is opened.
type ConnectCapable interface {
	CanConnect() bool
}

// AsyncSender is a Producer that can hand a message over without waiting
// for its acknowledgement, so one pacing goroutine keeps many messages in
// flight instead of one goroutine per message: no goroutine is woken per
// acknowledgement. SendAsync returns once the driver holds m (or with an
// error, and then done is never called); done.Done is called exactly once
// later with the outcome, from a goroutine of the driver's, and must not
// block. m itself may be reused once SendAsync returns; its Key and Value
// stay untouched until done is called. Close calls every done still owed.
type AsyncSender interface {
	SendAsync(ctx context.Context, m *Message, done Completion) error
}

// Completion receives the outcome of an AsyncSender's send.
type Completion interface {
	Done(err error)
}

// ThreadResizer is a Producer that takes a new number of concurrent
// senders while it runs (a plan's set: {producer.threads: N}); without it
// a running producer's threads stay as they were opened.
type ThreadResizer interface {
	SetThreads(n int) error
}

// Readier is a Producer whose connections open in the background (an MQTT
// fleet at its connect rate); WaitReady returns once all are open. A produce
// workload with connect_first waits for it before its first send.
type Readier interface {
	WaitReady(ctx context.Context) error
}

// Connector is a Target that can hold idle connections without sending:
// the `connect` workload, for connection-scale tests. Options are the
// driver's produce options (ProduceOptioner) decoded from the workload.
type Connector interface {
	Connect(ctx context.Context, spec ConnectSpec) (Connections, error)
}

// ConnectSpec says what a connect workload wants.
type ConnectSpec struct {
	Workload string
	Options  any
	// Events receives the connections' events (may be nil: use Emit).
	Events EventSink
}

// Connections are held connections; Gauges reports connected clients,
// connect failures and connect latency; Close disconnects them all.
type Connections interface {
	Gauger
	Close() error
}

// Prober is a Target that answers a one-off query for the probe step
// (a Redis command such as HLEN key). The result is a number, a string or a
// list, as the protocol returns it.
type Prober interface {
	Probe(ctx context.Context, args []string) (any, error)
}

// Part is one shard of a workload split over worker processes: shard Index
// of Of. ThreadBase and Threads are the producer threads this shard runs,
// numbered from ThreadBase in the whole workload.
type Part struct {
	Index, Of           int
	ThreadBase, Threads int
}

// Shardable is implemented by driver options with something to split over
// worker processes (an MQTT fleet's clients): Shard returns a copy holding
// the part's share, numbered where the part starts, so that per-client
// names ({client}) stay unique and dense across the whole fleet.
type Shardable interface {
	Shard(p Part) any
	// ShardUnits is how many shards the options can be split into at most
	// (0: no limit of their own).
	ShardUnits() int
}

// Split divides total into n parts as evenly as possible and returns where
// part i starts and its size; the first total%n parts get one more.
func Split(total, i, n int) (base, size int) {
	q, r := total/n, total%n
	base = i*q + min(i, r)
	size = q
	if i < r {
		size++
	}
	return base, size
}

// BrokerController is a Target that runs its broker in process (an
// embedded broker) and can stop it and start it again on the same address,
// so that plans test outages without an outside broker. StopBroker closes
// every client connection, as a broker going down does; StartBroker
// recovers what the broker keeps across restarts (a file-backed store).
type BrokerController interface {
	StopBroker(ctx context.Context) error
	StartBroker(ctx context.Context) error
}

// EmbeddedConfig is a target config that says whether it starts an
// embedded broker, so the plan loader can accept broker steps for it
// before anything is opened.
type EmbeddedConfig interface {
	RunsEmbedded() bool
}
