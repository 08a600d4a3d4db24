package workloads

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Accounting split over processes and merged by Apply gives the figures one
// accounting of every event gives: acks and receives spread over three
// processes, with lost messages, duplicates within one process and across
// two, a message acknowledged to two topics one wildcard group reads, acks
// repeated by a relay, messages without a header, and deltas applied
// while the events are still coming.
// The same holds for packed deltas (PackDelta, ApplyPacked).
func TestApplyMergesLikeOneAccounting(t *testing.T) {
	t.Run("bitmaps", func(t *testing.T) { testApplyMerges(t, false) })
	t.Run("packed", func(t *testing.T) { testApplyMerges(t, true) })
}

func testApplyMerges(t *testing.T, packed bool) {
	const run, procs = 7, 3
	wildcard := func(topic string) bool { return strings.HasPrefix(topic, "dev/") }
	keys := []GroupKey{{"mq", "dev/+", "all"}, {"mq", "dev/1", "one"}}
	match := map[GroupKey]func(string) bool{keys[0]: wildcard, keys[1]: nil}
	whole, merged := NewAccounting(run), NewAccounting(run)
	var parts [procs]*Accounting
	for i := range parts {
		parts[i] = NewAccounting(run)
		parts[i].TrackDeltas()
	}
	group := func(a *Accounting, k GroupKey) *Group { return a.Group(k, match[k]) }
	for _, k := range keys {
		group(whole, k)
		group(merged, k)
	}
	var packers [procs]*Packer
	var unpackers [procs]*Unpacker
	for i := range packers {
		packers[i], unpackers[i] = NewPacker(), NewUnpacker()
	}
	ship := func(i int) {
		if packed {
			d, err := parts[i].PackDelta(packers[i])
			if err != nil {
				t.Fatal(err)
			}
			if err := merged.ApplyPacked(unpackers[i], d); err != nil {
				t.Fatal(err)
			}
			return
		}
		d, err := parts[i].Delta()
		if err != nil {
			t.Fatal(err)
		}
		if err := merged.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	topics := []string{"dev/0", "dev/1", "other"}
	type msg struct {
		h     Header
		topic string
	}
	var sent []msg
	for step := range 20000 {
		switch r := rng.IntN(100); {
		case r < 45: // a producer on process p acknowledges its next message
			p := rng.IntN(procs)
			stream := uint32(p)<<24 | uint32(rng.IntN(2))
			m := msg{Header{Run: run, Producer: stream, Seq: uint64(step)}, topics[rng.IntN(len(topics))]}
			sent = append(sent, m)
			for _, a := range []*Accounting{whole, parts[p]} {
				a.Ack("mq", m.topic, m.h, true, 100)
				if m.topic == "dev/0" && step%7 == 0 { // a relay copies it to dev/1 too
					a.Ack("mq", "dev/1", m.h, true, 100)
				}
				if step%11 == 0 { // acknowledged twice
					a.Ack("mq", m.topic, m.h, true, 100)
				}
			}
		case r < 85 && len(sent) > 0: // some process receives a message, maybe again
			m := sent[rng.IntN(len(sent))]
			k := keys[rng.IntN(len(keys))]
			p := rng.IntN(procs)
			whole.Receive(group(whole, k), m.h, true, 0, 100)
			parts[p].Receive(group(parts[p], k), m.h, true, 0, 100)
		case r < 90: // without a header
			p := rng.IntN(procs)
			for _, a := range []*Accounting{whole, parts[p]} {
				if r%2 == 0 {
					a.Ack("mq", "dev/1", Header{}, false, 10)
				} else {
					a.Receive(group(a, keys[1]), Header{}, false, 0, 10)
				}
			}
		default:
			ship(rng.IntN(procs))
		}
	}
	for i := range parts {
		ship(i)
	}
	for _, k := range keys {
		w, m := whole.Stats(k), merged.Stats(k)
		var own int64
		for _, p := range parts {
			own += p.Stats(k).Duplicates
		}
		if w.Expected != m.Expected || w.Received != m.Received || w.Backlog != m.Backlog {
			t.Errorf("group %s: one accounting %+v, merged %+v", k.Group, w, m)
		}
		if w.Duplicates != m.Duplicates+own {
			t.Errorf("group %s: %d duplicates in one accounting; merged %d across processes + %d within them", k.Group, w.Duplicates, m.Duplicates, own)
		}
		if w.Backlog.Messages == 0 || w.Duplicates == 0 || m.Duplicates == 0 {
			t.Errorf("group %s: %+v, merged %+v: the scenario should lose and duplicate messages, also across processes", k.Group, w, m)
		}
	}
	for _, topic := range topics {
		if w, m := whole.Acked("mq", topic), merged.Acked("mq", topic); w != m {
			t.Errorf("acked to %s: one accounting %d, merged %d", topic, w, m)
		}
	}
}

// A fleet's sending thread spreads consecutive messages over its clients'
// topics: packed, each acknowledgement costs a few bytes whatever the
// number of topics, once the topics are numbered; receipts through a
// wildcard cost next to nothing; a delta applied twice, or out of order,
// is refused.
func TestPackedDeltaOfAFleet(t *testing.T) {
	for _, clients := range []int{300, 3000, 30000} {
		worker, conductor := NewAccounting(1), NewAccounting(1)
		worker.TrackDeltas()
		key := GroupKey{"mq", "devices/+/data", "sink"}
		match := func(topic string) bool { return strings.HasPrefix(topic, "devices/") }
		g := worker.Group(key, match)
		conductor.Group(key, match)
		p, u := NewPacker(), NewUnpacker()
		var seq uint64
		second := func() (ack, dict int) {
			for range clients {
				h := Header{Run: 1, Producer: 5 << 16, Seq: seq}
				topic := "devices/" + strconv.Itoa(int(seq)%clients) + "/data"
				worker.Ack("mq", topic, h, true, 200)
				if seq%100 != 99 { // every 100th is lost
					worker.Receive(g, h, true, 0, 200)
				}
				seq++
			}
			d, err := worker.PackDelta(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := conductor.ApplyPacked(u, d); err != nil {
				t.Fatal(err)
			}
			for _, n := range d.Dests {
				dict += len(n.Target) + len(n.Topic)
			}
			return len(d.Data), dict
		}
		_, dict := second()
		if dict == 0 {
			t.Fatal("the first delta numbers no topics")
		}
		data, dict := second()
		perMsg := float64(data) / float64(clients)
		t.Logf("%d clients: %.2f bytes per acknowledged message (%d received)", clients, perMsg, clients-clients/100)
		if dict != 0 || perMsg > 5 {
			t.Errorf("%d clients: the second delta costs %.2f bytes per message and %d bytes of topics; want at most 5 and none", clients, perMsg, dict)
		}
		st, want := conductor.Stats(key), worker.Stats(key)
		if st != want || st.Expected != int64(2*clients) || st.Backlog.Messages != int64(2*clients/100) {
			t.Errorf("%d clients: merged %+v, the worker's own %+v", clients, st, want)
		}
		d, err := worker.PackDelta(p)
		if err != nil {
			t.Fatal(err)
		}
		d.DestBase--
		if err := conductor.ApplyPacked(u, d); err == nil || !strings.Contains(err.Error(), "out of order") {
			t.Errorf("a delta numbered from the wrong place: %v", err)
		}
	}
}

// What the conductor spends merging a fleet's packed deltas: a second of
// a 3,000-client fleet at 1 msg/s per client (its acknowledgements and the
// wildcard consumer's receipts), per message.
func BenchmarkApplyPackedFleet(b *testing.B) {
	const clients = 3000
	worker, conductor := NewAccounting(1), NewAccounting(1)
	worker.TrackDeltas()
	key := GroupKey{"mq", "devices/+/data", "sink"}
	match := func(topic string) bool { return strings.HasPrefix(topic, "devices/") }
	g := worker.Group(key, match)
	conductor.Group(key, match)
	p, u := NewPacker(), NewUnpacker()
	topics := make([]string, clients)
	for i := range topics {
		topics[i] = "devices/" + strconv.Itoa(i) + "/data"
	}
	var seq uint64
	delta := func() PackedDelta {
		for range clients {
			h := Header{Run: 1, Producer: 5 << 16, Seq: seq}
			worker.Ack("mq", topics[seq%clients], h, true, 200)
			worker.Receive(g, h, true, 0, 200)
			seq++
		}
		d, err := worker.PackDelta(p)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	if err := conductor.ApplyPacked(u, delta()); err != nil {
		b.Fatal(err)
	}
	ds := make([]PackedDelta, b.N)
	for i := range ds {
		ds[i] = delta()
	}
	b.ResetTimer()
	for i := range b.N {
		if err := conductor.ApplyPacked(u, ds[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*clients), "ns/message")
}

// What the conductor spends merging a fleet's packed deltas as the fleet
// benchmark (bench/workers/traffic.sh fleet) sends them: 3 workers of
// 1,000 clients and 20 sending threads each, every client publishing 1
// msg/s to its own topic through whichever thread is free (each thread's
// sequence numbers run consecutively over random clients), and a wildcard
// consumer on the first worker receiving every message. One op is one
// second of the fleet: a delta from each worker.
func BenchmarkApplyPackedFleetWorkers(b *testing.B) {
	const workers, threads, perThread = 3, 20, 50
	const clients = workers * threads * perThread
	key := GroupKey{"mq", "devices/+/data", "sink"}
	match := func(topic string) bool { return strings.HasPrefix(topic, "devices/") }
	conductor := NewAccounting(1)
	conductor.Group(key, match)
	type worker struct {
		a *Accounting
		g *Group
		p *Packer
		u *Unpacker
	}
	ws := make([]worker, workers)
	for i := range ws {
		a := NewAccounting(1)
		a.TrackDeltas()
		ws[i] = worker{a, a.Group(key, match), NewPacker(), NewUnpacker()}
	}
	topics := make([]string, clients)
	for i := range topics {
		topics[i] = "devices/" + strconv.Itoa(i) + "/data"
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]uint64, workers*threads)
	deltas := func() []PackedDelta {
		for w := range ws {
			for c := range threads * perThread {
				t := w*threads + rng.IntN(threads)
				h := Header{Run: 1, Producer: uint32(w)<<16 | uint32(t), Seq: next[t]}
				next[t]++
				ws[w].a.Ack("mq", topics[w*threads*perThread+c], h, true, 200)
				ws[0].a.Receive(ws[0].g, h, true, 0, 200)
			}
		}
		out := make([]PackedDelta, workers)
		for w := range ws {
			d, err := ws[w].a.PackDelta(ws[w].p)
			if err != nil {
				b.Fatal(err)
			}
			out[w] = d
		}
		return out
	}
	apply := func(ds []PackedDelta) {
		for w, d := range ds {
			if err := conductor.ApplyPacked(ws[w].u, d); err != nil {
				b.Fatal(err)
			}
		}
	}
	apply(deltas())
	ds := make([][]PackedDelta, b.N)
	for i := range ds {
		ds[i] = deltas()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		apply(ds[i])
	}
	b.StopTimer()
	if st := conductor.Stats(key); st.Expected != int64(clients)*int64(b.N+1) || st.Backlog.Messages != 0 || st.Duplicates != 0 {
		b.Fatalf("merged %+v after %d seconds", st, b.N+1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*clients), "ns/message")
}
