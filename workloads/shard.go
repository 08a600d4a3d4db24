package workloads

import (
	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// Sharding a workload over worker processes: each of n shards gets a part
// of what can be split (threads, rate, count, consumers, the driver's
// clients), so that the shards together do what the workload does in one
// process.

// Shards is how many of n worker processes a workload's section can use:
// a count of 5 messages gives at most 5 shards, a consumer group of 2
// consumers 2, and a kind this file does not know runs whole on one.
func Shards(sec Section, n int) int {
	if n < 1 {
		return 0
	}
	switch s := sec.(type) {
	case *ProduceSection:
		if s.Spec.Count > 0 {
			n = int(min(int64(n), s.Spec.Count))
		}
		if c, ok := s.Opts.(drivers.Shardable); ok {
			if units := c.ShardUnits(); units > 0 {
				n = min(n, units)
			}
		}
		return n
	case *ConsumeSection:
		return min(n, max(s.Spec.Consumers, 1))
	case *ConnectSection:
		if c, ok := s.Opts.(drivers.Shardable); ok {
			return min(n, max(c.ShardUnits(), 1))
		}
		return 1
	}
	return 1
}

// Shard returns the section of shard i of n (0 <= i < n <= Shards). The
// section's own spec and driver options are copied, never changed.
// Counts that end a receiving workload (consume and relay count) are left
// out of the shards: whoever merges the shards' figures stops them all
// when the merged count is reached (see StopCount).
func Shard(sec Section, i, n int) Section {
	switch s := sec.(type) {
	case *ProduceSection:
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
	case *ConsumeSection:
		c := *s
		base, cons := drivers.Split(max(s.Spec.Consumers, 1), i, n)
		c.Spec.Consumers, c.Spec.InstanceBase = max(cons, 1), base
		c.Spec.Count = 0
		return &c
	case *RelaySection:
		c := *s
		c.Spec.Count = 0
		return &c
	case *ConnectSection:
		c := *s
		c.Opts = shardOpts(s.Opts, drivers.Part{Index: i, Of: n})
		return &c
	}
	return sec
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

// Receives names the topic and group whose backlog a receiving workload
// reports, with the target it reads from.
func Receives(sec Section, workload, target string) (tgt, topic, group string, ok bool) {
	switch s := sec.(type) {
	case *ConsumeSection:
		g := s.Spec.Group
		if g == "" {
			g = workload
		}
		return target, s.Spec.Topic, g, true
	case *RelaySection:
		g := s.From.Group
		if g == "" {
			g = workload
		}
		return target, s.From.Topic, g, true
	}
	return "", "", "", false
}

// AcctTotals are the accounting's counts of one process: what was acked
// per topic and what each group received of it, distinct messages only.
type AcctTotals struct {
	Topics map[string]TopicTotals // key: target + "\x00" + topic
}

// TopicTotals are one topic's counts.
type TopicTotals struct {
	Acked, AckedBytes int64
	Groups            map[string]GroupTotals
}

// GroupTotals are what one group received of a topic, distinct messages.
type GroupTotals struct {
	Distinct, DistinctBytes int64
}

// Totals reads the accounting's counts.
func (a *Accounting) Totals() AcctTotals {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := AcctTotals{Topics: make(map[string]TopicTotals, len(a.topics))}
	for k, t := range a.topics {
		tt := TopicTotals{Acked: t.acked.Load(), AckedBytes: t.ackedBytes.Load(), Groups: map[string]GroupTotals{}}
		t.mu.Lock()
		for name, g := range t.groups {
			tt.Groups[name] = GroupTotals{Distinct: g.distinct.Load(), DistinctBytes: g.distinctBytes.Load()}
		}
		t.mu.Unlock()
		out.Topics[k] = tt
	}
	return out
}

// Sub returns what changed from prev to t.
func (t AcctTotals) Sub(prev AcctTotals) AcctTotals {
	out := AcctTotals{Topics: map[string]TopicTotals{}}
	for k, tt := range t.Topics {
		p := prev.Topics[k]
		d := TopicTotals{Acked: tt.Acked - p.Acked, AckedBytes: tt.AckedBytes - p.AckedBytes, Groups: map[string]GroupTotals{}}
		changed := d.Acked != 0 || d.AckedBytes != 0
		for name, g := range tt.Groups {
			pg := p.Groups[name]
			dg := GroupTotals{Distinct: g.Distinct - pg.Distinct, DistinctBytes: g.DistinctBytes - pg.DistinctBytes}
			if dg != (GroupTotals{}) {
				d.Groups[name] = dg
				changed = true
			}
		}
		if changed {
			out.Topics[k] = d
		}
	}
	return out
}

// Add adds counts taken in another process (the delta of its Totals).
func (a *Accounting) Add(d AcctTotals) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, dt := range d.Topics {
		t := a.topics[k]
		if t == nil {
			t = &topicAcct{groups: map[string]*groupAcct{}}
			a.topics[k] = t
		}
		t.acked.Add(dt.Acked)
		t.ackedBytes.Add(dt.AckedBytes)
		for name, dg := range dt.Groups {
			g := t.group(name)
			g.distinct.Add(dg.Distinct)
			g.distinctBytes.Add(dg.DistinctBytes)
		}
	}
}

// Backlog is what group has yet to receive of what was acked to
// target/topic.
func (a *Accounting) Backlog(target, topic, group string) metrics.Backlog {
	t := a.Topic(target, topic)
	return t.backlog(t.group(group))
}
