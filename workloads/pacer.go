package workloads

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Pacer decides when each send is due. With a rate, message k of a start is
// due when the rate's integral since the start reaches k, whatever happened
// to earlier sends, so a slow broker shows up as latency measured from the
// due time instead of as fewer sends (no coordinated omission). The rate
// may follow a schedule of stages and may be changed while sends go on
// (SetRate); due times already handed out stay as they were. Without a
// rate every send is due at once.
type Pacer struct {
	sched atomic.Pointer[schedule]
	next  atomic.Int64
	limit int64 // messages this pacer may hand out; <0 = unlimited

	mu      sync.Mutex    // serializes SetRate
	changed chan struct{} // closed and replaced at each SetRate
}

// NewPacer starts a fixed rate at start.
func NewPacer(start time.Time, rate float64, limit int64) *Pacer {
	return NewSchedulePacer(start, FixedRate(rate), limit)
}

// NewSchedulePacer starts a rate schedule at start.
func NewSchedulePacer(start time.Time, r Rate, limit int64) *Pacer {
	p := &Pacer{limit: limit, changed: make(chan struct{})}
	p.sched.Store(newSchedule(start, r, 0, 0))
	return p
}

// SetRate replaces the schedule from now on: a new schedule's ramps start
// from the rate in force now, and messages already due stay due (a
// producer that is behind stays behind by as many messages).
func (p *Pacer) SetRate(now time.Time, r Rate) { p.setRate(now, r, false) }

// ResetRate replaces the schedule from now on as if the pacer had just
// started with r: messages due but not yet claimed are forgiven.
func (p *Pacer) ResetRate(now time.Time, r Rate) { p.setRate(now, r, true) }

func (p *Pacer) setRate(now time.Time, r Rate, reset bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.sched.Load()
	var before, n0 float64
	if old.unlimited || reset {
		n0 = float64(p.next.Load())
	} else {
		t := now.Sub(old.start).Seconds()
		before, n0 = old.rateAt(t), old.countAt(t)
	}
	p.sched.Store(newSchedule(now, r, before, n0))
	close(p.changed)
	p.changed = make(chan struct{})
}

// RateAt is the target rate at t (0 = as fast as acks allow).
func (p *Pacer) RateAt(t time.Time) float64 {
	s := p.sched.Load()
	return s.rateAt(t.Sub(s.start).Seconds())
}

func (p *Pacer) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Next claims the next send: its index and due time. It waits until the
// due time (or ctx ends) and returns ok=false when the limit is reached or
// ctx is done.
func (p *Pacer) Next(ctx context.Context) (k int64, due time.Time, ok bool) {
	var w Waiter
	defer w.Stop()
	return p.Wait(ctx, &w, 0)
}

// Wait is Next with the caller's timer, reused from one send to the next,
// and a gather time: a send that is not yet due waits at least gather, so
// that the sends falling due meanwhile go out together after it (one
// wake-up per gather instead of one per message). Due times, and latency
// measured from them, are the same either way; a send leaves at most
// gather after its due time.
func (p *Pacer) Wait(ctx context.Context, w *Waiter, gather time.Duration) (k int64, due time.Time, ok bool) {
	k = p.next.Add(1) - 1
	if p.limit >= 0 && k >= p.limit {
		return k, time.Time{}, false
	}
	for {
		s := p.sched.Load()
		if s.unlimited {
			return k, time.Now(), ctx.Err() == nil
		}
		d, reached := s.due(k)
		wait := time.Until(d)
		if reached && wait <= 0 {
			return k, d, ctx.Err() == nil
		}
		// A schedule that may still change is watched while waiting: a
		// send claimed under a rate of 0 would otherwise never go.
		var changed <-chan struct{}
		if !reached || wait > 100*time.Millisecond {
			changed = p.changes()
			if p.sched.Load() != s {
				continue
			}
		}
		var fired <-chan time.Time
		if reached {
			fired = w.arm(max(wait, gather))
		}
		select {
		case <-ctx.Done():
			w.Stop()
			return k, d, false
		case <-fired:
			return k, d, ctx.Err() == nil
		case <-changed:
			w.Stop()
		}
	}
}

// Waiter is one timer reused for many waits.
type Waiter struct{ t *time.Timer }

func (w *Waiter) arm(d time.Duration) <-chan time.Time {
	if w.t == nil {
		w.t = time.NewTimer(d)
	} else {
		w.t.Reset(d) // since Go 1.23 no stale value is left in C
	}
	return w.t.C
}

// Stop releases the timer's pending wake-up, if any.
func (w *Waiter) Stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
