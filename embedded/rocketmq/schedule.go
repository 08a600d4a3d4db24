package rocketmq

import "time"

// scheduleTopic holds delayed messages, one queue per delay level, as in the
// Java broker. Each queue is in due-time order, so delivery only looks at
// queue heads.
const scheduleTopic = "SCHEDULE_TOPIC_XXXX"

// delayLevels is the default messageDelayLevel of the Java broker.
var delayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

const scheduleTick = 100 * time.Millisecond

func (b *Broker) scheduleLoop() {
	defer b.wg.Done()
	t := time.NewTicker(scheduleTick)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case now := <-t.C:
			b.deliverDue(now)
		}
	}
}

// deliverDue moves delayed messages whose time has come to their real topic.
func (b *Broker) deliverDue(now time.Time) {
	td := b.store.topic(scheduleTopic)
	if td == nil {
		return
	}
	for i, delay := range delayLevels {
		q := td.queue(i)
		if q == nil {
			continue
		}
		level := i + 1
		cursor := b.store.delayOffset(level)
		for {
			select {
			case <-b.done:
				return
			default:
			}
			pos, size, ok := q.entry(cursor)
			if !ok {
				break
			}
			data, err := b.store.readRecords([]int64{pos}, []uint32{size})
			if err != nil {
				b.logf("rocketmq: read delayed message: %v", err)
				break
			}
			if rec, err := parseRecord(data); err != nil {
				b.logf("rocketmq: skip delayed message at %d: %v", pos, err)
			} else if rec.storeTimestamp()+delay.Milliseconds() > now.UnixMilli() {
				break
			} else if err := b.deliverRedirected(rec); err != nil {
				b.logf("rocketmq: drop delayed message at %d: %v", pos, err)
			}
			cursor++
			b.store.setDelayOffset(level, cursor)
		}
	}
}

func (b *Broker) deliverRedirected(rec record) error {
	m, err := b.restoreRedirected(rec)
	if err != nil {
		return err
	}
	td, err := b.store.ensureTopic(m.topic, b.autoQueues(m.topic))
	if err != nil {
		return err
	}
	if int(m.queueID) >= td.queueCount() || m.queueID < 0 {
		m.queueID = 0
	}
	_, err = b.store.put(td, int(m.queueID), []*message{m})
	return err
}
