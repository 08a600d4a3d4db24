package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A phase's driver gauges are those of its last sample before the
// workload was stopped (or ended), not the closed connections after it;
// the series file replays to the same figures.
func TestGaugesBeforeStop(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		at    float64
		do    string // phase NAME, sample, stop, stopped, start
		conns float64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[string]float64 // phase name (or "run") -> connected
	}{
		{"stop all at the end", []step{
			{0.01, "phase hold", 100}, {1, "sample", 100}, {2, "sample", 100},
			{2.5, "stop", 40}, {2.6, "sample", 40}, {2.7, "stopped", 0},
		}, map[string]float64{"hold": 100, "run": 100}},
		{"stopped in a phase, then not running", []step{
			{0.01, "phase hold", 100}, {1, "sample", 100}, {1.5, "stop", 10}, {1.6, "stopped", 0}, {2, "sample", 0},
			{2.2, "phase idle", 0}, {3.2, "sample", 0},
		}, map[string]float64{"hold": 100, "idle": 0, "run": 100}},
		{"started again", []step{
			{0.01, "phase one", 100}, {1, "sample", 100}, {1.2, "stop", 0}, {1.3, "stopped", 0},
			{1.5, "phase two", 0}, {1.6, "start", 20}, {2.6, "sample", 20}, {3, "sample", 30}, {3.1, "stop", 0},
		}, map[string]float64{"one": 100, "two": 30, "run": 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCollector(t0)
			var file bytes.Buffer
			c.SetSink(&file, "")
			c.SetSeriesHeader(SeriesHeader{Label: "x", Order: []string{"conn"}, Roles: map[string]Role{"conn": {Connects: true}}, Kinds: map[string]string{"conn": "connect"}})
			r := NewRecorder("conn", "connect", Role{Connects: true})
			c.Add(r)
			conns := 0.0
			r.SetGauges(func() map[string]float64 { return map[string]float64{"connected": conns} })
			r.SetRunning(true)
			end := 0.0
			for _, s := range tc.steps {
				conns, end = s.conns, s.at
				switch name, ok := strings.CutPrefix(s.do, "phase "); {
				case ok:
					c.StartPhase(name, at(s.at))
				case s.do == "sample":
					c.Sample(at(s.at))
				case s.do == "stop":
					r.Stopping()
				case s.do == "stopped":
					r.SetRunning(false)
				case s.do == "start":
					r.SetRunning(true)
				}
			}
			r.SetRunning(false)
			conns = 0
			want := c.Finish(at(end + 0.5))
			runs, err := ReadSeries(&file)
			if err != nil {
				t.Fatal(err)
			}
			for from, snap := range map[string]Snapshot{"collector": want, "series file": runs[0].Metrics} {
				got := map[string]float64{"run": snap.Workloads["conn"].Gauges["connected"]}
				for _, p := range snap.Phases {
					got[p.Name] = p.Workloads["conn"].Gauges["connected"]
				}
				for k, v := range tc.want {
					if got[k] != v {
						t.Errorf("%s: %s connected %v, want %v (all: %v)", from, k, got[k], v, got)
					}
				}
			}
		})
	}
}

// A workload on workers is told running by each figure that arrives,
// also while a stop is under way: that does not end the stop.
func TestStoppingOutlastsRunningReports(t *testing.T) {
	r := NewRecorder("conn", "connect", Role{Connects: true})
	r.SetRunning(true)
	r.Stopping()
	r.SetRunning(true)
	if !r.stopping.Load() {
		t.Error("a running report ended the stop")
	}
	r.SetRunning(false)
	r.SetRunning(true)
	if r.stopping.Load() {
		t.Error("a workload started again is still stopping")
	}
}
