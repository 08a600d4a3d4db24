package workloads

import (
	"github.com/planrun/planrun/drivers"
)

// Sharding a workload over worker processes: each of n shards gets a part
// of what can be split (threads, rate, count, consumers, the driver's
// clients), so that the shards together do what the workload does in one
// process.

// Sharder is how a kind's section splits over worker processes. Every
// registered kind's section implements it (a test walks the registry), so
// a new kind is split, or kept whole on one worker, on purpose.
type Sharder interface {
	// Shards is how many of n (>= 1) worker processes the section can
	// use, at least 1: a count of 5 messages gives at most 5 shards, a
	// consumer group of 2 consumers 2; 1 keeps it whole on one worker.
	Shards(n int) int
	// Shard returns the section of shard i of n (0 <= i < n <= Shards).
	// The section's own spec and driver options are copied, never
	// changed. Counts that end a receiving workload (consume and relay
	// count) are left out of the shards: whoever merges the shards'
	// figures stops them all when the merged count is reached (see
	// StopCount).
	Shard(i, n int) Section
}

// Shards is how many of n worker processes a workload's section can use;
// a section that does not say runs whole on one.
func Shards(sec Section, n int) int {
	if n < 1 {
		return 0
	}
	if s, ok := sec.(Sharder); ok {
		return s.Shards(n)
	}
	return 1
}

// Shard returns the section of shard i of n (0 <= i < n <= Shards).
func Shard(sec Section, i, n int) Section {
	if s, ok := sec.(Sharder); ok {
		return s.Shard(i, n)
	}
	return sec
}

// Shards splits a producer by its count and the driver's clients.
func (s *ProduceSection) Shards(n int) int {
	if s.Spec.Count > 0 {
		n = int(min(int64(n), s.Spec.Count))
	}
	if c, ok := s.Opts.(drivers.Shardable); ok {
		if units := c.ShardUnits(); units > 0 {
			n = min(n, units)
		}
	}
	return n
}

// Shard gives shard i its share of threads, rate and count (as evenly as
// possible, remainders to the lowest indices) and of the driver's clients,
// numbered where the shard's threads start.
func (s *ProduceSection) Shard(i, n int) Section {
	c := *s
	base, threads := drivers.Split(max(s.Spec.Threads, 1), i, n)
	c.Spec.Threads = max(threads, 1)
	c.Spec.Rate = s.Spec.Rate.Scaled(1 / float64(n))
	if s.Spec.Count > 0 {
		_, cnt := drivers.Split(int(s.Spec.Count), i, n)
		c.Spec.Count = int64(cnt)
	}
	c.Opts = shardOpts(s.Opts, drivers.Part{Index: i, Of: n, ThreadBase: base, Threads: c.Spec.Threads})
	return &c
}

// Shards splits a consumer group by its consumers.
func (s *ConsumeSection) Shards(n int) int { return min(n, max(s.Spec.Consumers, 1)) }

// Shard gives shard i its share of the group's consumers, numbered where
// they start in the group.
func (s *ConsumeSection) Shard(i, n int) Section {
	c := *s
	base, cons := drivers.Split(max(s.Spec.Consumers, 1), i, n)
	c.Spec.Consumers, c.Spec.InstanceBase = max(cons, 1), base
	c.Spec.Count = 0
	return &c
}

// Shards keeps a relay whole on one worker: its one receiver and its
// threads stay together.
func (s *RelaySection) Shards(int) int { return 1 }

// Shard is the relay itself, without the count that ends it.
func (s *RelaySection) Shard(int, int) Section {
	c := *s
	c.Spec.Count = 0
	return &c
}

// Shards splits held connections by the driver's clients; a driver that
// cannot split them keeps them on one worker.
func (s *ConnectSection) Shards(n int) int {
	if c, ok := s.Opts.(drivers.Shardable); ok {
		return min(n, max(c.ShardUnits(), 1))
	}
	return 1
}

// Shard gives shard i its share of the driver's clients.
func (s *ConnectSection) Shard(i, n int) Section {
	c := *s
	c.Opts = shardOpts(s.Opts, drivers.Part{Index: i, Of: n})
	return &c
}

func shardOpts(opts any, p drivers.Part) any {
	if s, ok := opts.(drivers.Shardable); ok && p.Of > 1 {
		return s.Shard(p)
	}
	return opts
}

// StopCount is the count after which a receiving workload stops (consume
// and relay count), 0 for none.
func StopCount(sec Section) int64 {
	switch s := sec.(type) {
	case *ConsumeSection:
		return s.Spec.Count
	case *RelaySection:
		return s.Spec.Count
	}
	return 0
}

// ReceiveGroup is the accounting group a receiving workload (consume or
// relay) counts into, as its own build makes it: a conductor merging the
// shards' accounting reads backlog, loss and duplicates from it.
func ReceiveGroup(a *Accounting, sec Section, workload, targetName string, targets func(string) drivers.Target) (*Group, bool) {
	var spec drivers.ConsumerSpec
	switch s := sec.(type) {
	case *ConsumeSection:
		spec = drivers.ConsumerSpec{Workload: workload, Topic: s.Spec.Topic, Group: s.Spec.Group, Options: s.Opts}
	case *RelaySection:
		spec = drivers.ConsumerSpec{Workload: workload, Topic: s.From.Topic, Group: s.From.Group, Options: s.FromOpts}
	default:
		return nil, false
	}
	if spec.Group == "" {
		spec.Group = workload
	}
	return subscribe(a, targets(targetName), targetName, spec), true
}
