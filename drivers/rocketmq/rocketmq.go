// Package rocketmq is planrun's RocketMQ driver, built on
// github.com/apache/rocketmq-client-go/v2. With nameservers: embedded it
// starts an in-process name server and broker (package embedded/rocketmq)
// that lives as long as the target.
package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/planrun/planrun/drivers"
	embedded "github.com/planrun/planrun/embedded/rocketmq"
)

func init() {
	drivers.Register("rocketmq", Driver,
		"Apache RocketMQ through apache/rocketmq-client-go, with ACL; nameservers: embedded starts planrun's own name server and broker in process")
	// The client logs every rebalance and reconnect to stderr, which would
	// drown planrun's progress lines; its failures reach planrun as errors.
	// ROCKETMQ_GO_LOG_LEVEL, the client's own switch, brings its log back.
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogger(quietLogger{})
	}
}

type quietLogger struct{}

func (quietLogger) Debug(string, map[string]any)   {}
func (quietLogger) Info(string, map[string]any)    {}
func (quietLogger) Warning(string, map[string]any) {}
func (quietLogger) Error(string, map[string]any)   {}
func (quietLogger) Fatal(string, map[string]any)   {}
func (quietLogger) Level(string)                   {}
func (quietLogger) OutputPath(string) error        { return nil }

// Driver opens RocketMQ targets.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Restart: true, Relay: true, Credentials: true, Embedded: true, Lag: true, Topics: true,
})

var (
	_ drivers.TargetOf[ProduceOptions, ConsumeOptions] = (*Target)(nil)
	_ drivers.LagReader                                = (*Target)(nil)
	_ drivers.TopicCreator                             = (*Target)(nil)
	_ drivers.Describer                                = (*Target)(nil)
	_ drivers.BrokerController                         = (*Target)(nil)
	_ drivers.EmbeddedConfig                           = (*TargetConfig)(nil)
)

// Target is a connected RocketMQ cluster (name servers and their brokers).
type Target struct {
	cfg         TargetConfig
	nameServers []string // IP:port, as the client requires
	rem         *remoting

	// broker is nil unless embedded; brokerDown is set while a plan has it
	// stopped. dir is its directory, removed on Close when tempDir.
	brokerMu   sync.Mutex
	broker     *embedded.Broker
	brokerDown bool
	dir        string
	tempDir    bool

	mu     sync.Mutex
	closed bool
}

// open starts the embedded broker if asked, checks that the name servers
// answer and, with ACL keys, that the brokers accept them, before any
// workload starts.
func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	t := &Target{cfg: *c}
	if c.embedded() {
		// The target owns the broker's directory when the plan gives none,
		// so that a broker stopped and started again by the plan finds
		// what it stored.
		t.dir = c.Dir
		if t.dir == "" {
			d, err := os.MkdirTemp("", "planrun-rocketmq-*")
			if err != nil {
				return nil, fmt.Errorf("rocketmq: embedded broker directory: %w", err)
			}
			t.dir, t.tempDir = d, true
		}
		b, err := embedded.Start(ctx, t.brokerOptions())
		if err != nil {
			t.removeDir()
			return nil, fmt.Errorf("rocketmq: start embedded broker: %w", err)
		}
		t.broker = b
		t.nameServers = []string{b.NameServerAddr()}
	} else {
		ns, err := resolveNameServers(ctx, c.nameServerList())
		if err != nil {
			return nil, err
		}
		t.nameServers = ns
	}
	t.rem = newRemoting(t.nameServers, c.AccessKey, c.SecretKey)
	if err := t.check(ctx); err != nil {
		t.rem.close()
		if t.broker != nil {
			_ = t.broker.Close()
			t.removeDir()
		}
		return nil, err
	}
	return t, nil
}

// resolveNameServers turns host names into IP addresses: the client accepts
// name servers only as IP:port.
func resolveNameServers(ctx context.Context, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, s := range list {
		host, port, _ := net.SplitHostPort(s)
		if net.ParseIP(host) != nil {
			out = append(out, s)
			continue
		}
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("rocketmq: name server %s: %w", s, err)
		}
		ip := addrs[0].IP
		for _, a := range addrs {
			if a.IP.To4() != nil {
				ip = a.IP
				break
			}
		}
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out, nil
}

