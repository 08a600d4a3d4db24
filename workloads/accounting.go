package workloads

import (
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/planrun/planrun/metrics"
)

// Accounting follows every message of a run by its identity, the producer
// stream and sequence number in its header: what was acknowledged is kept
// per destination (target and concrete topic), and a consumer group expects
// what was acknowledged to every destination its subscription matches. This
// is how backlog, lost, duplicated and reordered messages are counted
// without asking the broker, exactly also for templated topics, wildcard
// and shared subscriptions and relays. Sequence numbers are kept in
// compressed bitmaps: about one bit per message and bitmap at worst, far
// less for the dense runs producers send.
//
// Messages too short for a full header have no identity: they are counted,
// not followed (a group expects as many as were acknowledged to what it
// subscribes to).
type Accounting struct {
	run    uint16
	mu     sync.Mutex
	dests  map[destKey]*Dest
	groups map[GroupKey]*Group
	sizes  map[uint32]int // payload size per stream: every stream sends one size

	tracking bool
	pendAck  map[destKey]map[uint32]*roaring64.Bitmap
	pendSeen map[GroupKey]map[uint32]*roaring64.Bitmap
	pendAnon struct { // count and bytes
		acks map[destKey][2]int64
		seen map[GroupKey][2]int64
	}
}

type destKey struct{ target, topic string }

// NewAccounting returns the accounting of the run with id run.
func NewAccounting(run uint16) *Accounting {
	return &Accounting{run: run, dests: map[destKey]*Dest{}, groups: map[GroupKey]*Group{}, sizes: map[uint32]int{}}
}

// Dest is what was acknowledged to one concrete topic of one target.
type Dest struct {
	key    destKey
	acked  map[uint32]*roaring64.Bitmap
	anon   int64
	groups []*Group // the groups whose subscription matches
}

// GroupKey names a consumer group: the target it reads from, its
// subscription as the plan writes it and the group's name.
type GroupKey struct{ Target, Subscription, Group string }

// Group is one consumer group's view of what it should receive.
type Group struct {
	key   GroupKey
	match func(topic string) bool
	// expected holds every message acknowledged to a matching destination;
	// seen every message received. matched counts those in both.
	expected, seen           map[uint32]*roaring64.Bitmap
	expectedN, expectedB     int64
	matchedN, matchedB       int64
	distinctN, distinctB     int64
	duplicates               int64
	anonExpected, anonSeen   int64
	anonExpectedB, anonSeenB int64
	last                     map[[2]uint32]uint64 // (producer, partition) -> highest seq
	// lost is how many of the messages not received the run proved lost
	// when the group's workloads last stopped (see Settle); active counts
	// the group's running workloads.
	lost   int64
	active int
}

// GroupStats are a group's figures.
type GroupStats struct {
	Expected, Received, Duplicates int64
	Backlog                        metrics.Backlog
}

// Group returns the group key, creating it. match says which concrete
// topics the subscription covers; nil means the topic named by the
// subscription alone.
func (a *Accounting) Group(key GroupKey, match func(topic string) bool) *Group {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.groupLocked(key, match)
}

func (a *Accounting) groupLocked(key GroupKey, match func(topic string) bool) *Group {
	g := a.groups[key]
	if g != nil && (match == nil || g.match != nil) {
		return g
	}
	if g == nil {
		g = &Group{key: key, expected: map[uint32]*roaring64.Bitmap{}, seen: map[uint32]*roaring64.Bitmap{}, last: map[[2]uint32]uint64{}}
		a.groups[key] = g
	}
	g.match = match
	// What was acknowledged before the group existed is expected too.
	for _, d := range a.dests {
		if !g.covers(d.key) || containsGroup(d.groups, g) {
			continue
		}
		d.groups = append(d.groups, g)
		for s, bm := range d.acked {
			it := bm.Iterator()
			for it.HasNext() {
				g.expect(s, it.Next(), a.sizes[s])
			}
		}
		g.anonExpected += d.anon
	}
	return g
}

func containsGroup(gs []*Group, g *Group) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// Key names the group.
func (g *Group) Key() GroupKey { return g.key }

func (g *Group) covers(d destKey) bool {
	if d.target != g.key.Target {
		return false
	}
	if g.match == nil {
		return d.topic == g.key.Subscription
	}
	return g.match(d.topic)
}

func (a *Accounting) destLocked(target, topic string) *Dest {
	k := destKey{target, topic}
	d := a.dests[k]
	if d == nil {
		d = &Dest{key: k, acked: map[uint32]*roaring64.Bitmap{}}
		for _, g := range a.groups {
			if g.covers(k) {
				d.groups = append(d.groups, g)
			}
		}
		a.dests[k] = d
	}
	return d
}

