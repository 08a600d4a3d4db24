package steps_test

import (
	"math"
	"strings"
	"testing"

	"github.com/planrun/planrun/plan"
)

// On the memory broker with a service rate of 400 msg/s (low, so that the
// load generator has room to spare on a busy machine), the search finds a
// rate within 5% of it, and keeps it for expressions and reports.
func TestSearchFindsCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 40 seconds of trials")
	}
	y := `name: search
targets:
  mq: { driver: memory, capacity: 400 }
workloads:
  producer: { produce: { topic: a, size: 64B, threads: 16 } }
progress: 0s
steps:
  - search: producer
    as: top
    from: 240
    factor: 1.5
    precision: 0.05
    settle: 1s
    trial: 5s
    # the test machine runs other tests at once
    tolerance: 0.03
  - assert: search.top.rate > 0 && search.top.trials >= 3
  - stop: all
report:
  tables:
    - title: search
      rows: runs
      columns:
        - { name: rate, value: search.top.rate, format: "%.0f" }
`
	run := execute(t, y).Runs[0]
	res, ok := run.Probes["search.top"].(map[string]float64)
	if !ok {
		t.Fatalf("probes %v", run.Probes)
	}
	t.Logf("result %+v", res)
	if got := res["rate"]; math.Abs(got-400) > 0.05*400 {
		t.Errorf("search found %.0f msg/s, capacity is 400", got)
	}
	if res["failed_rate"] <= res["rate"] || res["seconds"] < 6*res["trials"] {
		t.Errorf("result %+v: the lowest failed rate must be above the result, and each trial takes settle + trial", res)
	}
	for _, a := range run.Asserts {
		if !a.Passed {
			t.Errorf("assert %s: %s", a.Expr, a.Detail)
		}
	}
}

// Mistakes in a search step are caught when the plan loads.
func TestSearchMistakes(t *testing.T) {
	head := `name: bad
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a } }
  consumer: { consume: { topic: a } }
steps:
  - search: SEARCH
`
	for _, c := range []struct{ search, want string }{
		{"consumer", "search needs one whose rate a set step can change"},
		{"producr", `unknown workload "producr"`},
		{"producer\n    factor: 1", "factor: must be more than 1"},
		{"producer\n    from: 5000\n    max: 1000", "from: 5000 is above max: 1000"},
		{"producer\n    precision: 2", "precision: must be a fraction"},
		{"producer\n    as: top-rate", `as: "top-rate" must be a name`},
		{"producer\n    until: producer.latency.p99 <", "expression"},
		{"producer\n    trial: 5", "needs a unit"},
	} {
		y := strings.Replace(head, "SEARCH", c.search, 1)
		_, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("search: %s: got %v, want an error with %q", c.search, err, c.want)
		}
	}
}