// check asks the name servers for the brokers and, with credentials, has
// every master answer a signed request, so a wrong key fails the run before
// it starts instead of as a consumer that silently receives nothing.
func (t *Target) check(ctx context.Context) error {
	masters, err := t.rem.masters(ctx)
	if err != nil {
		return fmt.Errorf("rocketmq: name servers %s: %w", strings.Join(t.nameServers, ";"), err)
	}
	if len(masters) == 0 {
		return fmt.Errorf("rocketmq: name servers %s know no broker", strings.Join(t.nameServers, ";"))
	}
	if !t.cfg.acl() {
		return nil
	}
	for _, name := range sortedKeys(masters) {
		if _, err := t.rem.maxOffset(ctx, masters[name], probeTopic, 0); err != nil {
			var be *brokerError
			if errors.As(err, &be) {
				return fmt.Errorf("rocketmq: broker %s (%s) refused a request signed with access key %q; check access_key and secret_key: %s",
					name, masters[name], t.cfg.AccessKey, be.remark)
			}
			return fmt.Errorf("rocketmq: broker %s (%s): %w", name, masters[name], err)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	var extra []string
	if t.cfg.embedded() {
		extra = append(extra, "embedded")
	}
	if t.cfg.acl() {
		extra = append(extra, "acl")
	}
	if t.cfg.Namespace != "" {
		extra = append(extra, "namespace "+t.cfg.Namespace)
	}
	s := "rocketmq " + strings.Join(t.nameServers, ";")
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// Close implements drivers.TargetOf. Producers and consumers hold clients of
// their own and should be closed first; the embedded broker stops here.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.rem.close()
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	defer t.removeDir()
	if t.broker != nil && !t.brokerDown {
		if err := t.broker.Close(); err != nil {
			return fmt.Errorf("rocketmq: close embedded broker: %w", err)
		}
	}
	return nil
}

func (t *Target) removeDir() {
	if t.tempDir {
		_ = os.RemoveAll(t.dir)
	}
}

// brokerOptions are the embedded broker's start options; after a first
// start, on the addresses it listened on.
func (t *Target) brokerOptions() embedded.Options {
	o := embedded.Options{Dir: t.dir, AccessKey: t.cfg.AccessKey, SecretKey: t.cfg.SecretKey, DefaultQueues: t.cfg.DefaultQueues}
	if t.broker != nil {
		o.NameServerListen, o.BrokerListen = t.broker.NameServerAddr(), t.broker.BrokerAddr()
	}
	return o
}

var errNotEmbedded = errors.New("rocketmq: the target does not run an embedded broker (nameservers: embedded)")

// StopBroker implements drivers.BrokerController: the embedded name server
// and broker stop, closing every client connection; what was stored stays
// in the broker's directory.
func (t *Target) StopBroker(context.Context) error {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	switch {
	case t.broker == nil:
		return errNotEmbedded
	case t.brokerDown:
		return errors.New("rocketmq: the embedded broker is already stopped")
	}
	t.brokerDown = true
	if err := t.broker.Close(); err != nil {
		return fmt.Errorf("rocketmq: stop embedded broker: %w", err)
	}
	return nil
}

// StartBroker implements drivers.BrokerController: the broker starts again
// on the same addresses and directory, recovering its commit log and
// consumer offsets.
func (t *Target) StartBroker(ctx context.Context) error {
	t.brokerMu.Lock()
	defer t.brokerMu.Unlock()
	switch {
	case t.broker == nil:
		return errNotEmbedded
	case !t.brokerDown:
		return errors.New("rocketmq: the embedded broker is already running")
	}
	b, err := embedded.Start(ctx, t.brokerOptions())
	if err != nil {
		return fmt.Errorf("rocketmq: start embedded broker again: %w", err)
	}
	t.broker, t.brokerDown = b, false
	return nil
}

func (t *Target) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *Target) credentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: t.cfg.AccessKey, SecretKey: t.cfg.SecretKey}
}

var instanceSeq atomic.Int64

// instanceName is unique in the process and across processes on a host: the
// client shares one connection set per IP@instance and the brokers tell group
// members apart by it.
func (t *Target) instanceName(what string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, what)
	return fmt.Sprintf("%s-%d-%s-%d", t.cfg.instancePrefix(), os.Getpid(), clean, instanceSeq.Add(1))
}

// createPoll is how often CreateTopic looks for the new route.
const createPoll = 50 * time.Millisecond

