// Package memory is an in-process broker driver: partitioned topics kept in
// memory, consumer groups with committed offsets and lag. It has no network
// and no protocol; it exists to try plans and test the engine in isolation.
package memory

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planrun/planrun/drivers"
)

func init() {
	drivers.Register("memory", Driver,
		"an in-process broker without network or protocol, for trying a plan's logic in seconds")
}

// Driver opens in-process brokers.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Relay: true, Embedded: true, Lag: true, Topics: true,
})

// Config is a memory target.
type Config struct {
	Partitions int           `yaml:"partitions" default:"4" doc:"partitions of topics created on first use (default 4)"`
	Delay      time.Duration `yaml:"delay" default:"0s" doc:"time each send takes before it is acknowledged (default 0s)"`
	FailEvery  int           `yaml:"fail_every" default:"0" doc:"refuse every Nth send, to try failure handling (default 0 = never)"`
	Capacity   float64       `yaml:"capacity" default:"0" doc:"messages per second the broker serves over all producers: sends queue for a service slot of 1/capacity seconds each, so a higher offered rate shows as growing latency at this rate (default 0 = no limit)"`
	// Faults after the acknowledgement: the Nth message is counted over
	// every send the broker acknowledged, in the order it took them.
	DropEvery      int `yaml:"drop_every" default:"0" doc:"acknowledge every Nth message but never store it: it is lost after the ack, as in a broker crash (default 0 = never)"`
	DuplicateEvery int `yaml:"duplicate_every" default:"0" doc:"store every Nth message twice, so consumers get it again, as after a redelivery (default 0 = never; a dropped message is not duplicated)"`
	ReorderEvery   int `yaml:"reorder_every" default:"0" doc:"store every Nth message after the next message to its partition (or when a producer closes), so consumers get it out of order (default 0 = never; a dropped or duplicated message is not reordered)"`
}

// Check implements drivers.Checker.
func (c *Config) Check() error {
	for _, f := range []struct {
		key string
		n   int
	}{{"fail_every", c.FailEvery}, {"drop_every", c.DropEvery}, {"duplicate_every", c.DuplicateEvery}, {"reorder_every", c.ReorderEvery}} {
		if f.n < 0 {
			return fmt.Errorf("%s must be 0 (never) or a positive count, got %d", f.key, f.n)
		}
	}
	if c.Capacity < 0 {
		return fmt.Errorf("capacity must be 0 (no limit) or more messages per second, got %g", c.Capacity)
	}
	return nil
}

// open starts a fresh broker.
func open(_ context.Context, cfg *Config) (*Broker, error) {
	c := *cfg
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return &Broker{cfg: c, topics: map[string]*topic{}, wake: make(chan struct{})}, nil
}

// Broker is one in-memory broker.
type Broker struct {
	cfg    Config
	mu     sync.Mutex
	topics map[string]*topic
	wake   chan struct{} // closed and replaced on every append
	sends  atomic.Int64
	// slot is when the next send may be served, in nanoseconds since
	// epoch, under a capacity.
	slot atomic.Int64
	// taken counts the sends acknowledged, for drop_every, duplicate_every
	// and reorder_every.
	taken int64
}

type topic struct {
	parts   [][][]byte
	keys    [][][]byte
	held    []*heldMessage     // per partition: a message reorder_every holds back
	offsets map[string][]int64 // group -> committed offset per partition
	owners  map[string]int     // group -> active consumers, for partition assignment
}

// Describe says what this is.
func (b *Broker) Describe() string { return "in-process memory broker" }

func (b *Broker) topicLocked(name string, parts int) *topic {
	t := b.topics[name]
	if t == nil {
		if parts <= 0 {
			parts = b.cfg.Partitions
		}
		t = &topic{parts: make([][][]byte, parts), keys: make([][][]byte, parts), held: make([]*heldMessage, parts), offsets: map[string][]int64{}, owners: map[string]int{}}
		b.topics[name] = t
	}
	return t
}

// CreateTopic creates a topic with n partitions.
func (b *Broker) CreateTopic(_ context.Context, name string, n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topicLocked(name, n)
	return nil
}

// Lag is what the group has not committed yet.
func (b *Broker) Lag(_ context.Context, name, group string) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(name, 0)
	var lag int64
	offs := t.offsets[group]
	for p := range t.parts {
		var o int64
		if offs != nil {
			o = offs[p]
		}
		lag += int64(len(t.parts[p])) - o
	}
	return lag, nil
}

// Close does nothing: memory is freed with the broker.
func (b *Broker) Close() error { return nil }

type producer struct {
	b  *Broker
	rr atomic.Uint64
}

// NewProducer returns a sender.
func (b *Broker) NewProducer(context.Context, drivers.ProducerSpec, *drivers.NoOptions) (drivers.Producer, error) {
	return &producer{b: b}, nil
}

