package rocketmq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
)

// Stored records use the RocketMQ commit log layout, which is also the wire
// layout of a pull response body, so pulls send file bytes verbatim:
//
//	totalSize(4) magic(4) bodyCRC(4) queueId(4) flag(4) queueOffset(8)
//	physicalOffset(8) sysFlag(4) bornTimestamp(8) bornHost(4+4)
//	storeTimestamp(8) storeHost(4+4) reconsumeTimes(4) preparedTxOffset(8)
//	bodyLen(4) body topicLen(1) topic propertiesLen(2) properties
const (
	recordMagic = uint32(0xDAA320A7) // MESSAGE_MAGIC_CODE of commit log v1

	offTotalSize      = 0
	offMagic          = 4
	offQueueID        = 12
	offFlag           = 16
	offQueueOffset    = 20
	offPhysOffset     = 28
	offSysFlag        = 36
	offBornTimestamp  = 40
	offBornHost       = 48
	offStoreTimestamp = 56
	offReconsumeTimes = 72
	offPreparedTx     = 76
	offBodyLen        = 84
	recordFixedSize   = 91 // everything except body, topic and properties

	sysFlagCompressed  = 0x1
	sysFlagTxMask      = 0x3 << 2
	sysFlagBornHostV6  = 0x1 << 4
	sysFlagStoreHostV6 = 0x1 << 5

	maxTopicLen   = 127
	maxPropsLen   = 32767 // the property length is a signed 16-bit field
	maxBodyLen    = 4 << 20
	nameValueSep  = '\x01'
	propertySep   = '\x02'
	propTags      = "TAGS"
	propUniqKey   = "UNIQ_KEY"
	propDelay     = "DELAY"
	propRealTopic = "REAL_TOPIC"
	propRealQID   = "REAL_QID"
	propRetry     = "RETRY_TOPIC"
	propOriginID  = "ORIGIN_MESSAGE_ID"
	propReconsume = "RECONSUME_TIME"
	propMaxRecon  = "MAX_RECONSUME_TIMES"
	propTranMsg   = "TRAN_MSG"
)

// message is a message about to be stored.
type message struct {
	topic            string
	queueID          int32
	flag             int32
	sysFlag          int32
	bornTimestamp    int64
	bornHost         [8]byte // IPv4 + port
	reconsumeTimes   int32
	preparedTxOffset int64
	body             []byte
	props            string // name\x01value\x02...
}

func (m *message) recordSize() int {
	return recordFixedSize + len(m.body) + len(m.topic) + len(m.props)
}

func (m *message) validate() error {
	switch {
	case m.topic == "":
		return errors.New("empty topic")
	case len(m.topic) > maxTopicLen:
		return fmt.Errorf("topic longer than %d bytes", maxTopicLen)
	case len(m.props) > maxPropsLen:
		return fmt.Errorf("properties longer than %d bytes", maxPropsLen)
	case len(m.body) > maxBodyLen:
		return fmt.Errorf("message body of %d bytes exceeds %d", len(m.body), maxBodyLen)
	}
	return nil
}

// appendRecord encodes m; queue offset, physical offset and store timestamp
// are patched in when the record is placed in the log.
func appendRecord(b []byte, m *message, storeHost [8]byte) []byte {
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(m.recordSize()))
	b = be.AppendUint32(b, recordMagic)
	b = be.AppendUint32(b, crc32.ChecksumIEEE(m.body)&0x7FFFFFFF)
	b = be.AppendUint32(b, uint32(m.queueID))
	b = be.AppendUint32(b, uint32(m.flag))
	b = be.AppendUint64(b, 0) // queue offset
	b = be.AppendUint64(b, 0) // physical offset
	b = be.AppendUint32(b, uint32(m.sysFlag&^(sysFlagBornHostV6|sysFlagStoreHostV6)))
	b = be.AppendUint64(b, uint64(m.bornTimestamp))
	b = append(b, m.bornHost[:]...)
	b = be.AppendUint64(b, 0) // store timestamp
	b = append(b, storeHost[:]...)
	b = be.AppendUint32(b, uint32(m.reconsumeTimes))
	b = be.AppendUint64(b, uint64(m.preparedTxOffset))
	b = be.AppendUint32(b, uint32(len(m.body)))
	b = append(b, m.body...)
	b = append(b, byte(len(m.topic)))
	b = append(b, m.topic...)
	b = be.AppendUint16(b, uint16(len(m.props)))
	b = append(b, m.props...)
	return b
}

// record is a view of one stored record.
type record []byte

