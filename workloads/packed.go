package workloads

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// PackedDelta is what an Accounting learnt since its last delta (as
// AccountingDelta) in the compact form processes ship to each other during
// a run. Destinations (target and concrete topic) and consumer groups are
// numbered once per run: a delta names only those numbered since the
// previous one, and refers to every other by its number. Sequence numbers
// travel as ranges: per producer stream, the runs of consecutive sequence
// numbers, each with the number of its destination. A producer sending to
// one topic costs one range per stream and delta whatever its rate; a fleet
// whose sending thread spreads consecutive messages over N client topics
// costs one range per message (about 4 bytes, the topic's number included),
// whatever N is. It is gob-encodable.
type PackedDelta struct {
	// DestBase and GroupBase are how many destinations and groups the
	// packer had numbered before this delta: the unpacker checks them
	// against its own dictionary, so a delta out of order is an error, not
	// wrong counts.
	DestBase, GroupBase int
	// Dests and Groups are numbered from DestBase and GroupBase on.
	Dests  []DestName
	Groups []GroupKey
	// Sizes are the payload sizes of the streams this delta mentions whose
	// size the unpacker has not been told yet (or that changed).
	Sizes []StreamSize
	// Data holds the ranges and the counts of messages without a header,
	// as unsigned varints (see PackDelta).
	Data []byte
}

// DestName names a destination: a target and a concrete topic.
type DestName struct{ Target, Topic string }

// StreamSize is a producer stream's payload size in bytes.
type StreamSize struct {
	Stream uint32
	Size   int
}

// Empty reports whether d carries nothing.
func (d *PackedDelta) Empty() bool {
	return len(d.Data) == 0 && len(d.Dests) == 0 && len(d.Groups) == 0
}

// Packer is the sending side's dictionary of one run: the numbers it gave
// destinations and groups, and the stream sizes it has sent.
type Packer struct {
	dests  map[destKey]uint64
	groups map[GroupKey]uint64
	sizes  map[uint32]int
}

// NewPacker returns an empty dictionary.
func NewPacker() *Packer {
	return &Packer{dests: map[destKey]uint64{}, groups: map[GroupKey]uint64{}, sizes: map[uint32]int{}}
}

// Unpacker is the receiving side's dictionary of one sender's run: what its
// numbers stand for, and where they live in the receiving Accounting.
type Unpacker struct {
	dests  []*Dest
	groups []*Group
	sizes  map[uint32]int
	// scratch, reused from delta to delta
	recs []packedRun
	// fresh indexes expect: per group and stream, the sequence numbers
	// acknowledged one by one in the delta being applied (kept from delta
	// to delta, emptied).
	fresh  map[groupStream]int
	expect []freshSeqs
}

type freshSeqs struct {
	groupStream
	seqs []uint64
}

// NewUnpacker returns an empty dictionary.
func NewUnpacker() *Unpacker {
	return &Unpacker{sizes: map[uint32]int{}, fresh: map[groupStream]int{}}
}

// packedRun is a range of sequence numbers of one stream to one
// destination (or received by one group): [start, start+n).
type packedRun struct {
	id     uint64 // destination or group number
	stream uint32
	start  uint64
	n      uint64
}

