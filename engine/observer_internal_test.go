package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// A live result is redacted without writing to what it shares with the
// run going on: the closed phases' maps, probe values, the series points'
// gauge maps.
func TestRedactLive(t *testing.T) {
	gauges := map[string]float64{"connected": 1}
	phaseStats := map[string]metrics.Stats{"producer-hunter2": {Acked: 3}}
	probe := map[string]any{"stdout": "hunter2"}
	res := &results.Result{Description: "pw hunter2", Runs: []results.Run{{
		Warnings: []string{"login hunter2 refused"},
		Probes:   map[string]any{"login": probe},
		Metrics: metrics.Snapshot{
			Phases: []metrics.Phase{{Name: "phase-hunter2", Workloads: phaseStats}},
			Series: map[string][]metrics.Point{"p": {{Phase: "phase-hunter2", Gauges: gauges}}},
		},
	}}}
	if err := redactLive(res, map[string]bool{"hunter2": true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := phaseStats["producer-hunter2"]; !ok || probe["stdout"] != "hunter2" {
		t.Errorf("the run's own maps were changed: %v, %v", phaseStats, probe)
	}
	run := res.Runs[0]
	if strings.Contains(fmt.Sprint(run.Probes), "hunter2") {
		t.Errorf("probe not redacted: %v", run.Probes)
	}
	for name := range run.Metrics.Phases[0].Workloads {
		if strings.Contains(name, "hunter2") {
			t.Errorf("workload name not redacted: %q", name)
		}
	}
	for _, s := range []string{res.Description, run.Warnings[0], run.Metrics.Phases[0].Name, run.Metrics.Series["p"][0].Phase} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("not redacted: %q", s)
		}
	}
	if len(run.Metrics.Series["p"]) != 1 || run.Metrics.Series["p"][0].Gauges["connected"] != 1 {
		t.Errorf("the series was lost: %+v", run.Metrics.Series)
	}
}