// CreateTopic implements drivers.TopicCreator: it creates the topic, or sets
// the queue count of an existing one, on every master broker (queues are per
// broker, as mqadmin updateTopic -c does), then waits until the name servers
// route it. It speaks the protocol itself because the client's admin API
// neither signs requests nor reports the broker's refusal.
func (t *Target) CreateTopic(ctx context.Context, topic string, queues int) error {
	if t.isClosed() {
		return errClosed
	}
	if queues <= 0 {
		queues = 8
	}
	name := t.cfg.wrap(topic)
	fail := func(err error) error {
		return fmt.Errorf("rocketmq: create topic %s with %d queues: %w", name, queues, err)
	}
	masters, err := t.rem.masters(ctx)
	if err != nil {
		return fail(err)
	}
	for _, b := range sortedKeys(masters) {
		if err := t.rem.createTopic(ctx, masters[b], name, queues); err != nil {
			var be *brokerError
			if errors.As(err, &be) {
				err = fmt.Errorf("broker %s refused: %s (creating topics needs an admin account when ACL is on; or create it beforehand)", b, be.remark)
			}
			return fail(err)
		}
	}
	// Brokers register new topics with the name servers asynchronously.
	for {
		rd, err := t.rem.route(ctx, name)
		if err != nil && !errors.Is(err, errNoTopic) {
			return fail(err)
		}
		if err == nil && routed(rd, masters, queues) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("the name servers do not route it yet: %w", ctx.Err()))
		case <-time.After(createPoll):
		}
	}
}

// routed reports whether every master has the topic with the queue count.
func routed(rd *routeData, masters map[string]string, queues int) bool {
	seen := 0
	for _, q := range rd.QueueDatas {
		if _, ok := masters[q.BrokerName]; ok {
			if q.WriteQueueNums != queues || q.ReadQueueNums != queues {
				return false
			}
			seen++
		}
	}
	return seen == len(masters)
}

// Lag implements drivers.LagReader: over every queue of the topic, the
// broker's max offset minus the group's committed offset (from the queue's
// min offset when the group never committed there). The client commits every
// 5 seconds, with each pull and when a consumer stops.
func (t *Target) Lag(ctx context.Context, topic, group string) (int64, error) {
	if t.isClosed() {
		return 0, errClosed
	}
	topic, group = t.cfg.wrap(topic), t.cfg.wrap(group)
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("rocketmq: lag of group %s on topic %s: %w", group, topic, err)
	}
	rd, err := t.rem.route(ctx, topic)
	if err != nil {
		return fail(err)
	}
	var lag int64
	for _, qd := range rd.QueueDatas {
		addr := rd.brokerAddr(qd.BrokerName)
		if addr == "" {
			return fail(fmt.Errorf("no address for broker %s", qd.BrokerName))
		}
		for q := range qd.ReadQueueNums {
			end, err := t.rem.maxOffset(ctx, addr, topic, q)
			if err != nil {
				return fail(fmt.Errorf("max offset of queue %d: %w", q, err))
			}
			pos, found, err := t.rem.consumerOffset(ctx, addr, group, topic, q)
			if err != nil {
				return fail(fmt.Errorf("offset of queue %d: %w", q, err))
			}
			if !found {
				if pos, err = t.rem.minOffset(ctx, addr, topic, q); err != nil {
					return fail(fmt.Errorf("min offset of queue %d: %w", q, err))
				}
			}
			if d := end - pos; d > 0 {
				lag += d
			}
		}
	}
	return lag, nil
}

// leaveWait bounds how long a closed consumer waits for the brokers to
// notice it left.
const leaveWait = 5 * time.Second

// awaitLeft waits until no broker lists the client instance as a member of
// group. The client commits its offsets on shutdown without waiting for an
// answer, just before closing its connection, and brokers drop the member
// when they read that close; so once it is gone, the commits were read and
// the group's next consumer (or a lag query) sees the final position.
func (t *Target) awaitLeft(group, instance string) {
	if t.isClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveWait)
	defer cancel()
	masters, err := t.rem.masters(ctx)
	if err != nil {
		return
	}
	suffix := "@" + instance
	for _, addr := range masters {
		for {
			ids, err := t.rem.consumers(ctx, addr, t.cfg.wrap(group))
			if err != nil {
				break // best effort: an old broker may not answer
			}
			if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasSuffix(id, suffix) }) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(createPoll):
			}
		}
	}
}

// storedMessages is how many messages the topic's queues hold in all, by
// their max offsets; 0 for a topic that does not exist yet.
func (t *Target) storedMessages(ctx context.Context, topic string) (int64, error) {
	if t.isClosed() {
		return 0, errClosed
	}
	topic = t.cfg.wrap(topic)
	rd, err := t.rem.route(ctx, topic)
	if errors.Is(err, errNoTopic) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for _, qd := range rd.QueueDatas {
		addr := rd.brokerAddr(qd.BrokerName)
		for q := range qd.ReadQueueNums {
			end, err := t.rem.maxOffset(ctx, addr, topic, q)
			if err != nil {
				return 0, err
			}
			n += end
		}
	}
	return n, nil
}
