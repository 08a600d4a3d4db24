package reporters

import (
	"bytes"
	"testing"

	"github.com/planrun/planrun/results"
)

// The markdown report of a matrix result with each table shape: a plan
// table with a row per run, one with a row per phase, a transposed one
// (the vendors' table 7), the runs table and the per-phase tables.
func TestMarkdownGolden(t *testing.T) {
	res := syntheticResult([]string{"size=1KB", "size=2KB"}, 1)
	res.Runs[1].Asserts = []results.Assert{{Expr: "consumer.lost == 0", Passed: false, Detail: "consumer.lost = 3 (target 0)"}}
	res.Status = results.AssertFail
	res.Tables = []results.Table{
		{Title: "Per run", Columns: []string{"size", "produce msg/s", "max msg/s"}, Rows: [][]string{{"1KB", "1000", "1100"}, {"2KB", "1500", "1650"}}},
		{Title: "Per phase", Columns: []string{"size", "phase", "consume msg/s"}, Rows: [][]string{{"1KB", "warm", "990"}, {"1KB", "cold-read", "5000"}}},
		{Title: "Table 7", Transpose: true, Columns: []string{"phase", "produce msg/s", "CPU %"}, Rows: [][]string{{"warm", "1000", "40.0"}, {"cold-read", "900", "88.5"}}},
	}
	var b bytes.Buffer
	Render(&b, res)
	golden(t, "report.md", b.Bytes())
}
