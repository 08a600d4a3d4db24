package rocketmq

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"
)

const (
	maxPullBytes       = 4 << 20
	maxPullMsgs        = 1024
	maxFilterScan      = 4096 // index entries one filtered pull may skip
	maxSuspend         = 60 * time.Second
	defaultMaxRetries  = 16
	halfTopic          = "RMQ_SYS_TRANS_HALF_TOPIC"
	txPreparedType     = 0x1 << 2
	txCommitType       = 0x2 << 2
	txRollbackType     = 0x3 << 2
	defaultTraceRegion = "DefaultRegion"
)

func (b *Broker) brokerHandler(c *conn, req *command) *command {
	if b.opts.AccessKey != "" {
		if err := checkACL(b.opts.AccessKey, b.opts.SecretKey, req); err != nil {
			b.logf("rocketmq: %s: %v", c.remote, err)
			return errResp(resSystemError, err.Error())
		}
	}
	switch req.Code {
	case reqSendMessage, reqSendMessageV2, reqSendBatchMessage:
		return b.handleSend(c, req)
	case reqPullMessage:
		return b.handlePull(c, req)
	case reqHeartBeat:
		return b.handleHeartbeat(c, req)
	case reqUnregisterClient:
		b.notifyGroups(b.consumers.unregister(req.ext("clientID"), req.ext("consumerGroup")))
		return okResp(nil, nil)
	case reqGetConsumerListByGroup:
		body, _ := json.Marshal(map[string]any{"consumerIdList": b.consumers.clientIDs(req.ext("consumerGroup"))})
		return okResp(nil, body)
	case reqQueryConsumerOffset:
		return b.handleQueryOffset(req)
	case reqUpdateConsumerOffset:
		return b.handleUpdateOffset(req)
	case reqGetMaxOffset, reqGetMinOffset, reqGetEarliestMsgStoretime, reqSearchOffsetByTimestamp:
		return b.handleOffsetQuery(req)
	case reqViewMessageByID:
		phys, err := strconv.ParseInt(req.ext("offset"), 10, 64)
		if err != nil {
			return errResp(resSystemError, "invalid offset")
		}
		rec, err := b.store.recordAt(phys)
		if err != nil {
			return errResp(resSystemError, fmt.Sprintf("can not find message by the offset %d", phys))
		}
		return okResp(nil, rec)
	case reqConsumerSendMsgBack:
		return b.handleSendBack(req)
	case reqEndTransaction:
		return b.handleEndTransaction(req)
	case reqLockBatchMQ, reqUnlockBatchMQ:
		return b.handleLock(req)
	case reqUpdateAndCreateTopic:
		r, _ := strconv.Atoi(req.ext("readQueueNums"))
		w, _ := strconv.Atoi(req.ext("writeQueueNums"))
		if err := b.store.setQueues(req.ext("topic"), max(r, w)); err != nil {
			return errResp(resSystemError, err.Error())
		}
		return okResp(nil, nil)
	default:
		return errResp(resRequestCodeNotSupp, fmt.Sprintf("request code %d is not supported by the embedded broker", req.Code))
	}
}

// sendHeader holds SendMessageRequestHeader; V2 (codes 310/320) uses one-letter names.
type sendHeader struct {
	topic             string
	queueID           int
	sysFlag           int32
	bornTimestamp     int64
	flag              int32
	props             string
	reconsumeTimes    int32
	maxReconsumeTimes int32
}

func parseSendHeader(req *command) (sendHeader, error) {
	ext := req.ExtFields
	name := func(long, short string) string {
		if _, v2 := ext["b"]; v2 {
			if _, v1 := ext["topic"]; !v1 {
				return ext[short]
			}
		}
		return ext[long]
	}
	var h sendHeader
	var err error
	num := func(long, short string) int64 {
		s := name(long, short)
		if s == "" || err != nil {
			return 0
		}
		v, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			err = fmt.Errorf("invalid %s %q", long, s)
		}
		return v
	}
	h.topic = name("topic", "b")
	h.queueID = int(num("queueId", "e"))
	h.sysFlag = int32(num("sysFlag", "f"))
	h.bornTimestamp = num("bornTimestamp", "g")
	h.flag = int32(num("flag", "h"))
	h.props = name("properties", "i")
	h.reconsumeTimes = int32(num("reconsumeTimes", "j"))
	h.maxReconsumeTimes = int32(num("maxReconsumeTimes", "l"))
	return h, err
}