// parseRecord checks that b holds exactly one well-formed record.
func parseRecord(b []byte) (record, error) {
	if len(b) < recordFixedSize {
		return nil, errors.New("short record")
	}
	r := record(b)
	if int(r.u32(offTotalSize)) != len(b) || r.u32(offMagic) != recordMagic {
		return nil, errors.New("bad record header")
	}
	bl := int(r.u32(offBodyLen))
	if bl < 0 || offBodyLen+4+bl+1 > len(b) {
		return nil, errors.New("bad record body length")
	}
	tp := offBodyLen + 4 + bl
	tl := int(b[tp])
	if tp+1+tl+2 > len(b) {
		return nil, errors.New("bad record topic length")
	}
	pl := int(binary.BigEndian.Uint16(b[tp+1+tl:]))
	if tp+1+tl+2+pl != len(b) {
		return nil, errors.New("bad record properties length")
	}
	return r, nil
}

func (r record) u32(off int) uint32 { return binary.BigEndian.Uint32(r[off:]) }
func (r record) u64(off int) uint64 { return binary.BigEndian.Uint64(r[off:]) }

func (r record) queueID() int32        { return int32(r.u32(offQueueID)) }
func (r record) queueOffset() int64    { return int64(r.u64(offQueueOffset)) }
func (r record) storeTimestamp() int64 { return int64(r.u64(offStoreTimestamp)) }
func (r record) body() []byte {
	bl := int(r.u32(offBodyLen))
	return r[offBodyLen+4 : offBodyLen+4+bl]
}
func (r record) topic() string {
	tp := offBodyLen + 4 + int(r.u32(offBodyLen))
	return string(r[tp+1 : tp+1+int(r[tp])])
}
func (r record) props() string {
	tp := offBodyLen + 4 + int(r.u32(offBodyLen))
	pp := tp + 1 + int(r[tp])
	return string(r[pp+2:])
}

// toMessage rebuilds a storable message from a record (retry, delay).
func (r record) toMessage() *message {
	m := &message{
		topic:            r.topic(),
		queueID:          r.queueID(),
		flag:             int32(r.u32(offFlag)),
		sysFlag:          int32(r.u32(offSysFlag)),
		bornTimestamp:    int64(r.u64(offBornTimestamp)),
		reconsumeTimes:   int32(r.u32(offReconsumeTimes)),
		preparedTxOffset: int64(r.u64(offPreparedTx)),
		body:             append([]byte(nil), r.body()...),
		props:            r.props(),
	}
	copy(m.bornHost[:], r[offBornHost:offBornHost+8])
	return m
}

// propValue finds one property without building a map.
func propValue(props, name string) (string, bool) {
	for props != "" {
		var item string
		if i := strings.IndexByte(props, propertySep); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			item, props = props, ""
		}
		if k, v, ok := strings.Cut(item, string(nameValueSep)); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func parseProps(props string) map[string]string {
	m := make(map[string]string)
	for _, item := range strings.Split(props, string(propertySep)) {
		if k, v, ok := strings.Cut(item, string(nameValueSep)); ok {
			m[k] = v
		}
	}
	return m
}

func marshalProps(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(k)
		sb.WriteByte(nameValueSep)
		sb.WriteString(m[k])
		sb.WriteByte(propertySep)
	}
	return sb.String()
}

// batchEntry is one message of a SEND_BATCH_MESSAGE body.
type batchEntry struct {
	flag  int32
	body  []byte
	props string
}

// decodeBatch splits a batch body: totalSize(4) magic(4) bodyCRC(4) flag(4)
// bodyLen(4) body propertiesLen(2) properties, repeated.
func decodeBatch(b []byte) ([]batchEntry, error) {
	var out []batchEntry
	for len(b) > 0 {
		if len(b) < 22 {
			return nil, errors.New("truncated batch entry")
		}
		total := int(binary.BigEndian.Uint32(b[0:4]))
		if total < 22 || total > len(b) {
			return nil, fmt.Errorf("batch entry size %d out of range", total)
		}
		e := b[:total]
		bl := int(binary.BigEndian.Uint32(e[16:20]))
		if bl < 0 || 20+bl+2 > total {
			return nil, errors.New("batch entry body length out of range")
		}
		pl := int(binary.BigEndian.Uint16(e[20+bl:]))
		if 20+bl+2+pl != total {
			return nil, errors.New("batch entry properties length mismatch")
		}
		out = append(out, batchEntry{
			flag:  int32(binary.BigEndian.Uint32(e[12:16])),
			body:  e[20 : 20+bl],
			props: string(e[22+bl:]),
		})
		b = b[total:]
	}
	if len(out) == 0 {
		return nil, errors.New("empty batch")
	}
	return out, nil
}

// offsetMsgID is the broker-side message id: store host (4+4) and physical
// offset (8) in upper-case hex, as primitive.CreateMessageId builds it.
func offsetMsgID(storeHost [8]byte, phys int64) string {
	var b [16]byte
	copy(b[:8], storeHost[:])
	binary.BigEndian.PutUint64(b[8:], uint64(phys))
	const hexd = "0123456789ABCDEF"
	out := make([]byte, 32)
	for i, c := range b {
		out[2*i] = hexd[c>>4]
		out[2*i+1] = hexd[c&0xF]
	}
	return string(out)
}
