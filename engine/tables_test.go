package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/planrun/planrun/reporters"
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
