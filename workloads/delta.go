package workloads

import (
	"fmt"
	"sort"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// AccountingDelta is what one Accounting learnt since its last Delta: the
// messages acknowledged per destination and the messages consumer groups
// received, as serialised bitmaps of sequence numbers per stream. It is
// gob-encodable, so processes that share one run's accounting can ship it;
// applying every process's deltas to one Accounting gives the figures one
// process would have counted (a message acknowledged in one process and
// received in another is accounted once).
type AccountingDelta struct {
	Acks []DestDelta
	Seen []GroupDelta
}

// DestDelta is what was newly acknowledged to one concrete topic.
type DestDelta struct {
	Target, Topic string
	Streams       []StreamSeqs
	// Anonymous counts messages without a header, and their bytes.
	Anonymous, AnonymousBytes int64
}

// GroupDelta is what a consumer group newly received.
type GroupDelta struct {
	Group                     GroupKey
	Streams                   []StreamSeqs
	Anonymous, AnonymousBytes int64
}

// StreamSeqs are sequence numbers of one producer stream.
type StreamSeqs struct {
	Stream uint32
	// Size is the stream's payload size in bytes.
	Size int
	// Seqs is a roaring64 bitmap in its portable serialisation.
	Seqs []byte
}

// Empty reports whether d carries nothing.
func (d AccountingDelta) Empty() bool { return len(d.Acks) == 0 && len(d.Seen) == 0 }

// TrackDeltas makes the accounting remember what it learns from now on, for
// Delta to hand out.
func (a *Accounting) TrackDeltas() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tracking {
		return
	}
	a.tracking = true
	a.resetPendingLocked()
}

func (a *Accounting) resetPendingLocked() {
	a.pendAck = map[destKey]map[uint32]*roaring64.Bitmap{}
	a.pendSeen = map[GroupKey]map[uint32]*roaring64.Bitmap{}
	a.pendAnon.acks = map[destKey][2]int64{}
	a.pendAnon.seen = map[GroupKey][2]int64{}
}

// Delta returns what was acknowledged and received since the previous call
// (or since TrackDeltas), and forgets it. Without TrackDeltas it is empty.
func (a *Accounting) Delta() (AccountingDelta, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var d AccountingDelta
	if !a.tracking {
		return d, nil
	}
	dests := map[destKey]*DestDelta{}
	destOf := func(k destKey) *DestDelta {
		if dd := dests[k]; dd != nil {
			return dd
		}
		dd := &DestDelta{Target: k.target, Topic: k.topic}
		dests[k] = dd
		return dd
	}
	for k, streams := range a.pendAck {
		ss, err := a.streamsLocked(streams)
		if err != nil {
			return AccountingDelta{}, err
		}
		destOf(k).Streams = ss
	}
	for k, n := range a.pendAnon.acks {
		dd := destOf(k)
		dd.Anonymous, dd.AnonymousBytes = n[0], n[1]
	}
	groups := map[GroupKey]*GroupDelta{}
	groupOf := func(k GroupKey) *GroupDelta {
		if gd := groups[k]; gd != nil {
			return gd
		}
		gd := &GroupDelta{Group: k}
		groups[k] = gd
		return gd
	}
	for k, streams := range a.pendSeen {
		ss, err := a.streamsLocked(streams)
		if err != nil {
			return AccountingDelta{}, err
		}
		groupOf(k).Streams = ss
	}
	for k, n := range a.pendAnon.seen {
		gd := groupOf(k)
		gd.Anonymous, gd.AnonymousBytes = n[0], n[1]
	}
	for _, dd := range dests {
		d.Acks = append(d.Acks, *dd)
	}
	for _, gd := range groups {
		d.Seen = append(d.Seen, *gd)
	}
	sort.Slice(d.Acks, func(i, j int) bool {
		return d.Acks[i].Target+"\x00"+d.Acks[i].Topic < d.Acks[j].Target+"\x00"+d.Acks[j].Topic
	})
	sort.Slice(d.Seen, func(i, j int) bool { return groupLess(d.Seen[i].Group, d.Seen[j].Group) })
	a.resetPendingLocked()
	return d, nil
}

func groupLess(a, b GroupKey) bool {
	if a.Target != b.Target {
		return a.Target < b.Target
	}
	if a.Subscription != b.Subscription {
		return a.Subscription < b.Subscription
	}
	return a.Group < b.Group
}

