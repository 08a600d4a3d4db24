package rocketmq

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/units"
)

// Embedded is the nameservers value that starts an in-process name server and broker.
const Embedded = "embedded"

const (
	defaultSendTimeout    = 3 * time.Second
	defaultRetries        = 2 // as the Java client's retryTimesWhenSendFailed
	defaultInstancePrefix = "planrun"
	// maxBatchBytes keeps a batch under the broker's 4 MiB message limit,
	// with room for per-message overhead.
	maxBatchBytes = 4_000_000
)

// TargetConfig is a RocketMQ target's section of a plan.
type TargetConfig struct {
	NameServers    string        `yaml:"nameservers" required:"true" doc:"Name server addresses host:port, separated by ; (as producer.sh -n) or commas, or \"embedded\" to start an in-process name server and broker."`
	AccessKey      string        `yaml:"access_key" doc:"ACL access key (like the benchmark's -a true -ak); requests are signed when access_key and secret_key are set."`
	SecretKey      string        `yaml:"secret_key" secret:"true" doc:"ACL secret key (like -sk)."`
	Namespace      string        `yaml:"namespace" doc:"Namespace prefixed to topics and groups (namespace%topic), as the client's WithNamespace."`
	SendTimeout    time.Duration `yaml:"send_timeout" default:"3s" doc:"How long one send request may wait for the broker's answer (default 3s)."`
	Retries        *int          `yaml:"retries" default:"2" doc:"Times a failed synchronous send is retried (default 2; async sends are not retried by the client)."`
	InstancePrefix string        `yaml:"instance_prefix" default:"planrun" doc:"Prefix of the client instance names, which must differ between clients in one process and between processes (default planrun)."`
	DefaultQueues  int           `yaml:"default_queues" default:"8" doc:"Embedded broker only: queues of topics it creates on first use (default 8)."`
	Dir            string        `yaml:"dir" doc:"Embedded broker only: directory for its commit log and offsets (default: a temporary directory removed on close). A large backlog needs the disk space."`
}

// ProduceOptions are the RocketMQ fields of a workload's produce section.
type ProduceOptions struct {
	Mode         string     `yaml:"mode" default:"sync" doc:"sync (default): each send waits for the broker's answer (SendSync); async: SendAsync, the sending thread waits for the callback; oneway: SendOneWay, a send is done once written to the connection (no acknowledgement, so latency is only the write)."`
	Batch        int        `yaml:"batch" doc:"Up to this many concurrently sent messages travel in one batch request (0 or 1: one message per request). Batches form from whatever the threads have queued, without waiting; threads/batch requests are in flight at once."`
	Tags         string     `yaml:"tags" doc:"Tag set on every message, for consumers' tag filters."`
	CompressOver units.Size `yaml:"compress_over" default:"4KiB" doc:"Bodies larger than this are compressed by the client (default 4KiB, the client's default; batches are never compressed)."`
}

// ConsumeOptions are the RocketMQ fields of a workload's consume section.
type ConsumeOptions struct {
	Tags                  string        `yaml:"tags" default:"*" doc:"Tag filter expression, for example TagA || TagB (default *, every message)."`
	MaxBatch              int           `yaml:"max_batch" default:"1" doc:"Messages handed over per consume call (1-1024, default 1)."`
	PullBatchSize         int           `yaml:"pull_batch_size" default:"32" doc:"Messages asked for per pull request and queue (1-1024, default 32)."`
	ConsumeGoroutines     int           `yaml:"consume_goroutines" default:"20" doc:"Consume calls running at once per consumer (default 20)."`
	PullThresholdForTopic int           `yaml:"pull_threshold_for_topic" default:"102400" doc:"Messages a consumer caches across its queues before it pauses pulling (default 102400, the client's)."`
	PullInterval          time.Duration `yaml:"pull_interval" default:"0s" doc:"Pause between pulls of one queue (default 0)."`
}

