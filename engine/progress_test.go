package engine

import (
	"math"
	"testing"
	"time"

	"github.com/planrun/planrun/metrics"
)

// A progress line's rate is over the time the workload ran since the
// previous line: 1498 messages sent in the 1.5 s a workload ran of a 5 s
// interval are 998.7 msg/s, not 299.6.
func TestProgressRateOverRunningTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	rec := metrics.NewRecorder("producer", "produce", metrics.Role{Sends: true})
	rates := intervalRates{}
	for _, c := range []struct {
		t                float64
		start, stop      bool
		count, bytes     int64 // counted so far
		wantMsgs, wantMB float64
	}{
		{t: 0},
		{t: 3.5, start: true},
		{t: 5, count: 1498, bytes: 1498e3, wantMsgs: 1498 / 1.5, wantMB: 1498e3 / 1.5 / 1e6},
		{t: 10, count: 6498, bytes: 6498e3, wantMsgs: 1000, wantMB: 1},
		{t: 12, stop: true, count: 8498},
		{t: 14, start: true, count: 8498},
		{t: 15, count: 9498, wantMsgs: 1000},
	} {
		if c.start || c.stop {
			rec.SetRunningAt(c.start, at(c.t))
		}
		msgs, mb := rates.next("producer", c.count, c.bytes, rec.RunningTime(at(c.t)))
		if c.start || c.stop {
			continue
		}
		if math.Abs(msgs-c.wantMsgs) > 1e-9 || math.Abs(mb-c.wantMB) > 1e-9 {
			t.Errorf("at %gs: %.1f msg/s (%.3f MB/s), want %.1f msg/s (%.3f MB/s)", c.t, msgs, mb, c.wantMsgs, c.wantMB)
		}
	}
}