func (a *Accounting) streamsLocked(m map[uint32]*roaring64.Bitmap) ([]StreamSeqs, error) {
	out := make([]StreamSeqs, 0, len(m))
	for s, b := range m {
		b.RunOptimize()
		buf, err := b.ToBytes()
		if err != nil {
			return nil, fmt.Errorf("accounting: serialising stream %d: %w", s, err)
		}
		out = append(out, StreamSeqs{Stream: s, Size: a.sizes[s], Seqs: buf})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

// Apply adds what another process's accounting learnt (its Delta) to this
// one. Groups it does not know yet are created with a subscription that
// matches its own name only, until Group gives their matcher. Messages a
// group receives here and in the delta count as duplicates of the group
// (Stats). It works on whole bitmaps, not message by message: a conductor
// applies every worker's deltas.
func (a *Accounting) Apply(d AccountingDelta) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, dd := range d.Acks {
		k := destKey{dd.Target, dd.Topic}
		for _, s := range dd.Streams {
			b := roaring64.New()
			if err := b.UnmarshalBinary(s.Seqs); err != nil { // a copy: b is changed and merged
				return fmt.Errorf("accounting: acks of %s/%s, stream %d: %w", dd.Target, dd.Topic, s.Stream, err)
			}
			a.ackBitmapLocked(k, s.Stream, b, s.Size)
		}
		if dd.Anonymous != 0 {
			a.ackAnonLocked(k, dd.Anonymous, dd.AnonymousBytes)
		}
	}
	for _, gd := range d.Seen {
		g := a.groupLocked(gd.Group, nil)
		for _, s := range gd.Streams {
			b := roaring64.New()
			if err := b.UnmarshalBinary(s.Seqs); err != nil {
				return fmt.Errorf("accounting: group %s, stream %d: %w", gd.Group.Group, s.Stream, err)
			}
			if _, ok := a.sizes[s.Stream]; !ok {
				a.sizes[s.Stream] = s.Size
			}
			a.seenBitmapLocked(g, s.Stream, b, s.Size)
		}
		if gd.Anonymous != 0 {
			a.seenAnonLocked(g, gd.Anonymous, gd.AnonymousBytes)
		}
	}
	return nil
}

// ackBitmapLocked is ackLocked for every sequence number in b.
func (a *Accounting) ackBitmapLocked(k destKey, stream uint32, b *roaring64.Bitmap, bytes int) {
	a.sizes[stream] = bytes
	d := a.destLocked(k.target, k.topic)
	acked := bitmap(d.acked, stream)
	b.AndNot(acked) // acknowledged twice: a relay forwarding a duplicate
	if b.IsEmpty() {
		return
	}
	d.acked[stream] = union(acked, b, b.GetCardinality())
	for _, g := range d.groups {
		g.expectBitmap(stream, b, bytes)
	}
	if a.tracking {
		bitmap(pendingFor(a.pendAck, d.key), stream).Or(b)
	}
}

// expectBitmap is expect for every sequence number in b.
func (g *Group) expectBitmap(stream uint32, b *roaring64.Bitmap, bytes int) {
	exp := bitmap(g.expected, stream)
	fresh := roaring64.AndNot(b, exp) // not acknowledged to another destination the group reads
	n := int64(fresh.GetCardinality())
	if n == 0 {
		return
	}
	g.expected[stream] = union(exp, fresh, uint64(n))
	g.expectedN += n
	g.expectedB += n * int64(bytes)
	if seen := g.seen[stream]; seen != nil {
		m := int64(fresh.AndCardinality(seen))
		g.matchedN += m
		g.matchedB += m * int64(bytes)
	}
}

// seenBitmapLocked is seenLocked for every sequence number in b.
func (a *Accounting) seenBitmapLocked(g *Group, stream uint32, b *roaring64.Bitmap, bytes int) {
	seen := bitmap(g.seen, stream)
	total := int64(b.GetCardinality())
	b.AndNot(seen)
	n := int64(b.GetCardinality())
	g.duplicates += total - n
	if n == 0 {
		return
	}
	g.seen[stream] = union(seen, b, uint64(n))
	g.distinctN += n
	g.distinctB += n * int64(bytes)
	if e := g.expected[stream]; e != nil {
		m := int64(b.AndCardinality(e))
		g.matchedN += m
		g.matchedB += m * int64(bytes)
	}
	if a.tracking {
		bitmap(pendingFor(a.pendSeen, g.key), stream).Or(b)
	}
}

// smallUnion is the largest number of values union adds to a bitmap in
// place.
const smallUnion = 1024

// union returns dst with the n values of b added. A few are added in place:
// a new bitmap would copy every container of dst, several kilobytes per
// stream for the few sequence numbers a second of an MQTT fleet brings. More
// go into a new bitmap: roaring's in-place union of two run containers adds
// value by value, its union merges the runs.
func union(dst, b *roaring64.Bitmap, n uint64) *roaring64.Bitmap {
	if n <= smallUnion {
		dst.Or(b)
		return dst
	}
	return roaring64.Or(dst, b)
}
