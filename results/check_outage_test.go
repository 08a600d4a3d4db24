package results

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
)

func TestOutageAndBacklogChecks(t *testing.T) {
	consumer := metrics.Stats{Backlog: metrics.Backlog{Messages: 10}, InFlight: 7, Lost: 3}
	producer := func(delayed, failed int64) metrics.Stats {
		return metrics.Stats{Outage: metrics.OutageStats{Delayed: delayed, Failed: failed}}
	}
	result := func(c metrics.Stats, run, a, b metrics.Stats, outs ...metrics.Outage) *Result {
		return &Result{Format: FormatVersion, Runs: []Run{{Metrics: metrics.Snapshot{
			Order:     []string{"p", "c"},
			Workloads: map[string]metrics.Stats{"p": run, "c": c},
			Outages:   outs,
			Phases: []metrics.Phase{
				{Name: "a", Workloads: map[string]metrics.Stats{"p": a, "c": c}},
				{Name: "b", Workloads: map[string]metrics.Stats{"p": b, "c": c}},
			}}}}}
	}
	out := func(due, delayed, failed int64) metrics.Outage {
		return metrics.Outage{Workload: "p", Due: due, Delayed: delayed, Failed: failed}
	}
	for _, tc := range []struct {
		name string
		res  *Result
		want []string
	}{
		{"holds", result(consumer, producer(9, 2), producer(4, 2), producer(5, 0), out(8, 6, 2), out(3, 3, 0)), nil},
		{"backlog not split", result(metrics.Stats{Backlog: metrics.Backlog{Messages: 10}, InFlight: 7, Lost: 2}, producer(0, 0), producer(0, 0), producer(0, 0)),
			[]string{"backlog-split", "backlog-split", "backlog-split"}},
		{"more answered than due", result(consumer, producer(9, 2), producer(4, 2), producer(5, 0), out(7, 6, 2), out(3, 3, 0)),
			[]string{"outage-sends-due"}},
		// The whole outage's counts in both phases it overlaps: counted twice.
		{"counted in two phases", result(consumer, producer(9, 2), producer(9, 2), producer(9, 2), out(8, 6, 2), out(3, 3, 0)),
			[]string{"outage-sends-once"}},
		{"outages short of the run", result(consumer, producer(9, 2), producer(4, 2), producer(5, 0), out(8, 3, 2), out(3, 3, 0)),
			[]string{"outage-sends-once"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range tc.res.Check().Violations {
				// Other checks see these hand-made figures too; only
				// the outage and backlog ones are under test here.
				if strings.HasPrefix(v.Check, "outage-") || strings.HasPrefix(v.Check, "backlog-") {
					got = append(got, v.Check)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("violations %v, want %v", tc.res.Check().Violations, tc.want)
			}
		})
	}
}
