package workloads

import (
	"encoding/binary"
	"strconv"
	"time"
)

// HeaderSize is the size of the header planrun writes at the start of every
// payload that is at least this long. Carrying it in the payload (not in
// protocol headers) means it survives relays between protocols.
const HeaderSize = 22

var magic = [2]byte{0x70, 0x72}

// Header identifies a message: which run and producer sent it, its sequence
// number within that producer, and its intended send time.
type Header struct {
	Run uint16
	// Producer identifies one sending stream: the workload's index in the
	// plan in the high 16 bits, the sending thread in the low 16. Each
	// thread sends in sequence, so order within a stream is meaningful.
	Producer uint32
	Seq      uint64 // 48 bits used
	SentAt   int64  // unix nanoseconds of the intended send time
}

// Put writes h into the first HeaderSize bytes of b.
func (h Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	b[0], b[1] = magic[0], magic[1]
	binary.BigEndian.PutUint16(b[2:], h.Run)
	binary.BigEndian.PutUint32(b[4:], h.Producer)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], h.Seq)
	copy(b[8:14], seq[2:])
	binary.BigEndian.PutUint64(b[14:], uint64(h.SentAt))
}

// ParseHeader reads a header; ok is false for payloads that carry none.
func ParseHeader(b []byte) (h Header, ok bool) {
	if len(b) < HeaderSize || b[0] != magic[0] || b[1] != magic[1] {
		return Header{}, false
	}
	var seq [8]byte
	copy(seq[2:], b[8:14])
	return Header{
		Run:      binary.BigEndian.Uint16(b[2:]),
		Producer: binary.BigEndian.Uint32(b[4:]),
		Seq:      binary.BigEndian.Uint64(seq[:]),
		SentAt:   int64(binary.BigEndian.Uint64(b[14:])),
	}, true
}

// SentTime is the intended send time as a time.Time.
func (h Header) SentTime() time.Time { return time.Unix(0, h.SentAt) }

// ShortHeaderSize is the smallest payload that still carries a send time:
// 11 bytes, the size of seed procedures' "hello world" messages.
const ShortHeaderSize = 11

const shortMagic = 0x71

// PutShort writes a short header: a magic byte, the low 32 bits of the
// sequence number and the intended send time in microseconds since the run
// started (48 bits). It gives end-to-end latency but, without the producer
// stream, no duplicate or loss tracking.
func PutShort(b []byte, seq uint64, sentAt, runStart time.Time) {
	_ = b[ShortHeaderSize-1]
	b[0] = shortMagic
	binary.BigEndian.PutUint32(b[1:], uint32(seq))
	var us [8]byte
	binary.BigEndian.PutUint64(us[:], uint64(max(sentAt.Sub(runStart), 0)/time.Microsecond))
	copy(b[5:11], us[2:])
}

// ParseShort reads a short header's send time.
func ParseShort(b []byte, runStart time.Time) (time.Time, bool) {
	if len(b) < ShortHeaderSize || len(b) >= HeaderSize || b[0] != shortMagic {
		return time.Time{}, false
	}
	var us [8]byte
	copy(us[2:], b[5:11])
	return runStart.Add(time.Duration(binary.BigEndian.Uint64(us[:])) * time.Microsecond), true
}

// AppendSequenceKey appends the key `keys: sequence` gives a message: its
// producer stream in hex and its sequence number in that stream, such as
// "10003-42" (workload 1, thread 3, message 42). Streams differ between
// threads, workloads and the shards of a workload on different workers,
// so keys are unique in the run, as a hash field or a compacted topic needs.
func AppendSequenceKey(b []byte, stream uint32, seq uint64) []byte {
	b = strconv.AppendUint(b, uint64(stream), 16)
	b = append(b, '-')
	return strconv.AppendUint(b, seq, 10)
}
