package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// DefaultDrain is how long a stop that names senders and receivers lets
// the receivers take what was acknowledged before it stops them (the
// engine's stop at the end of a run uses it too).
const DefaultDrain = 5 * time.Second

// drainQuiet is how long a draining receiver may receive nothing, with its
// backlog not empty and its connections up, before the drain ends: nothing
// more is coming.
const drainQuiet = time.Second

// StopInOrder stops workloads so that no message is counted lost that is
// merely on its way: first the workloads that only send, which wait for the
// acks of the sends already begun; then relays, then consumers, each after a
// drain of at most drain in which they receive what is still coming (it ends
// as soon as a receiver's backlog is empty, or when it received nothing for
// a second). Receivers are drained only when the stop names a workload that
// sends, running or not (a consumer stopped alone, as before a cold read,
// stops at once), and drain 0 skips the drain. Workloads of one stage stop
// concurrently.
func StopInOrder(ctx context.Context, ws []Workload, drain time.Duration) error {
	var stages [3][]Workload
	sends := false
	for _, w := range ws {
		switch r := w.Recorder().Role; {
		case r.Relays():
			stages[1] = append(stages[1], w)
			sends = true
		case r.Receives:
			stages[2] = append(stages[2], w)
		default:
			stages[0] = append(stages[0], w)
			sends = sends || r.Sends
		}
	}
	var errs []error
	for i, stage := range stages {
		if len(stage) == 0 {
			continue
		}
		if i > 0 && sends && drain > 0 {
			drainAll(ctx, stage, drain)
		}
		errs = append(errs, stopConcurrently(ctx, stage))
	}
	return errors.Join(errs...)
}

func stopConcurrently(ctx context.Context, ws []Workload) error {
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() {
			if err := w.Stop(ctx); err != nil {
				errs <- fmt.Errorf("workload %q: %w", w.Name(), err)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range ws {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// drainer is a workload told how its drain ended before it is stopped.
type drainer interface{ drained(settled bool) }

// drainAll drains the running receivers of ws together, for at most d.
func drainAll(ctx context.Context, ws []Workload, d time.Duration) {
	deadline := time.Now().Add(d)
	done := make(chan struct{}, len(ws))
	n := 0
	for _, w := range ws {
		if !w.Running() {
			continue
		}
		n++
		go func() {
			settled := waitDrained(ctx, w.Recorder(), deadline)
			if dr, ok := w.(drainer); ok {
				dr.drained(settled)
			}
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
}

// waitDrained waits until rec's backlog is empty, or it received nothing for
// drainQuiet with every connection up (settled: nothing more is coming), or
// the deadline passes (not settled: it was still receiving, a lagging
// consumer whose backlog is in flight).
func waitDrained(ctx context.Context, rec *metrics.Recorder, deadline time.Time) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last, lastAt := rec.Counters().Received, time.Now()
	for {
		if rec.Pending().Messages <= 0 {
			return true
		}
		now := time.Now()
		if n := rec.Counters().Received; n != last || rec.InOutage() {
			last, lastAt = n, now
		} else if now.Sub(lastAt) >= drainQuiet {
			return true
		}
		if !now.Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// settle tells the accounting that a receiving workload of group g stopped:
// if it was the group's last, the run decides what of its backlog is lost
// (Accounting.Settle). Targets that count a group's lag give the broker's
// count, read after the consumers committed; it is stored as the
// workload's lag too.
func settle(env *Shared, g *Group, target drivers.Target, topic, group string, lagEvery time.Duration, rec *metrics.Recorder, gaps bool) {
	env.Acct.Join(g, -1)
	var lag func() (int64, bool)
	if lr, ok := drivers.As[drivers.LagReader](target); ok {
		lag = func() (int64, bool) {
			if lagEvery <= 0 {
				return 0, false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			n, err := lr.Lag(ctx, topic, group)
			if err != nil {
				return 0, false
			}
			rec.SetLag(n)
			return n, true
		}
	}
	env.Acct.Settle(g, gaps, lag)
}
