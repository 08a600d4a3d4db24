package engine

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// A live result is redacted without writing to what it shares with the
// collector: the series points' gauge maps.
func TestRedactLive(t *testing.T) {
	gauges := map[string]float64{"connected": 1}
	res := &results.Result{Description: "pw hunter2", Runs: []results.Run{{
		Warnings: []string{"login hunter2 refused"},
		Metrics: metrics.Snapshot{
			Phases: []metrics.Phase{{Name: "phase-hunter2"}},
			Series: map[string][]metrics.Point{"p": {{Phase: "phase-hunter2", Gauges: gauges}}},
		},
	}}}
	redactLive(res, map[string]bool{"hunter2": true})
	run := res.Runs[0]
	for _, s := range []string{res.Description, run.Warnings[0], run.Metrics.Phases[0].Name, run.Metrics.Series["p"][0].Phase} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("not redacted: %q", s)
		}
	}
	if len(run.Metrics.Series["p"]) != 1 || run.Metrics.Series["p"][0].Gauges["connected"] != 1 {
		t.Errorf("the series was lost: %+v", run.Metrics.Series)
	}
}
