package metrics

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"math"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// The compressors encodeV2 reuses: a new one allocates and clears about a
// megabyte, which was most of what encoding a histogram cost (every second
// per workload for the series file, every reply for a worker's deltas).
var zlibPool = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(nil, zlib.BestCompression)
	return w
}}

// encodeV2 is hdr's Encode(hdr.V2CompressedEncodingCookieBase), byte for
// byte (encode_test checks it), with a reused compressor.
func encodeV2(h *hdr.Histogram) []byte {
	s := h.Export()
	limit := len(s.Counts)
	for limit > 0 && s.Counts[limit-1] == 0 {
		limit--
	}
	// The counts: zigzag LEB128 (at most 9 bytes), a run of zeros as its
	// negated length.
	var counts []byte
	for i := 0; i < limit; {
		c := s.Counts[i]
		i++
		if c == 0 {
			zeros := int64(1)
			for i < limit && s.Counts[i] == 0 {
				zeros++
				i++
			}
			if zeros > 1 {
				counts = appendZigZag(counts, -zeros)
				continue
			}
		}
		counts = appendZigZag(counts, c)
	}
	ratio := s.IntegerToDoubleConversionRatio
	if ratio == 0 {
		ratio = 1
	}
	payload := make([]byte, 0, 40+len(counts))
	payload = binary.BigEndian.AppendUint32(payload, uint32(hdr.V2EncodingCookieBase|0x10))
	payload = binary.BigEndian.AppendUint32(payload, uint32(len(counts)))
	payload = binary.BigEndian.AppendUint32(payload, 0) // normalizing index offset
	payload = binary.BigEndian.AppendUint32(payload, uint32(int32(s.SignificantFigures)))
	payload = binary.BigEndian.AppendUint64(payload, uint64(s.LowestTrackableValue))
	payload = binary.BigEndian.AppendUint64(payload, uint64(s.HighestTrackableValue))
	payload = binary.BigEndian.AppendUint64(payload, math.Float64bits(ratio))
	payload = append(payload, counts...)
	var z bytes.Buffer
	w := zlibPool.Get().(*zlib.Writer)
	w.Reset(&z)
	_, _ = w.Write(payload) // writes to a bytes.Buffer do not fail
	_ = w.Close()
	zlibPool.Put(w)
	out := make([]byte, 0, 8+z.Len())
	out = binary.BigEndian.AppendUint32(out, uint32(hdr.V2CompressedEncodingCookieBase|0x10))
	out = binary.BigEndian.AppendUint32(out, uint32(z.Len()))
	out = append(out, z.Bytes()...)
	return base64.StdEncoding.AppendEncode(nil, out)
}

// appendZigZag appends v in HdrHistogram's zigzag LEB128-64b9B: 7 bits a
// byte, the ninth byte whole.
func appendZigZag(b []byte, v int64) []byte {
	u := uint64((v << 1) ^ (v >> 63))
	for range 8 {
		if u>>7 == 0 {
			return append(b, byte(u))
		}
		b = append(b, byte(u&0x7f|0x80))
		u >>= 7
	}
	return append(b, byte(u))
}
