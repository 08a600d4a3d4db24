package metrics

import (
	"testing"
	"time"
)

// A workload's running time counts only the spans between its starts and
// stops, whoever reports the same state twice.
func TestRunningTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r := NewRecorder("p", "produce", Role{Sends: true})
	for _, c := range []struct {
		set     *bool // SetRunningAt at the time, if not nil
		t, want float64
	}{
		{nil, 1, 0},
		{ptr(true), 3.5, 0},
		{nil, 5, 1.5},
		{ptr(true), 6, 2.5}, // said again: still the first start
		{ptr(false), 7, 3.5},
		{nil, 9, 3.5},
		{ptr(false), 9.5, 3.5},
		{ptr(true), 10, 3.5},
		{nil, 10.25, 3.75},
	} {
		if c.set != nil {
			r.SetRunningAt(*c.set, at(c.t))
		}
		if got := r.RunningTime(at(c.t)).Seconds(); got != c.want {
			t.Errorf("at %gs: ran %gs, want %gs", c.t, got, c.want)
		}
	}
}

func ptr(b bool) *bool { return &b }