func bitmap(m map[uint32]*roaring64.Bitmap, s uint32) *roaring64.Bitmap {
	b := m[s]
	if b == nil {
		b = roaring64.New()
		m[s] = b
	}
	return b
}

// Ack records that the broker of target acknowledged a message to the
// concrete topic; h is its header when it has one (ok).
func (a *Accounting) Ack(target, topic string, h Header, ok bool, bytes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok || h.Run != a.run {
		a.ackAnonLocked(destKey{target, topic}, 1, int64(bytes))
		return
	}
	a.ackLocked(target, topic, h.Producer, h.Seq, bytes)
}

func (a *Accounting) ackAnonLocked(k destKey, n, bytes int64) {
	d := a.destLocked(k.target, k.topic)
	d.anon += n
	for _, g := range d.groups {
		g.anonExpected += n
		g.anonExpectedB += bytes
	}
	if a.tracking {
		p := a.pendAnon.acks[k]
		a.pendAnon.acks[k] = [2]int64{p[0] + n, p[1] + bytes}
	}
}

func (a *Accounting) ackLocked(target, topic string, stream uint32, seq uint64, bytes int) {
	a.ackSeqLocked(a.destLocked(target, topic), stream, seq, bytes)
}

func (a *Accounting) ackSeqLocked(d *Dest, stream uint32, seq uint64, bytes int) {
	if !a.ackDestLocked(d, stream, seq, bytes) {
		return // acknowledged twice (a relay forwarding a duplicate)
	}
	for _, g := range d.groups {
		g.expect(stream, seq, bytes)
	}
}

// ackDestLocked records the acknowledgement at its destination only (its
// groups expect it elsewhere) and reports whether it was new there.
func (a *Accounting) ackDestLocked(d *Dest, stream uint32, seq uint64, bytes int) bool {
	a.sizes[stream] = bytes
	if !bitmap(d.acked, stream).CheckedAdd(seq) {
		return false
	}
	if a.tracking {
		bitmap(pendingFor(a.pendAck, d.key), stream).Add(seq)
	}
	return true
}

func pendingFor[K comparable](m map[K]map[uint32]*roaring64.Bitmap, k K) map[uint32]*roaring64.Bitmap {
	s := m[k]
	if s == nil {
		s = map[uint32]*roaring64.Bitmap{}
		m[k] = s
	}
	return s
}

func (g *Group) expect(stream uint32, seq uint64, bytes int) {
	if !bitmap(g.expected, stream).CheckedAdd(seq) {
		return // acknowledged to two destinations the group reads
	}
	g.expectedN++
	g.expectedB += int64(bytes)
	if s := g.seen[stream]; s != nil && s.Contains(seq) {
		g.matchedN++
		g.matchedB += int64(bytes)
	}
}

// Receive records a message the group got; h is its header when it has
// one of this run (ok). It returns whether it was a duplicate and whether
// it arrived after a later message of its stream and partition.
func (a *Accounting) Receive(g *Group, h Header, ok bool, partition int32, bytes int) (dup, reordered bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok || h.Run != a.run {
		a.seenAnonLocked(g, 1, int64(bytes))
		return false, false
	}
	if !a.seenLocked(g, h.Producer, h.Seq, bytes) {
		return true, false
	}
	stream := [2]uint32{h.Producer, uint32(partition)}
	if last, ok := g.last[stream]; ok && h.Seq < last {
		reordered = true
	} else {
		g.last[stream] = h.Seq
	}
	return false, reordered
}

func (a *Accounting) seenAnonLocked(g *Group, n, bytes int64) {
	g.anonSeen += n
	g.anonSeenB += bytes
	if a.tracking {
		p := a.pendAnon.seen[g.key]
		a.pendAnon.seen[g.key] = [2]int64{p[0] + n, p[1] + bytes}
	}
}

// seenLocked marks a message seen by g and reports whether it was new.
func (a *Accounting) seenLocked(g *Group, stream uint32, seq uint64, bytes int) bool {
	if !bitmap(g.seen, stream).CheckedAdd(seq) {
		g.duplicates++
		return false
	}
	g.distinctN++
	g.distinctB += int64(bytes)
	if _, ok := a.sizes[stream]; !ok {
		// A stream sent by another process: its deltas carry the size.
		a.sizes[stream] = bytes
	}
	if e := g.expected[stream]; e != nil && e.Contains(seq) {
		g.matchedN++
		g.matchedB += int64(bytes)
	}
	if a.tracking {
		bitmap(pendingFor(a.pendSeen, g.key), stream).Add(seq)
	}
	return true
}

