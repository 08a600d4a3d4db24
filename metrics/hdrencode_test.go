package metrics

import (
	"bytes"
	"math/rand/v2"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// encodeV2 writes what hdr's own encoder writes, byte for byte: latencies
// spread from a microsecond to an hour, a single value, counts large
// enough for every length of the zigzag encoding.
func TestEncodeV2IsHdrEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := map[string]func(h *hdr.Histogram){
		"one value": func(h *hdr.Histogram) { _ = h.RecordValue(1500) },
		"spread": func(h *hdr.Histogram) {
			for range 20000 {
				_ = h.RecordValue(int64(rng.ExpFloat64() * 2000))
			}
		},
		"up to an hour": func(h *hdr.Histogram) {
			for range 5000 {
				_ = h.RecordValue(1 + rng.Int64N(3_600_000_000))
			}
		},
		"huge counts": func(h *hdr.Histogram) {
			for i := range 9 {
				_ = h.RecordValues(int64(10+i), int64(1)<<(7*i+6))
			}
		},
	}
	for name, fill := range cases {
		h := hdr.New(1, 3_600_000_000, 3)
		fill(h)
		want, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a reused compressor writes the same
			if got := encodeV2(h); !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes, hdr encodes %d bytes differently", name, len(got), len(want))
			}
		}
	}
}

// What encoding a second's latency histogram costs, hdr's encoder against
// encodeV2.
func BenchmarkEncodeHistogram(b *testing.B) {
	h := hdr.New(1, 3_600_000_000, 3)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		_ = h.RecordValue(int64(200 + rng.ExpFloat64()*3000))
	}
	b.Run("hdr", func(b *testing.B) {
		for range b.N {
			_, _ = h.Encode(hdr.V2CompressedEncodingCookieBase)
		}
	})
	b.Run("encodeV2", func(b *testing.B) {
		for range b.N {
			encodeV2(h)
		}
	})
}