func tcpHost(a net.Addr) [8]byte {
	var h [8]byte
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip4 := ta.IP.To4(); ip4 != nil {
			copy(h[:4], ip4)
		}
		h[4], h[5], h[6], h[7] = byte(ta.Port>>24), byte(ta.Port>>16), byte(ta.Port>>8), byte(ta.Port)
	}
	return h
}

func (b *Broker) handleSend(c *conn, req *command) *command {
	h, err := parseSendHeader(req)
	if err != nil {
		return errResp(resMessageIllegal, err.Error())
	}
	td, err := b.store.ensureTopic(h.topic, b.autoQueues(h.topic))
	if err != nil {
		return errResp(resMessageIllegal, err.Error())
	}
	n := td.queueCount()
	if n == 0 {
		return errResp(resSystemError, fmt.Sprintf("topic %s has no queues", h.topic))
	}
	qid := h.queueID
	if qid < 0 {
		qid = rand.IntN(n)
	}
	if qid >= n {
		return errResp(resSystemError, fmt.Sprintf("request queueId[%d] is illegal, topic %s has %d queues", qid, h.topic, n))
	}
	base := message{
		topic:          h.topic,
		queueID:        int32(qid),
		flag:           h.flag,
		sysFlag:        h.sysFlag,
		bornTimestamp:  h.bornTimestamp,
		bornHost:       tcpHost(c.nc.RemoteAddr()),
		reconsumeTimes: h.reconsumeTimes,
		props:          h.props,
	}
	var res putResult
	if req.Code == reqSendBatchMessage {
		entries, err := decodeBatch(req.Body)
		if err != nil {
			return errResp(resMessageIllegal, "malformed batch: "+err.Error())
		}
		msgs := make([]*message, len(entries))
		for i, e := range entries {
			m := base
			m.flag, m.body, m.props = e.flag, e.body, e.props
			m.sysFlag &^= sysFlagCompressed
			if err := m.validate(); err != nil {
				return errResp(resMessageIllegal, err.Error())
			}
			if lvl, _ := propValue(m.props, propDelay); lvl != "" && lvl != "0" {
				return errResp(resMessageIllegal, "delayed delivery is not supported for batched messages")
			}
			msgs[i] = &m
		}
		res, err = b.store.put(td, qid, msgs)
		if err != nil {
			return errResp(resSystemError, err.Error())
		}
	} else {
		m := base
		m.body = req.Body
		if err := m.validate(); err != nil {
			return errResp(resMessageIllegal, err.Error())
		}
		res, err = b.putMessage(&m, h.maxReconsumeTimes)
		if err != nil {
			return errResp(resSystemError, err.Error())
		}
	}
	ids := make([]string, len(res.phys))
	for i, p := range res.phys {
		ids[i] = offsetMsgID(b.storeHost, p)
	}
	return okResp(map[string]string{
		"msgId":       strings.Join(ids, ","),
		"queueId":     strconv.Itoa(qid),
		"queueOffset": itoa(res.queueOffset),
		"MSG_REGION":  defaultTraceRegion,
		"TRACE_ON":    "true",
	}, nil)
}

