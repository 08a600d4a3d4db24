package reporters

import (
	"bytes"
	"regexp"
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
		{Title: "Table 7", Transpose: true, Columns: []string{"figure", "produce msg/s", "CPU %"}, Rows: [][]string{{"warm", "1000", "40.0"}, {"cold-read", "900", "88.5"}}},
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

// Every latency column says which latency it holds: send (intended send
// time to the broker's ack) or e2e (intended send time to receipt).
func TestLatencyColumnsSayWhichLatency(t *testing.T) {
	res := syntheticResult([]string{"size=1KB", "size=2KB"}, 1)
	run := &res.Runs[0]
	run.Searches = []results.Search{{Name: "search", Rate: 1000, Found: 1000, Trials: []results.SearchTrial{{Rate: 1000, Seconds: 5, Acked: 5000, Achieved: 1000, P99: 3, Passed: true}}}}
	latency := regexp.MustCompile(`(^|[ _])(avg|p50|p95|p99|p99\.9|max)([ _]ms)?$`)
	runs := func(*results.Run) ([]string, [][]string) { return RunsTable(res) }
	csvHeader := func(*results.Run) ([]string, [][]string) { return seriesRows(res)[0], nil }
	for _, tc := range []struct {
		name  string
		table func(*results.Run) ([]string, [][]string)
	}{
		{"produce", ProduceTable}, {"consume", ConsumeTable}, {"runs", runs}, {"search", SearchTable}, {"csv", csvHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header, _ := tc.table(run)
			n := 0
			for _, h := range header {
				if !latency.MatchString(h) {
					continue
				}
				n++
				if !strings.HasPrefix(h, "send ") && !strings.HasPrefix(h, "e2e ") && !strings.HasPrefix(h, "send_") && !strings.HasPrefix(h, "e2e_") {
					t.Errorf("column %q does not say which latency it holds (send or e2e)", h)
				}
			}
			if n == 0 {
				t.Errorf("no latency column in %v", header)
			}
		})
	}
}

// A run that ends before it measured anything says why its section has no
// phase tables, rather than leaving it empty.
func TestMarkdownRunWithoutPhases(t *testing.T) {
	for _, tc := range []struct {
		name, status, err string
		want              string
	}{
		{"setup failed", results.Failed, "target mq: dial tcp 127.0.0.1:1: connection refused",
			"## Phases\n\nStatus: **failed**: target mq: dial tcp 127.0.0.1:1: connection refused\n\nNo phases: the run failed before it measured anything.\n\n"},
		{"interrupted", results.Interrupted, "interrupted by signal",
			"## Phases\n\nStatus: **interrupted**: interrupted by signal\n\nNo phases: the run was interrupted before it measured anything.\n\n"},
		{"nothing measured", results.Passed, "",
			"## Phases\n\nNo phases: no workload sent or received a message and no step named a phase.\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &results.Result{Plan: "p", Status: tc.status, Error: tc.err,
				Runs: []results.Run{{Status: tc.status, Error: tc.err}}}
			var b bytes.Buffer
			Render(&b, res)
			_, section, _ := strings.Cut(b.String(), "## Phases")
			if "## Phases"+section != tc.want {
				t.Errorf("section:\n%q\nwant\n%q", "## Phases"+section, tc.want)
			}
		})
	}
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
