// Package kafka is planrun's Kafka driver, built on github.com/IBM/sarama.
// With brokers: embedded it starts an in-process Kafka-compatible cluster
// (github.com/twmb/franz-go/pkg/kfake) that lives as long as the target.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/planrun/planrun/drivers"
)

func init() {
	// sarama keeps meters and histograms (go-metrics) of every request and
	// message, which planrun never reads: several percent of the CPU of a
	// send. This is the switch sarama documents to turn them off.
	metrics.UseNilMetrics = true
	drivers.Register("kafka", Driver,
		"Apache Kafka through IBM/sarama; brokers: embedded starts franz-go's kfake in process")
}

// Driver opens Kafka targets.
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

// open starts the embedded cluster if asked and checks that the brokers
// answer before any workload starts.
func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	base, err := baseConfig(c)
	if err != nil {
		return nil, err
	}
	t := &Target{cfg: *c, base: base}
	if c.embedded() {
		opts := []kfake.Opt{
			kfake.NumBrokers(1),
			kfake.AllowAutoTopicCreation(),
			kfake.DefaultNumPartitions(embeddedPartitions),
			// Let plans try short session timeouts against the embedded
			// cluster; real brokers default to a 6s minimum.
			kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		}
		if m := strings.ToUpper(c.SASL.Mechanism); m != "" {
			opts = append(opts, kfake.EnableSASL(), kfake.Superuser(m, c.SASL.User, c.SASL.Password))
		}
		// The cluster keeps its log and group offsets in a directory of
		// its own, so that it can be stopped and started again (a broker
		// step) without losing what it acknowledged.
		t.dataDir, err = os.MkdirTemp("", "planrun-kfake-")
		if err != nil {
			return nil, fmt.Errorf("kafka: embedded cluster directory: %w", err)
		}
		t.kfakeOpts = append(opts, kfake.DataDir(t.dataDir))
		t.cluster, err = kfake.NewCluster(t.kfakeOpts...)
		if err != nil {
			_ = os.RemoveAll(t.dataDir)
			return nil, fmt.Errorf("kafka: start embedded cluster: %w", err)
		}
		t.brokers = t.cluster.ListenAddrs()
		t.kfakeOpts = append(t.kfakeOpts, kfake.Ports(listenPort(t.brokers[0])))
	} else {
		t.brokers = c.brokerList()
	}

	// The target's own client serves admin calls (lag, topic creation) and
	// must not create topics just because someone asked about them.
	ac := t.clientConfig()
	ac.Metadata.AllowAutoTopicCreation = false
	err = withContext(ctx, func() error {
		client, err := sarama.NewClient(t.brokers, ac)
		if err != nil {
			return err
		}
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			_ = client.Close()
			return err
		}
		t.mu.Lock()
		t.client, t.admin = client, admin
		t.mu.Unlock()
		return nil
	}, func() {
		// Open gave up waiting: close whatever connected late.
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.admin != nil {
			_ = t.admin.Close()
			t.admin, t.client = nil, nil
		}
	})
	if err != nil {
		if t.cluster != nil {
			t.cluster.Close()
			_ = os.RemoveAll(t.dataDir)
		}
		return nil, fmt.Errorf("kafka: connect to %s: %w%s", strings.Join(t.brokers, ","), configError("target", err), connectHint(err))
	}
	return t, nil
}

// Target is a connected Kafka cluster.
type Target struct {
	cfg     TargetConfig
	base    *sarama.Config
	brokers []string
	cluster *kfake.Cluster // nil unless embedded; replaced under mu by StartBroker

	// The embedded cluster's options (its data directory and port) and
	// whether a broker step stopped it.
	kfakeOpts  []kfake.Opt
	dataDir    string
	brokerDown bool

	mu     sync.Mutex
	client sarama.Client
	admin  sarama.ClusterAdmin
	closed bool
}

