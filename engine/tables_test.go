package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
)

// A transposed plan table has a row per column expression: its first
// heading names those rows (figure), the others the phases or runs.
func TestTransposedTableHeaders(t *testing.T) {
	const plain = `name: t
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 50 } }
progress: 0s
`
	const matrix = `name: t
matrix:
  threads: [1, 2]
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 50, threads: "${threads}" } }
progress: 0s
`
	const steps = `steps:
  - start: producer
    phase: load
  - wait: "!producer.running"
    timeout: 10s
  - phase: idle
`
	for _, tc := range []struct {
		name, plan, rows string
		header           []string
		body             []string // rows as "a,b,c"
	}{
		{"phases", plain, "phases", []string{"figure", "load", "idle"}, []string{"acked,50,0"}},
		{"runs", plain, "runs", []string{"figure", "value"}, []string{"acked,50"}},
		{"matrix phases", matrix, "phases", []string{"figure", "threads=1 load", "threads=1 idle", "threads=2 load", "threads=2 idle"}, []string{"acked,50,0,50,0"}},
		{"matrix runs", matrix, "runs", []string{"figure", "threads=1", "threads=2"}, []string{"acked,50,50"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := tc.plan + steps + `report:
  tables:
    - rows: ` + tc.rows + `
      transpose: true
      columns:
        - { name: acked, value: producer.acked }
`
			res := execute(t, context.Background(), y)
			if len(res.Tables) != 1 {
				t.Fatalf("tables %+v", res.Tables)
			}
			tb := res.Tables[0]
			header, rows := reporters.Transpose(tb.Columns, tb.Rows)
			if strings.Join(header, "|") != strings.Join(tc.header, "|") {
				t.Errorf("header %q, want %q", header, tc.header)
			}
			var got []string
			for _, r := range rows {
				got = append(got, strings.Join(r, ","))
			}
			if strings.Join(got, "\n") != strings.Join(tc.body, "\n") {
				t.Errorf("rows %q, want %q", got, tc.body)
			}
		})
	}
}

// Steps before the first phase: their messages go to a phase named start,
// in the results, the plan's tables and the report.
func TestStepsBeforeTheFirstPhase(t *testing.T) {
	y := `name: t
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, rate: 1000, count: 100 } }
progress: 0s
steps:
  - start: producer
  - wait: producer.acked >= 20
    timeout: 10s
  - assert: phase.name == "start"
  - phase: rest
  - wait: "!producer.running"
    timeout: 10s
report:
  tables:
    - columns:
        - { name: acked, value: producer.acked }
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Passed {
		t.Errorf("status %s: %+v", res.Status, res.Runs[0].Asserts)
	}
	var names []string
	acked := int64(0)
	for _, ph := range res.Runs[0].Metrics.Phases {
		names = append(names, ph.Name)
		acked += ph.Workloads["producer"].Acked
	}
	if strings.Join(names, ",") != "start,rest" || res.Runs[0].Metrics.Phases[0].Workloads["producer"].Acked < 20 || acked != 100 {
		t.Errorf("phases %q, %d acked in all", names, acked)
	}
	if tb := res.Tables[0]; len(tb.Rows) != 2 || tb.Rows[0][0] != "start" {
		t.Errorf("table rows %q", tb.Rows)
	}
	var b strings.Builder
	reporters.Render(&b, res)
	if !strings.Contains(b.String(), "| start ") || strings.Contains(b.String(), "before first phase") {
		t.Errorf("report:\n%s", b.String())
	}
}