// nameServerList splits the nameservers field.
func (c *TargetConfig) nameServerList() []string {
	var out []string
	for _, s := range strings.FieldsFunc(c.NameServers, func(r rune) bool { return r == ';' || r == ',' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// RunsEmbedded implements drivers.EmbeddedConfig.
func (c *TargetConfig) RunsEmbedded() bool { return c.embedded() }

func (c *TargetConfig) embedded() bool {
	return strings.EqualFold(strings.TrimSpace(c.NameServers), Embedded)
}

func (c *TargetConfig) acl() bool { return c.AccessKey != "" }

func (c *TargetConfig) retries() int {
	if c.Retries == nil {
		return defaultRetries
	}
	return *c.Retries
}

func (c *TargetConfig) sendTimeout() time.Duration {
	if c.SendTimeout == 0 {
		return defaultSendTimeout
	}
	return c.SendTimeout
}

func (c *TargetConfig) instancePrefix() string {
	if c.InstancePrefix == "" {
		return defaultInstancePrefix
	}
	return c.InstancePrefix
}

// wrap applies the namespace the way the client does to topics and groups.
func (c *TargetConfig) wrap(name string) string {
	if c.Namespace == "" {
		return name
	}
	return c.Namespace + "%" + name
}

// nameRE is what RocketMQ accepts in topic, group and instance names.
var nameRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]+$`)

var (
	_ drivers.Checker = (*TargetConfig)(nil)
	_ drivers.Checker = (*ProduceOptions)(nil)
	_ drivers.Checker = (*ConsumeOptions)(nil)
)

// Check implements drivers.Checker.
func (c *TargetConfig) Check() error {
	if strings.TrimSpace(c.NameServers) == "" {
		return errors.New(`rocketmq: nameservers is empty; give host:port[;host:port...] or "embedded"`)
	}
	if !c.embedded() {
		for _, s := range c.nameServerList() {
			if _, _, err := net.SplitHostPort(s); err != nil {
				return fmt.Errorf("rocketmq: name server %q: write host:port", s)
			}
		}
		if c.DefaultQueues != 0 || c.Dir != "" {
			return errors.New("rocketmq: default_queues and dir only apply to nameservers: embedded")
		}
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("rocketmq: access_key and secret_key go together; give both or neither")
	}
	if c.SendTimeout < 0 || (c.SendTimeout > 0 && c.SendTimeout < time.Millisecond) {
		return fmt.Errorf("rocketmq: send_timeout %s must be at least 1ms", c.SendTimeout)
	}
	if c.Retries != nil && (*c.Retries < 0 || *c.Retries > 100) {
		return fmt.Errorf("rocketmq: retries must be from 0 to 100, got %d", *c.Retries)
	}
	if c.InstancePrefix != "" && !nameRE.MatchString(c.InstancePrefix) {
		return fmt.Errorf("rocketmq: instance_prefix %q: use letters, digits, _ and -", c.InstancePrefix)
	}
	if c.Namespace != "" && !nameRE.MatchString(c.Namespace) {
		return fmt.Errorf("rocketmq: namespace %q: use letters, digits, _ and -", c.Namespace)
	}
	if c.DefaultQueues < 0 || c.DefaultQueues > 1024 {
		return fmt.Errorf("rocketmq: default_queues must be from 1 to 1024, got %d", c.DefaultQueues)
	}
	return nil
}

const (
	modeSync   = "sync"
	modeAsync  = "async"
	modeOneway = "oneway"
)

func modeOf(s string) (string, error) {
	switch strings.ToLower(s) {
	case "", modeSync:
		return modeSync, nil
	case modeAsync:
		return modeAsync, nil
	case modeOneway, "one_way":
		return modeOneway, nil
	}
	return "", fmt.Errorf("rocketmq: mode %q: use sync, async or oneway", s)
}

// Check implements drivers.Checker.
func (o *ProduceOptions) Check() error {
	if _, err := modeOf(o.Mode); err != nil {
		return err
	}
	if o.Batch < 0 || o.Batch > 1024 {
		return fmt.Errorf("rocketmq: batch must be from 0 to 1024 messages, got %d", o.Batch)
	}
	if o.CompressOver < 0 || o.CompressOver > 1<<31-1 {
		return fmt.Errorf("rocketmq: compress_over %s is out of range", o.CompressOver)
	}
	if strings.ContainsAny(o.Tags, "|*") {
		return fmt.Errorf("rocketmq: tags %q: a message carries one tag, without | or *", o.Tags)
	}
	return nil
}

// Check implements drivers.Checker.
func (o *ConsumeOptions) Check() error {
	switch {
	case o.MaxBatch < 0 || o.MaxBatch > 1024:
		return fmt.Errorf("rocketmq: max_batch must be from 1 to 1024, got %d", o.MaxBatch)
	case o.PullBatchSize < 0 || o.PullBatchSize > 1024:
		return fmt.Errorf("rocketmq: pull_batch_size must be from 1 to 1024, got %d", o.PullBatchSize)
	case o.ConsumeGoroutines < 0 || o.ConsumeGoroutines > 100000:
		return fmt.Errorf("rocketmq: consume_goroutines must be from 1 to 100000, got %d", o.ConsumeGoroutines)
	case o.PullThresholdForTopic < 0 || o.PullThresholdForTopic > 6553500:
		return fmt.Errorf("rocketmq: pull_threshold_for_topic must be from 1 to 6553500, got %d", o.PullThresholdForTopic)
	case o.PullInterval < 0 || o.PullInterval > 65535*time.Millisecond:
		return fmt.Errorf("rocketmq: pull_interval %s must be from 0 to 65.535s", o.PullInterval)
	}
	return nil
}
