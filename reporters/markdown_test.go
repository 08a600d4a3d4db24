package reporters

import (
	"bytes"
	"strings"
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

// A run over workers gets a table of them: where each ran what, when its
// first message came (the start skew), its clock, its control traffic, and
// the one that was lost.
func TestMarkdownWorkersGolden(t *testing.T) {
	res := syntheticResult([]string{""}, 1)
	res.Status, res.Error = results.Failed, "worker 2 (10.0.0.13:7070) lost: no answer within 3s"
	res.Runs[0].Status, res.Runs[0].Error = results.Failed, res.Error
	res.Runs[0].Workers = []results.Worker{
		{Index: 0, Addr: "10.0.0.11:7070", Host: "load-a", Workloads: []string{"producer"}, FirstMessageS: 0.412, OffsetMs: 0.021, DriftMs: 0.004, RTTMs: 0.180, ReceivedBytes: 41230, SentBytes: 2210},
		{Index: 1, Addr: "10.0.0.12:7070", Host: "load-b", Workloads: []string{"consumer", "producer"}, FirstMessageS: 0.415, OffsetMs: -1.532, DriftMs: 0.110, RTTMs: 0.204, ReceivedBytes: 80012, SentBytes: 2290},
		{Index: 2, Addr: "10.0.0.13:7070", Host: "load-c", Workloads: []string{"producer"}, OffsetMs: 12.5, RTTMs: 0.31, Lost: true},
	}
	var b bytes.Buffer
	Render(&b, res)
	golden(t, "workers.md", b.Bytes())
}

// Probes are listed as people read them: a group of values as key=value
// pairs in key order, never in Go's syntax.
func TestMarkdownProbes(t *testing.T) {
	res := syntheticResult([]string{""}, 1)
	res.Runs[0].Probes = map[string]any{
		"broker":     map[string]any{"exit": 0.0, "pid": 3345.0, "running": false, "signal": "", "stdout": "", "value": ""},
		"search.max": map[string]float64{"rate": 5000, "failed_rate": 5062.5, "found_rate": 5000, "trials": 7, "confirmations": 1, "seconds": 73.21234},
		"queue":      42.0,
		"big":        1.5e7,
		"skipped":    nil,
		"members":    []any{"a", "b c"},
	}
	var b bytes.Buffer
	Render(&b, res)
	for _, want := range []string{
		"- probe big = 15000000\n",
		`- probe broker: exit=0 pid=3345 running=false signal="" stdout="" value=""` + "\n",
		`- probe members = a, "b c"` + "\n",
		"- probe queue = 42\n",
		"- probe search.max: confirmations=1 failed_rate=5062.5 found_rate=5000 rate=5000 seconds=73.2123 trials=7\n",
		"- probe skipped: none (its step was skipped by its if:)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(b.String(), "map[") {
		t.Errorf("Go map syntax in the report:\n%s", b.String())
	}
}