// clientConfig returns a fresh copy of the target's sarama settings for one
// client; sarama configs must not be shared between clients that tune them.
func (t *Target) clientConfig() *sarama.Config {
	c := *t.base
	if t.base.Net.TLS.Config != nil {
		c.Net.TLS.Config = t.base.Net.TLS.Config.Clone()
	}
	return &c
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	s := "kafka " + strings.Join(t.brokers, ",")
	var extra []string
	if t.cfg.embedded() {
		extra = append(extra, "embedded kfake")
	} else {
		extra = append(extra, "version "+t.base.Version.String())
	}
	if t.cfg.TLS.Enabled {
		extra = append(extra, "tls")
	}
	if t.cfg.SASL.Mechanism != "" {
		extra = append(extra, "sasl "+strings.ToUpper(t.cfg.SASL.Mechanism))
	}
	return s + " (" + strings.Join(extra, ", ") + ")"
}

// Close implements drivers.TargetOf. Producers and consumers hold clients of
// their own and should be closed first; the embedded cluster stops here.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if t.admin != nil {
		err = t.admin.Close()
	}
	if t.cluster != nil {
		if !t.brokerDown {
			t.cluster.Close()
		}
		_ = os.RemoveAll(t.dataDir)
	}
	if err != nil {
		return fmt.Errorf("kafka: close: %w", err)
	}
	return nil
}

func (t *Target) adminClient() (sarama.ClusterAdmin, sarama.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.admin == nil {
		return nil, nil, errors.New("kafka: target is closed")
	}
	return t.admin, t.client, nil
}

// CreateTopic implements drivers.TopicCreator. A topic that already exists is
// left as it is, whatever its partition count.
func (t *Target) CreateTopic(ctx context.Context, topic string, partitions int) error {
	admin, client, err := t.adminClient()
	if err != nil {
		return err
	}
	d := &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1}
	if partitions > 0 {
		d.NumPartitions = int32(partitions)
	}
	if t.cfg.ReplicationFactor > 0 {
		d.ReplicationFactor = int16(t.cfg.ReplicationFactor)
	}
	err = withContext(ctx, func() error {
		err := admin.CreateTopic(topic, d, false)
		if errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return nil
		}
		if err != nil {
			return err
		}
		// Make the new topic known to the admin client at once so that a
		// lag query right after does not see an unknown topic.
		_ = client.RefreshMetadata(topic)
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("kafka: create topic %s with %d partitions: %w", topic, partitions, err)
	}
	return nil
}