// putMessage stores one message, applying the broker-side redirections:
// exhausted retries go to the dead-letter topic, DELAY messages wait in the
// schedule topic, prepared transactional messages wait in the half topic.
func (b *Broker) putMessage(m *message, maxRetries int32) (putResult, error) {
	if maxRetries <= 0 {
		maxRetries = defaultMaxRetries
	}
	props := m.props
	if strings.HasPrefix(m.topic, retryPrefix) && m.reconsumeTimes >= maxRetries {
		p := parseProps(props)
		delete(p, propDelay)
		m.topic = dlqPrefix + strings.TrimPrefix(m.topic, retryPrefix)
		m.queueID = 0
		m.props = marshalProps(p)
		props = m.props
	}
	txPrepared := m.sysFlag&sysFlagTxMask == txPreparedType
	level := 0
	if v, ok := propValue(props, propDelay); ok && !txPrepared {
		level, _ = strconv.Atoi(v)
	}
	switch {
	case txPrepared:
		m.props = redirectProps(props, m.topic, m.queueID)
		m.topic, m.queueID = halfTopic, 0
	case level > 0:
		level = min(level, len(delayLevels))
		m.props = redirectProps(props, m.topic, m.queueID)
		m.topic, m.queueID = scheduleTopic, int32(level-1)
	}
	td, err := b.store.ensureTopic(m.topic, b.autoQueues(m.topic))
	if err != nil {
		return putResult{}, err
	}
	if int(m.queueID) >= td.queueCount() {
		m.queueID = 0
	}
	return b.store.put(td, int(m.queueID), []*message{m})
}

func redirectProps(props, topic string, qid int32) string {
	p := parseProps(props)
	p[propRealTopic] = topic
	p[propRealQID] = strconv.Itoa(int(qid))
	return marshalProps(p)
}

// restoreRedirected turns a schedule/half record back into a message for its
// real topic.
func (b *Broker) restoreRedirected(rec record) (*message, error) {
	m := rec.toMessage()
	p := parseProps(m.props)
	topic := p[propRealTopic]
	if topic == "" {
		return nil, fmt.Errorf("record without %s", propRealTopic)
	}
	qid, _ := strconv.Atoi(p[propRealQID])
	delete(p, propDelay)
	m.topic, m.queueID, m.props = topic, int32(qid), marshalProps(p)
	return m, nil
}

func (b *Broker) handleHeartbeat(c *conn, req *command) *command {
	var hb struct {
		ClientID  string              `json:"clientID"`
		Consumers []heartbeatConsumer `json:"consumerDataSet"`
	}
	if err := json.Unmarshal(req.Body, &hb); err != nil || hb.ClientID == "" {
		return errResp(resSystemError, "malformed heartbeat body")
	}
	b.notifyGroups(b.consumers.heartbeat(c, hb.ClientID, hb.Consumers, time.Now()))
	return okResp(nil, nil)
}

func queueArgs(req *command) (topic string, qid int, err error) {
	topic = req.ext("topic")
	qid, err = strconv.Atoi(req.ext("queueId"))
	if err != nil {
		err = fmt.Errorf("invalid queueId %q", req.ext("queueId"))
	}
	return topic, qid, err
}

func (b *Broker) handleQueryOffset(req *command) *command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	off, ok := b.store.consumerOffset(offsetKey{req.ext("consumerGroup"), topic, qid})
	if !ok || off < 0 {
		return errResp(resQueryNotFound, "Not found, maybe this group consumer boot first")
	}
	return okResp(map[string]string{"offset": itoa(off)}, nil)
}

func (b *Broker) handleUpdateOffset(req *command) *command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	off, err := strconv.ParseInt(req.ext("commitOffset"), 10, 64)
	if err != nil {
		return errResp(resSystemError, "invalid commitOffset")
	}
	b.store.commitOffset(offsetKey{req.ext("consumerGroup"), topic, qid}, off)
	return okResp(nil, nil)
}

func (b *Broker) handleOffsetQuery(req *command) *command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	var q *queueData
	if td := b.store.topic(topic); td != nil {
		q = td.queue(qid)
	}
	var v int64
	key := "offset"
	switch req.Code {
	case reqGetMaxOffset:
		if q != nil {
			v = q.maxOffset()
		}
	case reqGetMinOffset:
	case reqGetEarliestMsgStoretime:
		key = "timestamp"
		if q != nil {
			if pos, _, ok := q.entry(0); ok {
				if v, err = b.store.storeTimeAt(pos); err != nil {
					return errResp(resSystemError, err.Error())
				}
			}
		}
	case reqSearchOffsetByTimestamp:
		ts, err := strconv.ParseInt(req.ext("timestamp"), 10, 64)
		if err != nil {
			return errResp(resSystemError, "invalid timestamp")
		}
		if q != nil {
			if v, err = b.store.searchOffset(q, ts); err != nil {
				return errResp(resSystemError, err.Error())
			}
		}
	}
	return okResp(map[string]string{key: itoa(v)}, nil)
}

