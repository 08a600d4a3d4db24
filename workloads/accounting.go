package workloads

import (
	"sync"
	"sync/atomic"

	"github.com/planrun/planrun/metrics"
)

// Accounting follows every message of a run from producer ack to consumer
// group, per topic: it is how backlog, lost, duplicated and reordered
// messages are counted without asking the broker.
type Accounting struct {
	run    uint16
	mu     sync.Mutex
	topics map[string]*topicAcct
}

// NewAccounting returns the accounting of the run with id run.
func NewAccounting(run uint16) *Accounting {
	return &Accounting{run: run, topics: map[string]*topicAcct{}}
}

type topicAcct struct {
	acked, ackedBytes atomic.Int64
	mu                sync.Mutex
	groups            map[string]*groupAcct
}

// groupAcct is one consumer group's view of a topic.
type groupAcct struct {
	mu                      sync.Mutex
	seen                    map[uint32]*bitset
	last                    map[[2]uint32]uint64 // (producer, partition) -> highest seq
	distinct, distinctBytes atomic.Int64
}

// Topic returns the accounting of target/topic, creating it.
func (a *Accounting) Topic(target, topic string) *topicAcct {
	key := target + "\x00" + topic
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.topics[key]
	if t == nil {
		t = &topicAcct{groups: map[string]*groupAcct{}}
		a.topics[key] = t
	}
	return t
}

func (t *topicAcct) ack(bytes int) {
	t.acked.Add(1)
	t.ackedBytes.Add(int64(bytes))
}

func (t *topicAcct) group(name string) *groupAcct {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[name]
	if g == nil {
		g = &groupAcct{seen: map[uint32]*bitset{}, last: map[[2]uint32]uint64{}}
		t.groups[name] = g
	}
	return g
}

// backlog is what the group has yet to receive of what was acked.
func (t *topicAcct) backlog(g *groupAcct) metrics.Backlog {
	return metrics.Backlog{
		Messages: max(0, t.acked.Load()-g.distinct.Load()),
		Bytes:    max(0, t.ackedBytes.Load()-g.distinctBytes.Load()),
	}
}

// receive records a message of this run; it returns whether it was a
// duplicate and whether it arrived after a later message of its stream.
func (g *groupAcct) receive(h Header, partition int32, bytes int) (dup, reordered bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	bs := g.seen[h.Producer]
	if bs == nil {
		bs = &bitset{}
		g.seen[h.Producer] = bs
	}
	if !bs.set(h.Seq) {
		return true, false
	}
	g.distinct.Add(1)
	g.distinctBytes.Add(int64(bytes))
	stream := [2]uint32{h.Producer, uint32(partition)}
	if last, ok := g.last[stream]; ok && h.Seq < last {
		reordered = true
	} else {
		g.last[stream] = h.Seq
	}
	return false, reordered
}

// bitset grows as sequence numbers arrive: 1 bit per message sent.
type bitset struct{ words []uint64 }

// set marks i and reports whether it was newly set.
func (b *bitset) set(i uint64) bool {
	w := int(i / 64)
	if w >= len(b.words) {
		n := max(w+1, 2*len(b.words))
		nw := make([]uint64, n)
		copy(nw, b.words)
		b.words = nw
	}
	mask := uint64(1) << (i % 64)
	if b.words[w]&mask != 0 {
		return false
	}
	b.words[w] |= mask
	return true
}
