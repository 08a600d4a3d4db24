package workloads

import (
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// A long run's accounting stays small: full blocks of contiguous sequence
// numbers are kept as runs, not as 8 KiB bitmaps each.
func TestAccountingStaysSmallOnLongRuns(t *testing.T) {
	a := NewAccounting(1)
	g := a.Group(GroupKey{Target: "mq", Subscription: "t", Group: "g"}, nil)
	const n = 1 << 19 // 8 blocks of 65,536
	for seq := range uint64(n) {
		h := Header{Run: 1, Producer: 7, Seq: seq}
		a.Ack("mq", "t", h, true, 100)
		a.Receive(g, h, true, 0, 100)
	}
	var bytes uint64
	for _, m := range []map[uint32]*roaring64.Bitmap{a.dests[destKey{"mq", "t"}].acked, g.expected, g.seen} {
		bytes += m[7].GetSizeInBytes()
	}
	// Uncompressed, the three bitmaps would take 3 x 8 x 8 KiB = 192 KiB.
	if bytes > 16<<10 {
		t.Fatalf("acked, expected and seen of %d messages take %d bytes, want under 16 KiB", n, bytes)
	}
	if lost := a.Backlog(g).Messages; lost != 0 {
		t.Fatalf("backlog %d after every message was received", lost)
	}
}