// handleSendBack re-queues a message the consumer failed to process into the
// group's retry topic (after the delay level), or the dead-letter topic once
// retries are exhausted.
func (b *Broker) handleSendBack(req *command) *command {
	group := req.ext("group")
	phys, err := strconv.ParseInt(req.ext("offset"), 10, 64)
	if err != nil || group == "" {
		return errResp(resSystemError, "invalid send-back request")
	}
	delayLevel, _ := strconv.Atoi(req.ext("delayLevel"))
	maxRetries := int32(defaultMaxRetries)
	if v, err := strconv.Atoi(req.ext("maxReconsumeTimes")); err == nil && v > 0 {
		maxRetries = int32(v)
	}
	rec, err := b.store.recordAt(phys)
	if err != nil {
		return errResp(resSystemError, fmt.Sprintf("look message by offset failed, %d", phys))
	}
	m := rec.toMessage()
	p := parseProps(m.props)
	if p[propRetry] == "" {
		p[propRetry] = m.topic
	}
	if p[propOriginID] == "" {
		origin := req.ext("originMsgId")
		if origin == "" {
			origin = offsetMsgID(b.storeHost, phys)
		}
		p[propOriginID] = origin
	}
	delete(p, propDelay)
	if m.reconsumeTimes >= maxRetries || delayLevel < 0 {
		m.topic = dlqPrefix + group
	} else {
		if delayLevel == 0 {
			delayLevel = 3 + int(m.reconsumeTimes)
		}
		p[propDelay] = strconv.Itoa(delayLevel)
		m.topic = retryPrefix + group
	}
	m.reconsumeTimes++
	m.queueID = 0
	m.props = marshalProps(p)
	if _, err := b.putMessage(m, maxRetries+1); err != nil {
		return errResp(resSystemError, err.Error())
	}
	return okResp(nil, nil)
}

func (b *Broker) handleEndTransaction(req *command) *command {
	typ, _ := strconv.Atoi(req.ext("commitOrRollback"))
	phys, err := strconv.ParseInt(req.ext("commitLogOffset"), 10, 64)
	if err != nil {
		return errResp(resSystemError, "invalid commitLogOffset")
	}
	if typ != txCommitType {
		// Rollback or unknown: the half message stays invisible (no check-back).
		return okResp(nil, nil)
	}
	rec, err := b.store.recordAt(phys)
	if err != nil || rec.topic() != halfTopic {
		return errResp(resSystemError, fmt.Sprintf("no prepared message at offset %d", phys))
	}
	m, err := b.restoreRedirected(rec)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	m.sysFlag = m.sysFlag&^sysFlagTxMask | txCommitType
	m.preparedTxOffset = phys
	if _, err := b.putMessage(m, 0); err != nil {
		return errResp(resSystemError, err.Error())
	}
	return okResp(nil, nil)
}

type lockBody struct {
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	MQs           []mq   `json:"mqSet"`
}

type mq struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

func (b *Broker) handleLock(req *command) *command {
	var body lockBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return errResp(resSystemError, "malformed lock request body")
	}
	keys := make([]lockKey, len(body.MQs))
	for i, q := range body.MQs {
		keys[i] = lockKey{topic: q.Topic, queue: q.QueueID}
	}
	if req.Code == reqUnlockBatchMQ {
		b.consumers.unlock(body.ConsumerGroup, body.ClientID, keys)
		return okResp(nil, nil)
	}
	locked := b.consumers.lock(body.ConsumerGroup, body.ClientID, keys, time.Now())
	out := make([]mq, len(locked))
	for i, k := range locked {
		out[i] = mq{Topic: k.topic, BrokerName: brokerName, QueueID: k.queue}
	}
	data, _ := json.Marshal(map[string]any{"lockOKMQSet": out})
	return okResp(nil, data)
}
