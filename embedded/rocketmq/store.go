package rocketmq

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const (
	commitLogFile = "commitlog"
	topicsFile    = "topics.json"
	offsetsFile   = "offsets.json"

	maxQueuesPerTopic = 1024
)

var topicNameRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]+$`)

func validTopicName(t string) error {
	if t == "" || len(t) > maxTopicLen || !topicNameRE.MatchString(t) {
		return fmt.Errorf("invalid topic name %q (want 1-%d chars of [%%|a-zA-Z0-9_-])", t, maxTopicLen)
	}
	return nil
}

// store is one shared commit log file plus, per queue, an in-memory index of
// record positions and sizes (12 bytes per message), so backlogs live on disk.
type store struct {
	dir       string
	f         *os.File
	storeHost [8]byte

	appendMu sync.Mutex // serializes appends; guards size
	size     int64
	// committed is the log length readers may access.
	committed atomic.Int64

	topicsMu sync.RWMutex
	topics   map[string]*topicData

	offMu        sync.Mutex
	offsets      map[offsetKey]int64
	delayOffsets map[int]int64
}

type topicData struct {
	name    string
	mu      sync.RWMutex
	visible int // queues announced in routes and accepted for sends
	queues  []*queueData
}

type queueData struct {
	mu   sync.RWMutex
	pos  []int64
	size []uint32
	// wake is closed and replaced whenever a record is appended, releasing
	// suspended pulls.
	wake chan struct{}
}

type offsetKey struct {
	group, topic string
	queue        int
}

func newQueueData() *queueData { return &queueData{wake: make(chan struct{})} }

func (t *topicData) queueCount() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.visible
}

// queue returns a physical queue, including ones hidden by a shrink.
func (t *topicData) queue(id int) *queueData {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id < 0 || id >= len(t.queues) {
		return nil
	}
	return t.queues[id]
}

func (t *topicData) ensurePhysical(n int) {
	t.mu.Lock()
	for len(t.queues) < n {
		t.queues = append(t.queues, newQueueData())
	}
	t.mu.Unlock()
}

func (q *queueData) maxOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return int64(len(q.pos))
}

// entries copies up to n index entries starting at from, plus the wake
// channel current at that moment (so an append after the copy is not missed).
func (q *queueData) entries(from int64, n int) (pos []int64, size []uint32, maxOff int64, wake <-chan struct{}) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	maxOff = int64(len(q.pos))
	if from >= 0 && from < maxOff {
		end := from + int64(n)
		if end > maxOff {
			end = maxOff
		}
		pos = append([]int64(nil), q.pos[from:end]...)
		size = append([]uint32(nil), q.size[from:end]...)
	}
	return pos, size, maxOff, q.wake
}

func (q *queueData) entry(i int64) (pos int64, size uint32, ok bool) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if i < 0 || i >= int64(len(q.pos)) {
		return 0, 0, false
	}
	return q.pos[i], q.size[i], true
}

func openStore(dir string, storeHost [8]byte, logf func(string, ...any)) (*store, error) {
	s := &store{
		dir:          dir,
		storeHost:    storeHost,
		topics:       make(map[string]*topicData),
		offsets:      make(map[offsetKey]int64),
		delayOffsets: make(map[int]int64),
	}
	if err := s.loadMeta(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, commitLogFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	s.f = f
	if err := s.recover(logf); err != nil {
		_ = f.Close()
		return nil, err
	}
	return s, nil
}

// recover rebuilds the queue indexes from the commit log and cuts off a torn
// or corrupt tail.
func (s *store) recover(logf func(string, ...any)) error {
	// Queue counts from topics.json win over what the log implies, so a
	// shrunk topic stays shrunk.
	configured := make(map[string]bool, len(s.topics))
	for name := range s.topics {
		configured[name] = true
	}
	r := bufio.NewReaderSize(s.f, 1<<20)
	var off int64
	var buf []byte
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				return err
			}
			break
		}
		total := int(binary.BigEndian.Uint32(hdr[:]))
		if total < recordFixedSize || total > recordFixedSize+maxBodyLen+maxTopicLen+maxPropsLen {
			logf("commit log: bad record size %d at %d, truncating", total, off)
			break
		}
		if cap(buf) < total {
			buf = make([]byte, total)
		}
		buf = buf[:total]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[4:]); err != nil {
			logf("commit log: torn record at %d, truncating", off)
			break
		}
		rec, err := parseRecord(buf)
		if err != nil {
			logf("commit log: %v at %d, truncating", err, off)
			break
		}
		qid := int(rec.queueID())
		if qid < 0 || qid >= maxQueuesPerTopic {
			logf("commit log: bad queue id %d at %d, truncating", qid, off)
			break
		}
		td := s.topicLocked(rec.topic())
		td.ensurePhysical(qid + 1)
		if !configured[td.name] && td.visible < qid+1 {
			td.visible = qid + 1
		}
		q := td.queues[qid]
		if rec.queueOffset() != int64(len(q.pos)) {
			logf("commit log: queue offset gap at %d, truncating", off)
			break
		}
		q.pos = append(q.pos, off)
		q.size = append(q.size, uint32(total))
		off += int64(total)
	}
	if err := s.f.Truncate(off); err != nil {
		return err
	}
	s.size = off
	s.committed.Store(off)
	return nil
}

// topicLocked returns the topic, creating it with no queues; only for
// single-goroutine recovery.
func (s *store) topicLocked(name string) *topicData {
	td := s.topics[name]
	if td == nil {
		td = &topicData{name: name}
		s.topics[name] = td
	}
	return td
}

func (s *store) topic(name string) *topicData {
	s.topicsMu.RLock()
	defer s.topicsMu.RUnlock()
	return s.topics[name]
}

// ensureTopic returns the topic, creating it with queues queues if missing.
func (s *store) ensureTopic(name string, queues int) (*topicData, error) {
	if td := s.topic(name); td != nil {
		return td, nil
	}
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	s.topicsMu.Lock()
	defer s.topicsMu.Unlock()
	if td := s.topics[name]; td != nil {
		return td, nil
	}
	td := &topicData{name: name, visible: queues}
	td.ensurePhysical(queues)
	s.topics[name] = td
	return td, nil
}

// setQueues creates the topic or changes its queue count. Shrinking only hides
// queues; their data stays readable.
func (s *store) setQueues(name string, queues int) error {
	if queues <= 0 || queues > maxQueuesPerTopic {
		return fmt.Errorf("queue count %d out of range 1-%d", queues, maxQueuesPerTopic)
	}
	td, err := s.ensureTopic(name, queues)
	if err != nil {
		return err
	}
	td.ensurePhysical(queues)
	td.mu.Lock()
	td.visible = queues
	td.mu.Unlock()
	return nil
}

func (s *store) topicNames() []string {
	s.topicsMu.RLock()
	defer s.topicsMu.RUnlock()
	out := make([]string, 0, len(s.topics))
	for n := range s.topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// putResult describes stored records.
type putResult struct {
	queueOffset int64   // of the first record
	phys        []int64 // per record
}

// put appends msgs, all for the same topic and queue, as one write.
func (s *store) put(td *topicData, qid int, msgs []*message) (putResult, error) {
	q := td.queue(qid)
	if q == nil {
		return putResult{}, fmt.Errorf("queue %d of topic %s does not exist", qid, td.name)
	}
	total := 0
	for _, m := range msgs {
		total += m.recordSize()
	}
	buf := make([]byte, 0, total)
	starts := make([]int, len(msgs))
	for i, m := range msgs {
		starts[i] = len(buf)
		buf = appendRecord(buf, m, s.storeHost)
	}

	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	// Only appenders change len(q.pos), and they hold appendMu.
	base := int64(len(q.pos))
	now := time.Now().UnixMilli()
	res := putResult{queueOffset: base, phys: make([]int64, len(msgs))}
	for i, st := range starts {
		phys := s.size + int64(st)
		binary.BigEndian.PutUint64(buf[st+offQueueOffset:], uint64(base+int64(i)))
		binary.BigEndian.PutUint64(buf[st+offPhysOffset:], uint64(phys))
		binary.BigEndian.PutUint64(buf[st+offStoreTimestamp:], uint64(now))
		res.phys[i] = phys
	}
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		return putResult{}, fmt.Errorf("write commit log: %w", err)
	}
	s.size += int64(len(buf))
	s.committed.Store(s.size)

	q.mu.Lock()
	for i, st := range starts {
		end := len(buf)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		q.pos = append(q.pos, res.phys[i])
		q.size = append(q.size, uint32(end-st))
	}
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
	return res, nil
}

// readRecords reads the given index entries into one buffer, coalescing
// records that are adjacent in the log.
func (s *store) readRecords(pos []int64, size []uint32) ([]byte, error) {
	total := 0
	for _, sz := range size {
		total += int(sz)
	}
	out := make([]byte, total)
	w := 0
	for i := 0; i < len(pos); {
		j, n := i+1, int(size[i])
		for j < len(pos) && pos[j] == pos[j-1]+int64(size[j-1]) {
			n += int(size[j])
			j++
		}
		if _, err := s.f.ReadAt(out[w:w+n], pos[i]); err != nil {
			return nil, fmt.Errorf("read commit log: %w", err)
		}
		w += n
		i = j
	}
	return out, nil
}

// recordAt reads the record at a physical offset (send-back, view by id).
func (s *store) recordAt(phys int64) (record, error) {
	committed := s.committed.Load()
	if phys < 0 || phys+recordFixedSize > committed {
		return nil, fmt.Errorf("no message at offset %d", phys)
	}
	var hdr [8]byte
	if _, err := s.f.ReadAt(hdr[:], phys); err != nil {
		return nil, err
	}
	total := int64(binary.BigEndian.Uint32(hdr[:4]))
	if binary.BigEndian.Uint32(hdr[4:]) != recordMagic || total < recordFixedSize || phys+total > committed {
		return nil, fmt.Errorf("no message at offset %d", phys)
	}
	buf := make([]byte, total)
	if _, err := s.f.ReadAt(buf, phys); err != nil {
		return nil, err
	}
	return parseRecord(buf)
}

// storeTimeAt reads a record's store timestamp from the log.
func (s *store) storeTimeAt(pos int64) (int64, error) {
	var b [8]byte
	if _, err := s.f.ReadAt(b[:], pos+offStoreTimestamp); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b[:])), nil
}

// searchOffset returns the first queue offset stored at or after ts (ms), or
// the max offset when every message is older.
func (s *store) searchOffset(q *queueData, ts int64) (int64, error) {
	lo, hi := int64(0), q.maxOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		pos, _, ok := q.entry(mid)
		if !ok {
			break
		}
		st, err := s.storeTimeAt(pos)
		if err != nil {
			return 0, err
		}
		if st < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

func (s *store) commitOffset(k offsetKey, off int64) {
	s.offMu.Lock()
	s.offsets[k] = off
	s.offMu.Unlock()
}

func (s *store) consumerOffset(k offsetKey) (int64, bool) {
	s.offMu.Lock()
	defer s.offMu.Unlock()
	off, ok := s.offsets[k]
	return off, ok
}

type metaTopics struct {
	Topics map[string]int `json:"topics"`
}

type metaOffsets struct {
	ConsumerOffsets []metaOffset  `json:"consumerOffsets"`
	DelayOffsets    map[int]int64 `json:"delayOffsets"`
}

type metaOffset struct {
	Group  string `json:"group"`
	Topic  string `json:"topic"`
	Queue  int    `json:"queueId"`
	Offset int64  `json:"offset"`
}

func (s *store) loadMeta() error {
	var mt metaTopics
	if err := readJSON(filepath.Join(s.dir, topicsFile), &mt); err != nil {
		return err
	}
	for name, n := range mt.Topics {
		if n <= 0 || n > maxQueuesPerTopic || validTopicName(name) != nil {
			continue
		}
		td := &topicData{name: name, visible: n}
		td.ensurePhysical(n)
		s.topics[name] = td
	}
	var mo metaOffsets
	if err := readJSON(filepath.Join(s.dir, offsetsFile), &mo); err != nil {
		return err
	}
	for _, o := range mo.ConsumerOffsets {
		s.offsets[offsetKey{o.Group, o.Topic, o.Queue}] = o.Offset
	}
	for l, o := range mo.DelayOffsets {
		s.delayOffsets[l] = o
	}
	return nil
}

// saveMeta persists topic queue counts and consumer offsets next to the log.
func (s *store) saveMeta() error {
	mt := metaTopics{Topics: make(map[string]int)}
	s.topicsMu.RLock()
	for name, td := range s.topics {
		mt.Topics[name] = td.queueCount()
	}
	s.topicsMu.RUnlock()
	mo := metaOffsets{DelayOffsets: make(map[int]int64)}
	s.offMu.Lock()
	for k, v := range s.offsets {
		mo.ConsumerOffsets = append(mo.ConsumerOffsets, metaOffset{k.group, k.topic, k.queue, v})
	}
	for l, v := range s.delayOffsets {
		mo.DelayOffsets[l] = v
	}
	s.offMu.Unlock()
	sort.Slice(mo.ConsumerOffsets, func(i, j int) bool {
		a, b := mo.ConsumerOffsets[i], mo.ConsumerOffsets[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Queue < b.Queue
	})
	return errors.Join(
		writeJSON(filepath.Join(s.dir, topicsFile), mt),
		writeJSON(filepath.Join(s.dir, offsetsFile), mo),
	)
}

// close flushes the log when it is meant to outlive the broker.
func (s *store) close(sync bool) error {
	var err error
	if sync {
		err = s.f.Sync()
	}
	return errors.Join(err, s.f.Close())
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON replaces path atomically so a crash never leaves half a file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (s *store) delayOffset(level int) int64 {
	s.offMu.Lock()
	defer s.offMu.Unlock()
	return s.delayOffsets[level]
}

func (s *store) setDelayOffset(level int, off int64) {
	s.offMu.Lock()
	s.delayOffsets[level] = off
	s.offMu.Unlock()
}
