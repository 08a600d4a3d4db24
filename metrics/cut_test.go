package metrics

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Phase changes while goroutines record: every message, with its latency,
// lands in exactly one phase, and the phases add up to the run's totals.
func TestPhaseCutsAreAtomic(t *testing.T) {
	start := time.Now()
	c := NewCollector(start)
	r := NewRecorder("c", "relay", Role{Sends: true, Receives: true})
	c.Add(r)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() && i < 20000; i++ {
				now := time.Now()
				r.Sent(now.Add(-time.Millisecond))
				r.Acked(10, time.Millisecond, now)
				r.Receipt(10, time.Millisecond, now, i%7 == g, false)
				if i%11 == 0 {
					r.Received(10, -1, now)
				}
			}
		}()
	}
	for i := range 50 {
		c.StartPhase(fmt.Sprintf("p%d", i), start.Add(time.Duration(i+1)*time.Millisecond))
	}
	stop.Store(true)
	wg.Wait()
	s := c.Finish(start.Add(time.Second))
	var sum Stats
	for _, ph := range s.Phases {
		p := ph.Workloads["c"]
		if p.Latency.Count != p.Acked || p.E2E.Count != p.Received-p.Untracked || p.Received != p.Distinct+p.Duplicates+p.Untracked {
			t.Fatalf("phase %s: acked %d with %d latencies; received %d = distinct %d + duplicates %d + untracked %d, %d end-to-end latencies",
				ph.Name, p.Acked, p.Latency.Count, p.Received, p.Distinct, p.Duplicates, p.Untracked, p.E2E.Count)
		}
		sum.Sent += p.Sent
		sum.Acked += p.Acked
		sum.Received += p.Received
		sum.Distinct += p.Distinct
		sum.Duplicates += p.Duplicates
		sum.Untracked += p.Untracked
	}
	run := s.Workloads["c"]
	got := []int64{sum.Sent, sum.Acked, sum.Received, sum.Distinct, sum.Duplicates, sum.Untracked}
	want := []int64{run.Sent, run.Acked, run.Received, run.Distinct, run.Duplicates, run.Untracked}
	if fmt.Sprint(got) != fmt.Sprint(want) || run.Acked == 0 {
		t.Errorf("phases sum to sent, acked, received, distinct, duplicates, untracked %v; the run has %v", got, want)
	}
}
