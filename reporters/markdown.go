package reporters

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

func init() {
	Register("markdown", Markdown{})
	Register("json", JSON{})
}

// Markdown writes the report people read: per-phase tables, the plan's own
// tables, asserts and warnings.
type Markdown struct{}

// Write renders res to base.md.
func (Markdown) Write(res *results.Result, base string) (string, error) {
	var b bytes.Buffer
	Render(&b, res)
	// Charts written beside the report (format chart) are linked from it.
	var charts []string
	for _, f := range ChartFiles(res, base) {
		if _, err := os.Stat(f); err == nil {
			charts = append(charts, f)
		}
	}
	if len(charts) > 0 {
		fmt.Fprintf(&b, "## Charts\n\n")
		for _, f := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", filepath.Base(f), filepath.Base(f))
		}
	}
	path := base + ".md"
	return path, os.WriteFile(path, b.Bytes(), 0o644)
}

// JSON writes everything measured.
type JSON struct{}

// Write saves res to base.json.
func (JSON) Write(res *results.Result, base string) (string, error) {
	path := base + ".json"
	return path, res.Save(path)
}

// Render writes the markdown report.
func Render(w io.Writer, res *results.Result) {
	title := res.Title
	if title == "" {
		title = res.Plan
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	if res.Description != "" {
		fmt.Fprintf(w, "%s\n\n", res.Description)
	}
	fmt.Fprintf(w, "- plan: `%s` (%s)\n", res.Plan, res.File)
	fmt.Fprintf(w, "- status: **%s**", res.Status)
	if res.Error != "" {
		fmt.Fprintf(w, ": %s", res.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- started %s, took %s\n", res.Started.Format(time.RFC3339), res.Finished.Sub(res.Started).Round(time.Second))
	if len(res.Vars) > 0 {
		names := res.VarOrder
		if len(names) == 0 {
			for k := range res.Vars {
				names = append(names, k)
			}
			sort.Strings(names)
		}
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s=%s", k, res.Vars[k]))
		}
		fmt.Fprintf(w, "- variables: %s\n", strings.Join(parts, ", "))
	}
	for _, t := range res.Targets {
		fmt.Fprintf(w, "- target %s: %s\n", t.Name, orDefault(t.What, t.Driver))
	}
	e := res.Environment
	fmt.Fprintf(w, "- machine: %s, %s/%s, %d CPUs, %s\n", e.Host, e.OS, e.Arch, e.CPUs, e.GoVersion)
	fmt.Fprintf(w, "- units: %s\n\n", res.Units)

	for _, t := range res.Tables {
		fmt.Fprintf(w, "## %s\n\n", t.Title)
		header, rows := t.Columns, t.Rows
		if t.Transpose {
			header, rows = Transpose(header, rows)
		}
		Table(w, header, rows)
		fmt.Fprintln(w)
	}
	if len(res.Runs) > 1 {
		fmt.Fprintf(w, "## Runs\n\n")
		header, rows := RunsTable(res)
		Table(w, header, rows)
		fmt.Fprintln(w)
	}
	for _, run := range res.Runs {
		heading := "Phases"
		if run.Label != "" {
			heading = "Run " + run.Label
		}
		fmt.Fprintf(w, "## %s\n\n", heading)
		if run.Status != results.Passed {
			fmt.Fprintf(w, "Status: **%s**", run.Status)
			if run.FailedStep != "" && !strings.HasPrefix(run.Error, run.FailedStep) {
				fmt.Fprintf(w, " at %s", run.FailedStep)
			}
			if run.Error != "" {
				fmt.Fprintf(w, ": %s", run.Error)
			}
			fmt.Fprint(w, "\n\n")
		}
		if h, rows := ProduceTable(&run); len(rows) > 0 {
			fmt.Fprintf(w, "Produce (latency from intended send time to broker ack, ms):\n\n")
			Table(w, h, rows)
			fmt.Fprintln(w)
		}
		if h, rows := ConsumeTable(&run); len(rows) > 0 {
			fmt.Fprintf(w, "Consume (end-to-end latency from intended send time to receipt, ms):\n\n")
			Table(w, h, rows)
			fmt.Fprintln(w)
		}
		if h, rows := GaugeTable(&run); len(rows) > 0 {
			fmt.Fprintf(w, "Driver figures at the end of each phase (connections, in flight...):\n\n")
			Table(w, h, rows)
			fmt.Fprintln(w)
		}
		if h, rows := ExtraTable(&run); len(rows) > 0 {
			fmt.Fprintf(w, "Collected figures (phase average / max):\n\n")
			Table(w, h, rows)
			fmt.Fprintln(w)
		}
		if len(run.Probes) > 0 {
			keys := make([]string, 0, len(run.Probes))
			for k := range run.Probes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "- probe %s = %v\n", k, run.Probes[k])
			}
			fmt.Fprintln(w)
		}
		for _, a := range run.Asserts {
			mark := "passed"
			if !a.Passed {
				mark = "**FAILED**"
			}
			fmt.Fprintf(w, "- assert `%s`: %s", a.Expr, mark)
			if a.Detail != "" {
				fmt.Fprintf(w, " (%s)", a.Detail)
			}
			fmt.Fprintln(w)
		}
		for _, warn := range run.Warnings {
			fmt.Fprintf(w, "- warning: %s\n", warn)
		}
		if len(run.Asserts)+len(run.Warnings) > 0 {
			fmt.Fprintln(w)
		}
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// F formats a float with d decimals.
func F(v float64, d int) string { return strconv.FormatFloat(v, 'f', d, 64) }

// I formats an integer.
func I(v int64) string { return strconv.FormatInt(v, 10) }

func phaseName(n string) string {
	if n == "" {
		return "(before first phase)"
	}
	return n
}

// workloadNames lists the run's workloads whose role has the ability.
func workloadNames(run *results.Run, has func(metrics.Role) bool) []string {
	var names []string
	for _, n := range run.Metrics.Order {
		if has(run.Role(n)) {
			names = append(names, n)
		}
	}
	return names
}

func sends(r metrics.Role) bool    { return r.Sends }
func receives(r metrics.Role) bool { return r.Receives }

func lat(l metrics.Latency) []string {
	return []string{F(l.Avg, 2), F(l.P50, 2), F(l.P95, 2), F(l.P99, 2), F(l.P999, 2), F(l.Max, 2)}
}

// ProduceTable is a row per phase and producing workload.
func ProduceTable(run *results.Run) ([]string, [][]string) {
	header := []string{"phase", "workload", "duration s", "acked", "msg/s", "max msg/s", "MB/s", "avg", "p50", "p95", "p99", "p99.9", "max", "failed"}
	var rows [][]string
	names := workloadNames(run, sends)
	for _, ph := range run.Metrics.Phases {
		for _, n := range names {
			s := ph.Workloads[n]
			if s.Acked+s.Failed == 0 {
				continue
			}
			row := []string{phaseName(ph.Name), n, F(ph.Duration(), 1), I(s.Acked), F(s.SendRate, 1), F(s.MaxSendRate, 0), F(s.SendMBps, 2)}
			row = append(row, lat(s.Latency)...)
			rows = append(rows, append(row, I(s.Failed)))
		}
	}
	return header, rows
}

// ConsumeTable is a row per phase and receiving workload.
func ConsumeTable(run *results.Run) ([]string, [][]string) {
	header := []string{"phase", "workload", "duration s", "received", "msg/s", "max msg/s", "MB/s", "avg", "p50", "p95", "p99", "p99.9", "max",
		"backlog msgs", "backlog MB", "broker lag", "dup", "reordered"}
	var rows [][]string
	names := workloadNames(run, receives)
	for _, ph := range run.Metrics.Phases {
		for _, n := range names {
			s := ph.Workloads[n]
			row := []string{phaseName(ph.Name), n, F(ph.Duration(), 1), I(s.Received), F(s.RecvRate, 1), F(s.MaxRecvRate, 0), F(s.RecvMBps, 2)}
			row = append(row, lat(s.E2E)...)
			lag := "n/a"
			if s.Lag >= 0 {
				lag = I(s.Lag)
			}
			rows = append(rows, append(row, I(s.Backlog.Messages), F(float64(s.Backlog.Bytes)/1e6, 2), lag, I(s.Duplicates), I(s.Reordered)))
		}
	}
	return header, rows
}

// ExtraTable is a row per collected figure, a column per phase.
func ExtraTable(run *results.Run) ([]string, [][]string) {
	names := run.Metrics.SortedExtra()
	if len(names) == 0 {
		return nil, nil
	}
	header := []string{"figure"}
	for _, ph := range run.Metrics.Phases {
		header = append(header, phaseName(ph.Name))
	}
	var rows [][]string
	for _, n := range names {
		row := []string{n}
		for _, ph := range run.Metrics.Phases {
			g, ok := ph.Extra[n]
			if !ok {
				row = append(row, "")
				continue
			}
			row = append(row, F(g.Avg, 2)+" / "+F(g.Max, 2))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// RunsTable is a row per matrix combination and workload, whole-run figures.
func RunsTable(res *results.Result) ([]string, [][]string) {
	header := []string{"run", "status", "workload", "messages", "avg msg/s", "max msg/s", "MB/s", "failed", "p99 ms", "max ms"}
	var rows [][]string
	for i := range res.Runs {
		run := &res.Runs[i]
		for _, n := range run.Metrics.Order {
			s := run.Metrics.Workloads[n]
			l, msgs, mbps := s.Latency, s.Acked, s.SendMBps
			if !run.Role(n).Produces() {
				l, msgs, mbps = s.E2E, s.Received, s.RecvMBps
			}
			rows = append(rows, []string{run.Label, run.Status, n, I(msgs), F(s.Rate, 1), F(s.MaxRate, 0), F(mbps, 2), I(s.Failed), F(l.P99, 2), F(l.Max, 2)})
		}
	}
	return header, rows
}

// GaugeTable is a row per phase and workload with driver figures: the only
// figures a connect workload has.
func GaugeTable(run *results.Run) ([]string, [][]string) {
	var rows [][]string
	for _, ph := range run.Metrics.Phases {
		for _, n := range run.Metrics.Order {
			g := ph.Workloads[n].Gauges
			if len(g) == 0 {
				continue
			}
			keys := make([]string, 0, len(g))
			for k := range g {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				v := g[k]
				if v == float64(int64(v)) {
					parts[i] = k + " " + I(int64(v))
				} else {
					parts[i] = k + " " + F(v, 2)
				}
			}
			rows = append(rows, []string{phaseName(ph.Name), n, strings.Join(parts, ", ")})
		}
	}
	return []string{"phase", "workload", "figures"}, rows
}