// Lag implements drivers.LagReader: the messages of topic the group has not
// committed yet. A group that never committed a partition is behind by all of
// that partition's retained messages.
func (t *Target) Lag(ctx context.Context, topic, group string) (int64, error) {
	admin, client, err := t.adminClient()
	if err != nil {
		return 0, err
	}
	var lag int64
	err = withContext(ctx, func() error {
		if err := client.RefreshMetadata(topic); err != nil {
			return err
		}
		parts, err := client.Partitions(topic)
		if err != nil {
			return err
		}
		end, err := listOffsets(client, topic, parts, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("end offsets: %w", err)
		}
		committed, err := committedOffsets(admin, topic, group, parts)
		if err != nil {
			return fmt.Errorf("committed offsets: %w", err)
		}
		var start map[int32]int64
		for _, p := range parts {
			pos, ok := committed[p]
			if !ok {
				if start == nil {
					if start, err = listOffsets(client, topic, parts, sarama.OffsetOldest); err != nil {
						return fmt.Errorf("start offsets: %w", err)
					}
				}
				pos = start[p]
			}
			if d := end[p] - pos; d > 0 {
				lag += d
			}
		}
		return nil
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("kafka: lag of group %s on topic %s: %w", group, topic, err)
	}
	return lag, nil
}

// listOffsets asks each partition leader once for the start or end offsets
// of all its partitions of topic.
func listOffsets(client sarama.Client, topic string, parts []int32, at int64) (map[int32]int64, error) {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, p := range parts {
		b, err := client.Leader(topic, p)
		if err != nil {
			return nil, fmt.Errorf("leader of partition %d: %w", p, err)
		}
		r := reqs[b]
		if r == nil {
			r = sarama.NewOffsetRequest(client.Config().Version)
			reqs[b] = r
		}
		r.AddBlock(topic, p, at, 1)
	}
	out := make(map[int32]int64, len(parts))
	for b, r := range reqs {
		resp, err := b.GetAvailableOffsets(r)
		if err != nil {
			return nil, fmt.Errorf("broker %s: %w", b.Addr(), err)
		}
		for _, p := range parts {
			blk := resp.GetBlock(topic, p)
			if blk == nil {
				continue // asked of another broker
			}
			if !errors.Is(blk.Err, sarama.ErrNoError) {
				return nil, fmt.Errorf("partition %d: %w", p, blk.Err)
			}
			if len(blk.Offsets) != 1 {
				return nil, fmt.Errorf("partition %d: %w", p, sarama.ErrIncompleteResponse)
			}
			out[p] = blk.Offsets[0]
		}
	}
	if len(out) != len(parts) {
		return nil, sarama.ErrIncompleteResponse
	}
	return out, nil
}

// committedOffsets returns the group's committed offsets by partition, only
// for partitions with a commit.
func committedOffsets(admin sarama.ClusterAdmin, topic, group string, parts []int32) (map[int32]int64, error) {
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case errors.Is(resp.Err, sarama.ErrNoError):
	case errors.Is(resp.Err, sarama.ErrGroupIDNotFound):
		// Some brokers (kfake) answer so for a group that never committed.
		return nil, nil
	default:
		return nil, resp.Err
	}
	out := map[int32]int64{}
	for _, p := range parts {
		blk := resp.GetBlock(topic, p)
		if blk == nil {
			continue
		}
		if !errors.Is(blk.Err, sarama.ErrNoError) && !errors.Is(blk.Err, sarama.ErrUnknownTopicOrPartition) {
			return nil, fmt.Errorf("partition %d: %w", p, blk.Err)
		}
		if blk.Offset >= 0 {
			out[p] = blk.Offset
		}
	}
	return out, nil
}

// connectHint explains a connection the broker closed without a word, which
// is how a TLS or SASL mismatch (wrong password included) usually shows.
func connectHint(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		return " (the broker closed the connection: check tls and the sasl mechanism, user and password)"
	}
	return ""
}

// withContext runs fn, which cannot be interrupted (sarama calls take no
// context), and stops waiting for it when ctx is done. abandoned, if not nil,
// runs after a late fn finished so its results can be released.
func withContext(ctx context.Context, fn func() error, abandoned func()) error {
	done := make(chan error, 1)
	var mu sync.Mutex
	gaveUp := false
	go func() {
		err := fn()
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if abandoned != nil {
				abandoned()
			}
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case err := <-done: // finished meanwhile
			return err
		default:
			gaveUp = true
			return ctx.Err()
		}
	}
}

// listenPort is the port of a host:port the cluster listens on.
func listenPort(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

var errNotEmbedded = errors.New("kafka: the target does not run an embedded cluster (brokers: embedded)")

// StopBroker implements drivers.BrokerController: the embedded cluster
// closes every client connection and stops; its log and group offsets
// stay in its directory.
func (t *Target) StopBroker(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.cluster == nil:
		return errNotEmbedded
	case t.closed:
		return errors.New("kafka: the target is closed")
	case t.brokerDown:
		return errors.New("kafka: the embedded cluster is already stopped")
	}
	t.brokerDown = true
	t.cluster.Close()
	return nil
}

// StartBroker implements drivers.BrokerController: the cluster starts
// again on the same port from its directory, with every topic, message
// and committed offset it had.
func (t *Target) StartBroker(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.cluster == nil:
		return errNotEmbedded
	case t.closed:
		return errors.New("kafka: the target is closed")
	case !t.brokerDown:
		return errors.New("kafka: the embedded cluster is already running")
	}
	var c *kfake.Cluster
	// The port may take a moment to be free again after the close.
	for {
		var err error
		c, err = kfake.NewCluster(t.kfakeOpts...)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("kafka: start embedded cluster again on %s: %w", t.brokers[0], err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.cluster, t.brokerDown = c, false
	return nil
}
