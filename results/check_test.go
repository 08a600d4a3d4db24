package results

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
)

func checkedRun(run, a, b metrics.Stats) *Result {
	return &Result{Format: FormatVersion, Runs: []Run{{Metrics: metrics.Snapshot{
		Order:     []string{"c"},
		Workloads: map[string]metrics.Stats{"c": run},
		Phases: []metrics.Phase{
			{Name: "a", Workloads: map[string]metrics.Stats{"c": a}},
			{Name: "b", Workloads: map[string]metrics.Stats{"c": b}},
		}}}}}
}

func recv(received, distinct, dup int64) metrics.Stats {
	return metrics.Stats{Received: received, Distinct: distinct, Duplicates: dup, E2E: metrics.Latency{Count: received}}
}

func TestCheckFindsViolations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		res     *Result
		want    []string // check names, in order
		details []string
	}{
		{"holds", checkedRun(recv(10, 8, 2), recv(4, 3, 1), recv(6, 5, 1)), nil, nil},
		{"phases short of the run", checkedRun(recv(10, 8, 2), recv(4, 3, 1), recv(5, 4, 1)),
			[]string{"phases-partition-run", "phases-partition-run"},
			[]string{"c: received is 10 in the run, the phases sum to 9 (4 + 5)", "c: distinct is 8 in the run, the phases sum to 7 (3 + 4)"}},
		{"received not split", checkedRun(recv(10, 8, 1), recv(4, 3, 1), recv(6, 5, 0)),
			[]string{"received-split", "received-split"},
			[]string{`c, run: received 10 != distinct 8 + duplicates 1 + untracked 0`, `c, phase "b": received 6 != distinct 5 + duplicates 0 + untracked 0`}},
		{"latency without messages", checkedRun(recv(10, 8, 2), recv(4, 3, 1), metrics.Stats{Received: 6, Distinct: 5, Duplicates: 1, E2E: metrics.Latency{Count: 5}, Latency: metrics.Latency{Count: 1}}),
			[]string{"latency-per-message", "latency-per-message"},
			[]string{`c, phase "b": 1 send latencies for 0 acked messages`, `c, phase "b": 5 end-to-end latencies for 6 received messages with this run's header`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.res.Check()
			var got []string
			for _, v := range rep.Violations {
				got = append(got, v.Check)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("violations %v, want checks %v", rep.Violations, tc.want)
			}
			for i, d := range tc.details {
				if d != "" && rep.Violations[i].Detail != d {
					t.Errorf("violation %d: %q, want %q", i, rep.Violations[i].Detail, d)
				}
			}
		})
	}
}

func TestOlderResultSaysWhichChecksDoNotApply(t *testing.T) {
	res := checkedRun(recv(10, 0, 0), recv(4, 0, 0), recv(5, 0, 0))
	res.Format = 0
	rep := res.Check()
	if rep.Version != 1 || len(rep.Violations) != 0 {
		t.Fatalf("version %d, violations %v", rep.Version, rep.Violations)
	}
	for _, name := range []string{"phases-partition-run", "received-split", "latency-per-message"} {
		found := false
		for _, n := range rep.NotApplied {
			found = found || n == name
		}
		if !found {
			t.Errorf("%s not listed as not applying to a version-1 result: %v", name, rep.NotApplied)
		}
	}
}

func TestRegisterCheckRefusesTwoOfOneName(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	RegisterCheck(Check{Name: "received-split", Run: func(*Run) []string { return nil }})
}