// serve waits for the send's service slot under the capacity: each send
// takes the next slot of 1/capacity seconds, not earlier than now, so the
// broker serves at most capacity sends a second and a backlog waits.
func (b *Broker) serve(ctx context.Context) error {
	if b.cfg.Capacity <= 0 {
		return nil
	}
	service := int64(float64(time.Second) / b.cfg.Capacity)
	var at int64
	for {
		now := time.Now().UnixNano()
		prev := b.slot.Load()
		at = max(prev, now)
		if b.slot.CompareAndSwap(prev, at+service) {
			break
		}
	}
	if wait := time.Duration(at - time.Now().UnixNano()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (p *producer) Send(ctx context.Context, m *drivers.Message) error {
	b := p.b
	if err := b.serve(ctx); err != nil {
		return err
	}
	if b.cfg.Delay > 0 {
		t := time.NewTimer(b.cfg.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if n := b.sends.Add(1); b.cfg.FailEvery > 0 && n%int64(b.cfg.FailEvery) == 0 {
		return fmt.Errorf("refused (fail_every %d)", b.cfg.FailEvery)
	}
	b.mu.Lock()
	t := b.topicLocked(m.Topic, 0)
	var part int
	if m.Key != nil {
		h := fnv.New32a()
		h.Write(m.Key)
		part = int(h.Sum32() % uint32(len(t.parts)))
	} else {
		part = int(p.rr.Add(1) % uint64(len(t.parts)))
	}
	b.storeLocked(t, part, m)
	b.mu.Unlock()
	return nil
}

type heldMessage struct{ key, value []byte }

// storeLocked appends an acknowledged message to a partition, or drops,
// duplicates or holds it back as the fault options say.
func (b *Broker) storeLocked(t *topic, part int, m *drivers.Message) {
	b.taken++
	n := b.taken
	every := func(k int) bool { return k > 0 && n%int64(k) == 0 }
	msg := &heldMessage{key: m.Key, value: append([]byte(nil), m.Value...)}
	switch {
	case every(b.cfg.DropEvery):
		return
	case every(b.cfg.DuplicateEvery):
		t.append(part, msg)
		t.append(part, msg)
	case every(b.cfg.ReorderEvery) && t.held[part] == nil:
		t.held[part] = msg
		return
	default:
		t.append(part, msg)
	}
	if h := t.held[part]; h != nil {
		t.held[part] = nil
		t.append(part, h)
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

func (t *topic) append(part int, m *heldMessage) {
	t.parts[part] = append(t.parts[part], m.value)
	t.keys[part] = append(t.keys[part], m.key)
}

// Close stores the messages reorder_every still holds back.
func (p *producer) Close() error {
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		for part, h := range t.held {
			if h != nil {
				t.held[part] = nil
				t.append(part, h)
			}
		}
	}
	close(b.wake)
	b.wake = make(chan struct{})
	return nil
}

// SetThreads takes any number of senders: sends share nothing per thread.
func (p *producer) SetThreads(int) error { return nil }

type consumer struct {
	b    *Broker
	spec drivers.ConsumerSpec
	mu   sync.Mutex
	pos  []int64
}

// NewConsumer joins a group. Every consumer of a group reads every
// partition from the group's position: use one consumer per group.
func (b *Broker) NewConsumer(_ context.Context, spec drivers.ConsumerSpec, _ *drivers.NoOptions) (drivers.Consumer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(spec.Topic, 0)
	offs := t.offsets[spec.Group]
	if offs == nil {
		offs = make([]int64, len(t.parts))
		if spec.FromLatest {
			for p := range t.parts {
				offs[p] = int64(len(t.parts[p]))
			}
		}
		t.offsets[spec.Group] = offs
	}
	return &consumer{b: b, spec: spec, pos: append([]int64(nil), offs...)}, nil
}

func (c *consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	b := c.b
	for {
		b.mu.Lock()
		t := b.topicLocked(c.spec.Topic, 0)
		wake := b.wake
		var batch []drivers.Message
		c.mu.Lock()
		for p := range t.parts {
			for c.pos[p] < int64(len(t.parts[p])) && len(batch) < 512 {
				o := c.pos[p]
				batch = append(batch, drivers.Message{Topic: c.spec.Topic, Key: t.keys[p][o], Value: t.parts[p][o], Partition: int32(p), Offset: o})
				c.pos[p]++
			}
		}
		c.mu.Unlock()
		b.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
			case <-time.After(100 * time.Millisecond):
				c.commit()
			}
			continue
		}
		now := time.Now()
		for i := range batch {
			batch[i].Received = now
			handle(&batch[i])
			if ctx.Err() != nil {
				// Not handled messages must be read again by the next consumer.
				c.mu.Lock()
				for _, m := range batch[i+1:] {
					c.pos[m.Partition] = min(c.pos[m.Partition], m.Offset)
				}
				c.mu.Unlock()
				c.commit()
				return nil
			}
		}
		c.commit()
	}
}

func (c *consumer) commit() {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	t := c.b.topicLocked(c.spec.Topic, 0)
	c.mu.Lock()
	copy(t.offsets[c.spec.Group], c.pos)
	c.mu.Unlock()
}

func (c *consumer) Close() error {
	c.commit()
	return nil
}