// PackDelta returns what was acknowledged and received since the previous
// call (or since TrackDeltas) in packed form, and forgets it. Data is, in
// unsigned varints:
//
//	acks:      streams, then per stream: stream, ranges, then per range
//	           (sorted by start): start minus the previous range's start,
//	           length - 1, destination
//	anonymous: destinations, then per destination: number, count, bytes
//	seen:      groups, then per group: number, streams, then per stream:
//	           stream, ranges, then per range: start minus the previous
//	           range's start, length - 1
//	anonymous: groups, then per group: number, count, bytes
func (a *Accounting) PackDelta(p *Packer) (PackedDelta, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := PackedDelta{DestBase: len(p.dests), GroupBase: len(p.groups)}
	if !a.tracking {
		return d, nil
	}
	destID := func(k destKey) uint64 {
		id, ok := p.dests[k]
		if !ok {
			id = uint64(len(p.dests))
			p.dests[k] = id
			d.Dests = append(d.Dests, DestName{k.target, k.topic})
		}
		return id
	}
	groupID := func(k GroupKey) uint64 {
		id, ok := p.groups[k]
		if !ok {
			id = uint64(len(p.groups))
			p.groups[k] = id
			d.Groups = append(d.Groups, k)
		}
		return id
	}
	size := func(s uint32) {
		n, ok := a.sizes[s]
		if old, sent := p.sizes[s]; ok && (!sent || old != n) {
			p.sizes[s] = n
			d.Sizes = append(d.Sizes, StreamSize{s, n})
		}
	}
	var buf []byte
	put := func(v uint64) { buf = binary.AppendUvarint(buf, v) }

	// Acknowledgements, per stream, across destinations. Destinations are
	// numbered in a stable order (sorted), so that a run's numbers do not
	// depend on map order.
	keys := make([]destKey, 0, len(a.pendAck))
	for k := range a.pendAck {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].target != keys[j].target {
			return keys[i].target < keys[j].target
		}
		return keys[i].topic < keys[j].topic
	})
	var recs []packedRun
	for _, k := range keys {
		id := destID(k)
		for s, b := range a.pendAck[k] {
			recs = appendRuns(recs, id, s, b)
		}
	}
	writeRuns(recs, true, put, size)
	anon := make([]destKey, 0, len(a.pendAnon.acks))
	for k := range a.pendAnon.acks {
		anon = append(anon, k)
	}
	sort.Slice(anon, func(i, j int) bool { return anon[i].target+"\x00"+anon[i].topic < anon[j].target+"\x00"+anon[j].topic })
	put(uint64(len(anon)))
	for _, k := range anon {
		n := a.pendAnon.acks[k]
		put(destID(k))
		put(uint64(n[0]))
		put(uint64(n[1]))
	}

	// Receipts, per group and stream.
	gkeys := make([]GroupKey, 0, len(a.pendSeen))
	for k := range a.pendSeen {
		gkeys = append(gkeys, k)
	}
	sort.Slice(gkeys, func(i, j int) bool { return groupLess(gkeys[i], gkeys[j]) })
	put(uint64(len(gkeys)))
	for _, k := range gkeys {
		put(groupID(k))
		recs = recs[:0]
		for s, b := range a.pendSeen[k] {
			recs = appendRuns(recs, 0, s, b)
		}
		writeRuns(recs, false, put, size)
	}
	ganon := make([]GroupKey, 0, len(a.pendAnon.seen))
	for k := range a.pendAnon.seen {
		ganon = append(ganon, k)
	}
	sort.Slice(ganon, func(i, j int) bool { return groupLess(ganon[i], ganon[j]) })
	put(uint64(len(ganon)))
	for _, k := range ganon {
		n := a.pendAnon.seen[k]
		put(groupID(k))
		put(uint64(n[0]))
		put(uint64(n[1]))
	}
	if len(keys)+len(anon)+len(gkeys)+len(ganon) > 0 {
		d.Data = buf
	}
	a.resetPendingLocked()
	return d, nil
}

// appendRuns appends the ranges of consecutive values in b.
func appendRuns(recs []packedRun, id uint64, stream uint32, b *roaring64.Bitmap) []packedRun {
	var vals [256]uint64
	it := b.ManyIterator()
	open := false
	var cur packedRun
	for {
		n := it.NextMany(vals[:])
		if n == 0 {
			break
		}
		for _, v := range vals[:n] {
			if open && v == cur.start+cur.n {
				cur.n++
				continue
			}
			if open {
				recs = append(recs, cur)
			}
			cur, open = packedRun{id: id, stream: stream, start: v, n: 1}, true
		}
	}
	if open {
		recs = append(recs, cur)
	}
	return recs
}

// writeRuns writes ranges grouped by stream (withID: each with its
// destination's number) and tells size of every stream written.
func writeRuns(recs []packedRun, withID bool, put func(uint64), size func(uint32)) {
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.stream != b.stream {
			return a.stream < b.stream
		}
		if a.start != b.start {
			return a.start < b.start
		}
		return a.id < b.id
	})
	streams := 0
	for i := range recs {
		if i == 0 || recs[i].stream != recs[i-1].stream {
			streams++
		}
	}
	put(uint64(streams))
	for i := 0; i < len(recs); {
		j := i
		for j < len(recs) && recs[j].stream == recs[i].stream {
			j++
		}
		size(recs[i].stream)
		put(uint64(recs[i].stream))
		put(uint64(j - i))
		var prev uint64
		for _, r := range recs[i:j] {
			put(r.start - prev)
			put(r.n - 1)
			if withID {
				put(r.id)
			}
			prev = r.start
		}
		i = j
	}
}

var errPacked = errors.New("accounting: malformed packed delta")

// perMessage is the largest number of sequence numbers of one stream and
// destination (or group) in a delta that are applied one by one rather
// than as a bitmap: for a few, building a bitmap costs more.
const perMessage = 16

