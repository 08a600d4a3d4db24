package workloads

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planrun/planrun/drivers"
)

// asyncSender is a running start's one sending goroutine for a driver that
// takes messages without waiting for their acknowledgement
// (drivers.AsyncSender). It claims due times from the pacer, hands each
// message over, and counts the outcome in the driver's completion: no
// goroutine per thread, no wake-up per acknowledgement. The workload's
// threads bound the messages in flight, as N synchronous threads would.
type asyncSender struct {
	p       *Producer
	as      drivers.AsyncSender
	resolve drivers.TopicResolver
	flight  context.Context
	sources int
	gather  time.Duration
	stream  uint32
	seqs    *atomic.Uint64

	limit    atomic.Int64
	inflight atomic.Int64
	// threads and rate make the limit (see limitOf).
	limitMu sync.Mutex
	threads int
	rate    Rate
	room    chan struct{} // signalled after each completion
	free    sync.Pool     // *asyncSend, with their value buffers
}

// gatherer is a producer that batches what it is handed over within some
// time anyway (Kafka's linger): sends due within Gather of each other may
// be handed over together, see Pacer.Wait.
type gatherer interface {
	Gather() time.Duration
}

// spawnAsyncLocked starts the sending goroutine of a running start.
func (p *Producer) spawnAsyncLocked(s *sending, as drivers.AsyncSender) {
	if len(p.seqs) == 0 {
		p.seqs = append(p.seqs, new(atomic.Uint64))
	}
	a := &asyncSender{p: p, as: as, flight: s.flight, sources: s.sources, room: make(chan struct{}, 1),
		stream: uint32(p.id) << 16, seqs: p.seqs[0]}
	a.resolve, _ = s.dp.(drivers.TopicResolver)
	if g, ok := s.dp.(gatherer); ok {
		a.gather = g.Gather()
	}
	a.threads, a.rate = p.spec.Threads, p.rate
	a.limit.Store(a.limitOf())
	s.async = a
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancels = append(s.cancels, cancel)
	s.active++
	go func() {
		a.run(ctx, s.pacer)
		cancel()
		p.rateMu.Lock()
		defer p.rateMu.Unlock()
		if s.active--; s.active == 0 {
			close(s.done)
		}
	}()
}

// lingerRoom is the time beyond the linger that a batched message may
// take to be acknowledged before it holds back the next ones.
const lingerRoom = 100 * time.Millisecond

// limitOf is how many messages may be in flight: the threads, as that
// many synchronous senders would have, plus, for a driver that holds
// messages back to batch them (a linger), what the highest rate the
// producer is asked for sends during the linger and lingerRoom. Without
// that allowance a linger would cap the rate near threads/(linger + round
// trip): 32 threads and Kafka's 5 ms gave about 6,000 msg/s on one local
// broker, where a client batching in the background, as Kafka's own,
// keeps up.
func (a *asyncSender) limitOf() int64 {
	n := int64(max(a.threads, 1))
	if a.gather > 0 {
		n += int64(math.Ceil(a.rate.Peak()*(a.gather+lingerRoom).Seconds() - 1e-9))
	}
	return n
}

// setLimit changes the threads that bound the messages in flight.
func (a *asyncSender) setLimit(threads int) {
	a.limitMu.Lock()
	a.threads = threads
	a.limit.Store(a.limitOf())
	a.limitMu.Unlock()
	a.signal()
}

// setRate changes the rate the linger allowance is made for.
func (a *asyncSender) setRate(r Rate) {
	a.limitMu.Lock()
	a.rate = r
	a.limit.Store(a.limitOf())
	a.limitMu.Unlock()
	a.signal()
}

func (a *asyncSender) signal() {
	select {
	case a.room <- struct{}{}:
	default:
	}
}

// run sends until ctx ends or the pacer's count is reached, then waits for
// the messages in flight (until a stop gives up on them).
func (a *asyncSender) run(ctx context.Context, pacer *Pacer) {
	p := a.p
	size := int(p.spec.Size)
	var w Waiter
	defer w.Stop()
	var m drivers.Message
	for a.waitRoom(ctx) {
		k, due, ok := pacer.Wait(ctx, &w, a.gather)
		if !ok {
			break
		}
		p.sent.Add(1)
		r, _ := a.free.Get().(*asyncSend)
		if r == nil {
			r = &asyncSend{a: a, value: make([]byte, size)}
		}
		seq := a.seqs.Add(1) - 1
		r.due = due
		r.h = Header{Run: p.env.Run, Producer: a.stream, Seq: seq, SentAt: due.UnixNano()}
		r.full = size >= HeaderSize
		if r.full {
			r.h.Put(r.value)
		} else if size >= ShortHeaderSize {
			PutShort(r.value, seq, due, p.env.Start)
		}
		m = drivers.Message{Topic: p.spec.Topic, Value: r.value, Source: int(k % int64(a.sources))}
		switch p.spec.Keys {
		case "sequence":
			r.key = AppendSequenceKey(r.key[:0], a.stream, seq)
			m.Key = r.key
		case "random":
			r.key = strconv.AppendUint(r.key[:0], rand.Uint64(), 16)
			m.Key = r.key
		}
		r.topic = concreteTopic(a.resolve, &m)
		p.rec.Sent(due)
		a.inflight.Add(1)
		if err := a.as.SendAsync(a.flight, &m, r); err != nil {
			a.inflight.Add(-1)
			a.free.Put(r)
			if a.flight.Err() != nil {
				break
			}
			a.failed(err, due)
		}
	}
	for a.inflight.Load() > 0 {
		select {
		case <-a.room:
		case <-a.flight.Done():
			return
		}
	}
}

// waitRoom waits until fewer messages than the limit are in flight.
func (a *asyncSender) waitRoom(ctx context.Context) bool {
	for a.inflight.Load() >= a.limit.Load() {
		select {
		case <-a.room:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

func (a *asyncSender) failed(err error, due time.Time) {
	p := a.p
	p.rec.Failed(due)
	sendFailed(newSink(p.rec, 0, 1), err)
	if p.warnedOnce.CompareAndSwap(false, true) {
		p.env.Warn(fmt.Sprintf("workload %q: send failed: %v (further failures are counted, not printed)", p.name, err))
	}
}

// asyncSend is one message in flight; it is reused once done.
type asyncSend struct {
	a          *asyncSender
	value, key []byte
	due        time.Time
	h          Header
	full       bool
	topic      string
}

// Done implements drivers.Completion.
func (r *asyncSend) Done(err error) {
	a := r.a
	p := a.p
	switch {
	case err == nil:
		now := time.Now()
		p.rec.Acked(len(r.value), now.Sub(r.due), now)
		p.env.Acct.Ack(p.targetName, r.topic, r.h, r.full, len(r.value))
	case a.flight.Err() == nil: // else abandoned at a stop that timed out: neither acked nor failed
		a.failed(err, r.due)
	}
	r.topic = ""
	a.free.Put(r)
	a.inflight.Add(-1)
	a.signal()
}