// Backlog is what the group has yet to receive of what was acknowledged to
// the topics it subscribes to.
func (a *Accounting) Backlog(g *Group) metrics.Backlog {
	a.mu.Lock()
	defer a.mu.Unlock()
	return g.backlogLocked()
}

func (g *Group) backlogLocked() metrics.Backlog {
	return metrics.Backlog{
		Messages: g.expectedN - g.matchedN + max(0, g.anonExpected-g.anonSeen),
		Bytes:    g.expectedB - g.matchedB + max(0, g.anonExpectedB-g.anonSeenB),
	}
}

// Lost is how many of the messages the group has not received are
// proven lost (see Settle); the rest of its backlog is in flight.
func (a *Accounting) Lost(g *Group) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return min(g.lost, g.backlogLocked().Messages)
}

// Join counts a workload of the group starting (n = 1) or stopping (n = -1).
func (a *Accounting) Join(g *Group, n int) {
	a.mu.Lock()
	g.active += n
	a.mu.Unlock()
}

// Settle decides, once the last workload of the group has stopped, how many
// of the messages the group has not received are lost rather than in
// flight. Two proofs hold:
//   - the broker's own count: lag, when given, reads how many messages the
//     broker still holds for the group (its consumers have committed their
//     position). What the group misses beyond that count is no longer in the
//     broker: lost = missing - lag, a lower bound when the topic also holds
//     other messages or duplicates. It is read after the missing messages
//     are counted, so a message acknowledged in between can only make the
//     count larger, never turn a message in flight into a lost one.
//   - gaps, for brokers without such a count and only after a drain that
//     ended with nothing more arriving (gaps true): a message is lost when a
//     later message of its sending thread (a higher sequence number) was
//     received. Brokers that keep partitions and can fall behind per
//     partition (Kafka, RocketMQ, memory) give a count instead, so a lagging
//     consumer's backlog is never called lost.
//
// Without either proof the previous figure stays (what was proven lost
// stays lost) and everything else missing is in flight.
func (a *Accounting) Settle(g *Group, gaps bool, lag func() (int64, bool)) {
	a.mu.Lock()
	if g.active > 0 {
		a.mu.Unlock()
		return // another workload of the group still receives
	}
	missing := g.backlogLocked().Messages
	var gapped int64
	if gaps && lag == nil {
		gapped = g.gapsLocked()
	}
	a.mu.Unlock()
	lost, proven := int64(0), false
	if lag != nil {
		if n, ok := lag(); ok {
			lost, proven = max(0, missing-n), true
		}
	} else if gaps {
		lost, proven = gapped, true
	}
	if !proven {
		return
	}
	a.mu.Lock()
	g.lost = lost
	a.mu.Unlock()
}

// gapsLocked counts the messages the group expected and did not receive
// whose sending thread had a later message received.
func (g *Group) gapsLocked() int64 {
	var n int64
	for s, exp := range g.expected {
		seen := g.seen[s]
		if seen == nil || seen.IsEmpty() {
			continue
		}
		n += int64(roaring64.AndNot(exp, seen).Rank(seen.Maximum()))
	}
	return n
}

// Stats returns the figures of the group key (zero if it is unknown).
func (a *Accounting) Stats(key GroupKey) GroupStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[key]
	if g == nil {
		return GroupStats{}
	}
	return GroupStats{Expected: g.expectedN + g.anonExpected, Received: g.distinctN + g.anonSeen,
		Duplicates: g.duplicates, Backlog: g.backlogLocked()}
}

// Acked returns how many distinct messages were acknowledged to target's
// concrete topic.
func (a *Accounting) Acked(target, topic string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.dests[destKey{target, topic}]
	if d == nil {
		return 0
	}
	n := d.anon
	for _, b := range d.acked {
		n += int64(b.GetCardinality())
	}
	return n
}

// MemoryBytes is the size of every bitmap the accounting holds, serialised.
func (a *Accounting) MemoryBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	add := func(m map[uint32]*roaring64.Bitmap) {
		for _, b := range m {
			b.RunOptimize()
			n += int64(b.GetSizeInBytes())
		}
	}
	for _, d := range a.dests {
		add(d.acked)
	}
	for _, g := range a.groups {
		add(g.expected)
		add(g.seen)
	}
	return n
}
