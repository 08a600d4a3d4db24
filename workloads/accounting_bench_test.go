package workloads

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkAccountingMemory reports what the accounting holds per message,
// in bits (bits/msg: MemoryBytes*8 over the messages acknowledged), for one
// destination (or 1,000) and one group reading it (three bitmaps: acknowledged,
// expected, seen), 4 producer streams of 250,000 messages each:
//   - dense: every sequence number acknowledged and received;
//   - half-lost: every sequence number acknowledged, a random half received;
//   - sparse: every 64th sequence number acknowledged and received;
//   - fleet: every sequence number, but each stream spreads its messages
//     over 1,000 topics (an MQTT fleet's devices/{client}/data read through
//     devices/+/data): each topic's acknowledgements are sparse, the
//     group's are dense.
func BenchmarkAccountingMemory(b *testing.B) {
	const streams, perStream = 4, 250_000
	for _, c := range []struct {
		name     string
		step     uint64
		topics   int
		received func(seq uint64) bool
	}{
		{"dense", 1, 1, func(uint64) bool { return true }},
		{"half-lost", 1, 1, func(uint64) bool { return rand.IntN(2) == 0 }},
		{"sparse", 64, 1, func(uint64) bool { return true }},
		{"fleet", 1, 1000, func(uint64) bool { return true }},
	} {
		topics := make([]string, c.topics)
		for i := range topics {
			topics[i] = "devices/" + strconv.Itoa(i) + "/data"
		}
		b.Run(c.name, func(b *testing.B) {
			var bits float64
			for b.Loop() {
				a := NewAccounting(1)
				g := a.Group(GroupKey{Target: "t", Subscription: "devices/+/data", Group: "g"}, func(string) bool { return true })
				for s := range uint32(streams) {
					for i := range uint64(perStream) {
						h := Header{Run: 1, Producer: s, Seq: i * c.step}
						a.Ack("t", topics[int(i)%len(topics)], h, true, 100)
						if c.received(h.Seq) {
							a.Receive(g, h, true, 0, 100)
						}
					}
				}
				bits = float64(a.MemoryBytes()*8) / (streams * perStream)
			}
			b.ReportMetric(bits, "bits/msg")
		})
	}
}
