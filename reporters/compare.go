package reporters

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// Compare writes markdown tables setting result b beside result a: for
// each run (matched by label), phase (matched by name) and workload the
// message rate, MB/s, p50, p99 and max latency and failures, then the
// phase averages of collected figures, each with b's change from a in
// percent. Runs and phases found in only one result are listed after.
func Compare(w io.Writer, a, b *results.Result) {
	fmt.Fprintf(w, "# Comparison\n\n")
	fmt.Fprintf(w, "- A: %s\n", describeResult(a))
	fmt.Fprintf(w, "- B: %s\n", describeResult(b))
	fmt.Fprintf(w, "- change: (B - A) / A; latency in ms, rates in messages/s\n\n")

	bRuns := map[string]*results.Run{}
	for i := range b.Runs {
		bRuns[b.Runs[i].Label] = &b.Runs[i]
	}
	matched := map[string]bool{}
	var onlyA, onlyB []string
	for i := range a.Runs {
		ra := &a.Runs[i]
		rb, ok := bRuns[ra.Label]
		if !ok {
			onlyA = append(onlyA, runLabel(ra))
			continue
		}
		matched[ra.Label] = true
		compareRun(w, ra, rb, len(a.Runs) > 1 || len(b.Runs) > 1)
	}
	for i := range b.Runs {
		if !matched[b.Runs[i].Label] {
			onlyB = append(onlyB, runLabel(&b.Runs[i]))
		}
	}
	for _, l := range onlyA {
		fmt.Fprintf(w, "- run %s is only in A\n", l)
	}
	for _, l := range onlyB {
		fmt.Fprintf(w, "- run %s is only in B\n", l)
	}
	if len(onlyA)+len(onlyB) > 0 {
		fmt.Fprintln(w)
	}
}

func describeResult(r *results.Result) string {
	s := fmt.Sprintf("%s (%s), %s", r.Plan, r.File, r.Status)
	if !r.Started.IsZero() {
		s += ", started " + r.Started.Format(time.RFC3339)
	}
	return s
}

func runLabel(r *results.Run) string {
	if r.Label == "" {
		return "(the only run)"
	}
	return r.Label
}

// wholeRun stands for the run's totals in the phase column.
const wholeRun = "(whole run)"

func compareRun(w io.Writer, a, b *results.Run, heading bool) {
	if heading {
		fmt.Fprintf(w, "## Run %s\n\n", runLabel(a))
	}
	if a.Status != b.Status {
		fmt.Fprintf(w, "Status: A %s, B %s\n\n", a.Status, b.Status)
	}
	header := []string{"phase", "workload", "figure", "A", "B", "change"}
	var rows [][]string
	phasesA, phasesB := phaseMap(a), phaseMap(b)
	var onlyA, onlyB []string
	names := workloadUnion(a, b)
	for _, pa := range a.Metrics.Phases {
		pb, ok := phasesB[pa.Name]
		if !ok {
			onlyA = append(onlyA, phaseName(pa.Name))
			continue
		}
		rows = append(rows, workloadRows(phaseName(pa.Name), names, a, b, pa.Workloads, pb.Workloads)...)
	}
	for _, pb := range b.Metrics.Phases {
		if _, ok := phasesA[pb.Name]; !ok {
			onlyB = append(onlyB, phaseName(pb.Name))
		}
	}
	rows = append(rows, workloadRows(wholeRun, names, a, b, a.Metrics.Workloads, b.Metrics.Workloads)...)
	if len(rows) > 0 {
		Table(w, header, rows)
		fmt.Fprintln(w)
	}

	if extra := compareExtraRows(a, b, phasesB); len(extra) > 0 {
		fmt.Fprintf(w, "Collected figures (phase averages):\n\n")
		Table(w, []string{"phase", "figure", "A", "B", "change"}, extra)
		fmt.Fprintln(w)
	}
	for _, n := range onlyA {
		fmt.Fprintf(w, "- phase %s is only in A\n", n)
	}
	for _, n := range onlyB {
		fmt.Fprintf(w, "- phase %s is only in B\n", n)
	}
	if len(onlyA)+len(onlyB) > 0 {
		fmt.Fprintln(w)
	}
}

func phaseMap(r *results.Run) map[string]metrics.Phase {
	m := make(map[string]metrics.Phase, len(r.Metrics.Phases))
	for _, p := range r.Metrics.Phases {
		m[p.Name] = p
	}
	return m
}

// workloadUnion is a's workload order followed by b's other workloads.
func workloadUnion(a, b *results.Run) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range []*results.Run{a, b} {
		for _, n := range r.Metrics.Order {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

// figure is one compared number; counts print without decimals.
type figure struct {
	name  string
	v     float64
	count bool
}

// workloadFigures are the compared figures of one workload in one window,
// by its role: what it sent for producers, what it received otherwise.
func workloadFigures(role metrics.Role, s metrics.Stats) []figure {
	l, mbps := s.E2E, s.RecvMBps
	if role.Produces() {
		l, mbps = s.Latency, s.SendMBps
	}
	return []figure{
		{name: "msg/s", v: s.Rate}, {name: "MB/s", v: mbps}, {name: "p50 ms", v: l.P50}, {name: "p99 ms", v: l.P99},
		{name: "max ms", v: l.Max}, {name: "failed", v: float64(s.Failed), count: true},
	}
}

func workloadRows(phase string, names []string, a, b *results.Run, wa, wb map[string]metrics.Stats) [][]string {
	var rows [][]string
	for _, n := range names {
		sa, okA := wa[n]
		sb, okB := wb[n]
		if !okA && !okB {
			continue
		}
		role := a.Role(n)
		if role == (metrics.Role{}) {
			role = b.Role(n)
		}
		if role.Connects {
			continue
		}
		fa, fb := workloadFigures(role, sa), workloadFigures(role, sb)
		for i, f := range fa {
			rows = append(rows, []string{phase, n, f.name, present(f, okA), present(fb[i], okB), changeOf(f.v, fb[i].v, okA && okB)})
		}
	}
	return rows
}

func compareExtraRows(a, b *results.Run, phasesB map[string]metrics.Phase) [][]string {
	var rows [][]string
	add := func(phase string, ea, eb map[string]metrics.Gauge) {
		seen := map[string]bool{}
		for _, m := range []map[string]metrics.Gauge{ea, eb} {
			for k := range m {
				seen[k] = true
			}
		}
		for _, k := range sortedKeys(seen) {
			ga, okA := ea[k]
			gb, okB := eb[k]
			rows = append(rows, []string{phase, k, present(figure{v: ga.Avg}, okA), present(figure{v: gb.Avg}, okB), changeOf(ga.Avg, gb.Avg, okA && okB)})
		}
	}
	for _, pa := range a.Metrics.Phases {
		if pb, ok := phasesB[pa.Name]; ok {
			add(phaseName(pa.Name), pa.Extra, pb.Extra)
		}
	}
	add(wholeRun, a.Metrics.ExtraRun, b.Metrics.ExtraRun)
	return rows
}

func present(f figure, ok bool) string {
	switch {
	case !ok:
		return "-"
	case f.count:
		return F(f.v, 0)
	}
	return F(f.v, 2)
}

// changeOf is b's change from a in percent; from 0 there is no percentage.
func changeOf(a, b float64, both bool) string {
	switch {
	case !both || math.IsNaN(a) || math.IsNaN(b):
		return ""
	case a == b:
		return "0.0%"
	case a == 0:
		return "from 0"
	}
	return fmt.Sprintf("%+.1f%%", (b-a)/math.Abs(a)*100)
}