// ApplyPacked adds what another process's accounting learnt (its
// PackDelta, in order) to this one, as Apply does. u is this sender's
// dictionary; it must only ever be used with this Accounting.
func (a *Accounting) ApplyPacked(u *Unpacker, d PackedDelta) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if d.DestBase != len(u.dests) || d.GroupBase != len(u.groups) {
		return fmt.Errorf("accounting: a packed delta numbers destinations from %d and groups from %d, %d and %d were known: a delta was lost or came out of order", d.DestBase, d.GroupBase, len(u.dests), len(u.groups))
	}
	for _, n := range d.Dests {
		u.dests = append(u.dests, a.destLocked(n.Target, n.Topic))
	}
	for _, k := range d.Groups {
		u.groups = append(u.groups, a.groupLocked(k, nil))
	}
	for _, s := range d.Sizes {
		u.sizes[s.Stream] = s.Size
	}
	r := packedReader{b: d.Data}
	if len(r.b) == 0 {
		return nil
	}
	// Acknowledgements.
	u.recs = r.runs(u.recs[:0], true)
	if err := a.applyRuns(u, u.recs, nil); err != nil {
		return err
	}
	for n := r.next(); n > 0 && r.err == nil; n-- {
		id, count, bytes := r.next(), r.next(), r.next()
		if id >= uint64(len(u.dests)) {
			return errPacked
		}
		dest := u.dests[id]
		a.ackAnonLocked(dest.key, int64(count), int64(bytes))
	}
	// Receipts.
	for n := r.next(); n > 0 && r.err == nil; n-- {
		id := r.next()
		if id >= uint64(len(u.groups)) {
			return errPacked
		}
		u.recs = r.runs(u.recs[:0], false)
		if err := a.applyRuns(u, u.recs, u.groups[id]); err != nil {
			return err
		}
	}
	for n := r.next(); n > 0 && r.err == nil; n-- {
		id, count, bytes := r.next(), r.next(), r.next()
		if id >= uint64(len(u.groups)) {
			return errPacked
		}
		a.seenAnonLocked(u.groups[id], int64(count), int64(bytes))
	}
	if r.err != nil || len(r.b) != 0 {
		return errPacked
	}
	return nil
}

// applyRuns applies acknowledged ranges (g nil) or ranges g received: per
// stream and destination, a few sequence numbers one by one, more as one
// bitmap.
func (a *Accounting) applyRuns(u *Unpacker, recs []packedRun, g *Group) error {
	for _, r := range recs {
		if g == nil && r.id >= uint64(len(u.dests)) {
			return errPacked
		}
	}
	slices.SortFunc(recs, func(x, y packedRun) int {
		return cmp.Or(cmp.Compare(x.id, y.id), cmp.Compare(x.stream, y.stream), cmp.Compare(x.start, y.start))
	})
	for i := 0; i < len(recs); {
		j, total := i, uint64(0)
		for j < len(recs) && recs[j].id == recs[i].id && recs[j].stream == recs[i].stream {
			total += recs[j].n
			j++
		}
		stream := recs[i].stream
		size, ok := u.sizes[stream]
		if !ok {
			size = a.sizes[stream]
		}
		if total <= perMessage {
			for _, r := range recs[i:j] {
				for s := r.start; s < r.start+r.n; s++ {
					if g != nil {
						a.seenLocked(g, stream, s, size)
						continue
					}
					// The groups expect what is new at the destination
					// together, as one bitmap per stream, below.
					d := u.dests[r.id]
					if a.ackDestLocked(d, stream, s, size) {
						for _, dg := range d.groups {
							k := groupStream{dg, stream}
							i, ok := u.fresh[k]
							if !ok {
								i = len(u.expect)
								u.fresh[k] = i
								u.expect = append(u.expect, freshSeqs{groupStream: k})
							}
							u.expect[i].seqs = append(u.expect[i].seqs, s)
						}
					}
				}
			}
		} else {
			b := roaring64.New()
			for _, r := range recs[i:j] {
				b.AddRange(r.start, r.start+r.n)
			}
			if g == nil {
				a.ackBitmapLocked(u.dests[recs[i].id].key, stream, b, size)
			} else {
				if _, ok := a.sizes[stream]; !ok {
					a.sizes[stream] = size
				}
				a.seenBitmapLocked(g, stream, b, size)
			}
		}
		i = j
	}
	for i := range u.expect {
		e := &u.expect[i]
		if len(e.seqs) == 0 {
			continue
		}
		slices.Sort(e.seqs) // roaring adds sorted values container by container
		b := roaring64.New()
		b.AddMany(e.seqs)
		size, ok := u.sizes[e.stream]
		if !ok {
			size = a.sizes[e.stream]
		}
		e.g.expectBitmap(e.stream, b, size)
		e.seqs = e.seqs[:0]
	}
	return nil
}

type groupStream struct {
	g      *Group
	stream uint32
}

type packedReader struct {
	b   []byte
	err error
}

func (r *packedReader) next() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errPacked
		return 0
	}
	r.b = r.b[n:]
	return v
}

// runs reads one section of ranges (see PackDelta).
func (r *packedReader) runs(recs []packedRun, withID bool) []packedRun {
	for streams := r.next(); streams > 0 && r.err == nil; streams-- {
		stream := r.next()
		if stream > 1<<32-1 {
			r.err = errPacked
			return recs
		}
		var start uint64
		for n := r.next(); n > 0 && r.err == nil; n-- {
			start += r.next()
			run := packedRun{stream: uint32(stream), start: start, n: r.next() + 1}
			if withID {
				run.id = r.next()
			}
			recs = append(recs, run)
		}
	}
	return recs
}
