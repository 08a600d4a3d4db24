package rocketmq

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	pullFlagCommitOffset = 0x1
	pullFlagSuspend      = 0x2
	pullFlagSubscription = 0x4
)

type pullResult struct {
	code      int
	remark    string
	next, max int64
	body      []byte
	wake      <-chan struct{}
}

func (r *pullResult) command() *command {
	return &command{
		Code:   r.code,
		Remark: r.remark,
		ExtFields: map[string]string{
			"nextBeginOffset":      itoa(r.next),
			"minOffset":            "0",
			"maxOffset":            itoa(r.max),
			"suggestWhichBrokerId": "0",
		},
		Body: r.body,
	}
}

// tagFilter returns the accepted tags, nil meaning every message.
func tagFilter(expr string) map[string]bool {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil
	}
	tags := make(map[string]bool)
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			tags[t] = true
		}
	}
	return tags
}

// handlePull serves PULL_MESSAGE. When nothing is available and the client
// allows suspension, the request is held until a message arrives in the
// queue or the client's suspend timeout passes (long polling).
func (b *Broker) handlePull(c *conn, req *command) *command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	var num [5]int64
	for i, k := range []string{"queueOffset", "maxMsgNums", "sysFlag", "commitOffset", "suspendTimeoutMillis"} {
		if s := req.ext(k); s != "" {
			if num[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				return errResp(resSystemError, fmt.Sprintf("invalid %s %q", k, s))
			}
		}
	}
	offset, maxNums, sysFlag, commitOffset, suspendMs := num[0], int(num[1]), num[2], num[3], num[4]
	group := req.ext("consumerGroup")

	td := b.store.topic(topic)
	if td == nil {
		return errResp(resTopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", topic))
	}
	q := td.queue(qid)
	if q == nil {
		return errResp(resSystemError, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d]", qid, topic, td.queueCount()))
	}
	if sysFlag&pullFlagCommitOffset != 0 && commitOffset >= 0 && group != "" {
		b.store.commitOffset(offsetKey{group, topic, qid}, commitOffset)
	}

	expr, expType := req.ext("subscription"), req.ext("expressionType")
	if sysFlag&pullFlagSubscription == 0 {
		if s, ok := b.consumers.subscription(group, topic); ok {
			expr, expType = s.expr, s.expType
		} else {
			expr, expType = "*", "TAG"
		}
	}
	if expType != "" && expType != "TAG" {
		return errResp(resSubscriptionNotSupp, fmt.Sprintf("the embedded broker supports only TAG filtering, not %s", expType))
	}
	tags := tagFilter(expr)
	if maxNums <= 0 {
		maxNums = 32
	}
	maxNums = min(maxNums, maxPullMsgs)

	var deadline <-chan time.Time
	if sysFlag&pullFlagSuspend != 0 && suspendMs > 0 {
		wait := maxSuspend
		if suspendMs < int64(maxSuspend/time.Millisecond) {
			wait = time.Duration(suspendMs) * time.Millisecond
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	parked := false
	defer func() {
		if parked {
			b.parks.leave(parkKey{group, topic, qid}, c)
		}
	}()
	for {
		res := b.pullOnce(q, offset, maxNums, tags)
		if res.code != resPullNotFound || deadline == nil {
			return res.command()
		}
		// Nothing to deliver yet: wait for an append or the timeout.
		if !parked {
			parked = true
			b.parks.enter(parkKey{group, topic, qid}, c)
		}
		select {
		case <-res.wake:
			continue
		case <-deadline:
			return res.command()
		case <-b.done:
			return errResp(resSystemError, "broker shutting down")
		case <-c.closed:
			return nil
		}
	}
}

// pullOnce reads from offset without waiting, following the Java store's
// status mapping (OFFSET_OVERFLOW_ONE -> PULL_NOT_FOUND, OFFSET_OVERFLOW_BADLY
// and OFFSET_TOO_SMALL -> PULL_OFFSET_MOVED, NO_MATCHED -> PULL_RETRY_IMMEDIATELY).
func (b *Broker) pullOnce(q *queueData, offset int64, maxNums int, tags map[string]bool) pullResult {
	pos, size, maxOff, wake := q.entries(offset, maxNums)
	r := pullResult{max: maxOff, wake: wake}
	switch {
	case maxOff == 0 && offset == 0:
		r.code = resPullNotFound
		return r
	case offset < 0 || offset > maxOff || maxOff == 0:
		r.code, r.next = resPullOffsetMoved, 0
		r.remark = fmt.Sprintf("offset %d is outside [0, %d]", offset, maxOff)
		return r
	case offset == maxOff:
		r.code, r.next = resPullNotFound, offset
		return r
	}

	var body []byte
	matched, scanned := 0, 0
	for len(pos) > 0 {
		// Respect the byte cap, but always make progress.
		n, bytes := 0, len(body)
		for n < len(pos) && (n == 0 && bytes == 0 || bytes+int(size[n]) <= maxPullBytes) {
			bytes += int(size[n])
			n++
		}
		if n == 0 {
			break
		}
		data, err := b.store.readRecords(pos[:n], size[:n])
		if err != nil {
			r.code, r.remark = resSystemError, err.Error()
			return r
		}
		if tags == nil {
			if body == nil {
				body = data
			} else {
				body = append(body, data...)
			}
			matched += n
			scanned += n
		} else {
			for p, i := 0, 0; i < n && matched < maxNums; i++ {
				sz := int(size[i])
				rec, err := parseRecord(data[p : p+sz])
				p += sz
				scanned++
				if err != nil {
					continue
				}
				if tag, ok := propValue(rec.props(), propTags); ok && tags[tag] {
					body = append(body, rec...)
					matched++
				}
			}
		}
		if matched >= maxNums || len(body) >= maxPullBytes || scanned >= maxFilterScan || n < len(pos) {
			break
		}
		pos, size, _, _ = q.entries(offset+int64(scanned), min(maxNums-matched, maxFilterScan-scanned))
	}
	r.next = offset + int64(scanned)
	if matched == 0 {
		r.code = resPullRetryImmediately
		return r
	}
	r.code, r.body = resSuccess, body
	return r
}

type parkKey struct {
	group, topic string
	queue        int
}

// parkTable tracks pulls waiting for messages, per group and queue: a group
// with a parked pull on each of its queues has consumed everything.
type parkTable struct {
	mu sync.Mutex
	m  map[parkKey]map[*conn]int
}

func (p *parkTable) enter(k parkKey, c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[parkKey]map[*conn]int)
	}
	if p.m[k] == nil {
		p.m[k] = make(map[*conn]int)
	}
	p.m[k][c]++
}

func (p *parkTable) leave(k parkKey, c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[k][c]--; p.m[k][c] <= 0 {
		delete(p.m[k], c)
	}
	if len(p.m[k]) == 0 {
		delete(p.m, k)
	}
}

// parkedQueues counts the group's queues with a pull parked on a live connection.
func (p *parkTable) parkedQueues(group string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, conns := range p.m {
		if k.group != group {
			continue
		}
		for c := range conns {
			if !c.isClosed() {
				n++
				break
			}
		}
	}
	return n
}
