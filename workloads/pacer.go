package workloads

import (
	"context"
	"sync/atomic"
	"time"
)

// Pacer decides when each send is due. With a rate, message k of a start is
// due at start + k/rate whatever happened to earlier sends, so a slow broker
// shows up as latency measured from the due time instead of as fewer sends
// (no coordinated omission). Without a rate every send is due at once.
type Pacer struct {
	start time.Time
	rate  float64 // messages per second; 0 = as fast as possible
	next  atomic.Int64
	limit int64 // messages this pacer may hand out; <0 = unlimited
}

// NewPacer starts a schedule at start.
func NewPacer(start time.Time, rate float64, limit int64) *Pacer {
	return &Pacer{start: start, rate: rate, limit: limit}
}

// Next claims the next send: its index and due time. It waits until the
// due time (or ctx ends) and returns ok=false when the limit is reached or
// ctx is done.
func (p *Pacer) Next(ctx context.Context) (k int64, due time.Time, ok bool) {
	k = p.next.Add(1) - 1
	if p.limit >= 0 && k >= p.limit {
		return k, time.Time{}, false
	}
	if p.rate <= 0 {
		return k, time.Now(), ctx.Err() == nil
	}
	due = p.start.Add(time.Duration(float64(k) / p.rate * float64(time.Second)))
	if wait := time.Until(due); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return k, due, false
		case <-t.C:
		}
	}
	return k, due, ctx.Err() == nil
}
