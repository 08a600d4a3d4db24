package reporters

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// Floors are how much a figure must change for compare to show it
// (--all shows every figure): a latency by both Percent and Ms, any
// other figure by Percent; a count of failures by any amount.
type Floors struct {
	Percent float64 // of A
	Ms      float64 // latency only
}

// DefaultFloors are compare's floors unless --floor sets them.
var DefaultFloors = Floors{Percent: 1, Ms: 0.5}

// CompareOptions are compare's settings: All shows every figure, not
// only those that differ beyond Floors; Rules are the --fail-if gates.
type CompareOptions struct {
	All    bool
	Floors Floors
	Rules  []Rule
}

// Breach is one compared figure a rule failed on.
type Breach struct {
	Rule   string
	Row    string // run, phase, workload and figure
	Reason string
}

// CompareRow is one figure of both results.
type CompareRow struct {
	Run, Phase, Workload, Figure string
	A, B                         float64
	OkA, OkB                     bool // the figure is in A, in B
	unit                         string
}

// name is the row's figure fully qualified: phase/workload.figure.
func (r CompareRow) name() string {
	s := r.Figure
	if r.Workload != "" {
		s = r.Workload + "." + s
	}
	s = r.Phase + "/" + s
	if r.Run != "" {
		s = "run " + r.Run + ": " + s
	}
	return s
}

// matches reports whether a rule's figure names this row: figure,
// workload.figure, phase/figure or phase/workload.figure. A send latency
// (send.p99) is also named without its prefix (p99).
func (r CompareRow) matches(figure string) bool {
	figures := []string{r.Figure}
	if f, ok := strings.CutPrefix(r.Figure, "send."); ok {
		figures = append(figures, f)
	}
	for _, f := range figures {
		names := []string{f, r.Phase + "/" + f}
		if r.Workload != "" {
			names = append(names, r.Workload+"."+f, r.Phase+"/"+r.Workload+"."+f)
		}
		if slices.Contains(names, figure) {
			return true
		}
	}
	return false
}

// shown reports whether the row differs beyond the floors.
func (r CompareRow) shown(fl Floors) bool {
	if !r.OkA || !r.OkB || metrics.IsNA(r.A) || metrics.IsNA(r.B) {
		return false
	}
	d := math.Abs(r.B - r.A)
	switch {
	case d == 0:
		return false
	case r.Figure == "failed":
		return true
	case r.A == 0:
		return r.unit != "ms" || d >= fl.Ms
	}
	pct := d / math.Abs(r.A) * 100
	if r.unit == "ms" && d < fl.Ms {
		return false
	}
	return pct >= fl.Percent
}

// Compare writes markdown tables setting result b beside result a: for
// each run (matched by label), phase (matched by name) and workload the
// figures of its role, then the phase averages of collected figures, each
// with b's change from a in percent. Only figures that differ beyond the
// floors are shown unless opt.All. Runs and phases found in only one
// result are listed. Each rule is checked against every figure it names;
// the breaches are listed and returned. A rule that names no figure is an
// error.
func Compare(w io.Writer, a, b *results.Result, opt CompareOptions) ([]Breach, error) {
	fmt.Fprintf(w, "# Comparison\n\n")
	fmt.Fprintf(w, "- A: %s\n", describeResult(a))
	fmt.Fprintf(w, "- B: %s\n", describeResult(b))
	fmt.Fprintf(w, "- change: (B - A) / A; msg/s in messages/s, MB/s in 10^6 bytes/s; send.p50, send.p99, send.max: send latency in ms (to the broker's acknowledgement); e2e.p50, e2e.p99, e2e.max: end-to-end latency in ms\n")
	if opt.All {
		fmt.Fprintf(w, "- every figure (--all)\n\n")
	} else {
		fmt.Fprintf(w, "- figures that differ by at least %g%% (and %g ms for latency; failed: any change)\n\n", opt.Floors.Percent, opt.Floors.Ms)
	}

	bRuns := map[string]*results.Run{}
	for i := range b.Runs {
		bRuns[b.Runs[i].Label] = &b.Runs[i]
	}
	matched := map[string]bool{}
	var unmatched []string
	var all []CompareRow
	for i := range a.Runs {
		ra := &a.Runs[i]
		rb, ok := bRuns[ra.Label]
		if !ok {
			unmatched = append(unmatched, fmt.Sprintf("run %s is only in A", runLabel(ra)))
			continue
		}
		matched[ra.Label] = true
		rows, notes := compareRun(w, ra, rb, len(a.Runs) > 1 || len(b.Runs) > 1, opt)
		all = append(all, rows...)
		unmatched = append(unmatched, notes...)
	}
	for i := range b.Runs {
		if !matched[b.Runs[i].Label] {
			unmatched = append(unmatched, fmt.Sprintf("run %s is only in B", runLabel(&b.Runs[i])))
		}
	}
	if len(unmatched) > 0 {
		fmt.Fprintf(w, "Not compared:\n\n")
		for _, u := range unmatched {
			fmt.Fprintf(w, "- %s\n", u)
		}
		fmt.Fprintln(w)
	}
	return checkRules(w, opt.Rules, all)
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

// compareRun writes one run's tables and returns every row of it, shown
// or not, and the phases it could not match.
func compareRun(w io.Writer, a, b *results.Run, heading bool, opt CompareOptions) ([]CompareRow, []string) {
	if heading {
		fmt.Fprintf(w, "## Run %s\n\n", runLabel(a))
	}
	if a.Status != b.Status {
		fmt.Fprintf(w, "Status: A %s, B %s\n\n", a.Status, b.Status)
	}
	var rows []CompareRow
	phasesA, phasesB := phaseMap(a), phaseMap(b)
	var notes []string
	of := ""
	if heading {
		of = " of run " + runLabel(a)
	}
	names := workloadUnion(a, b)
	for _, pa := range a.Metrics.Phases {
		pb, ok := phasesB[phaseName(pa.Name)]
		if !ok {
			notes = append(notes, fmt.Sprintf("phase %s%s is only in A", phaseName(pa.Name), of))
			continue
		}
		rows = append(rows, workloadRows(phaseName(pa.Name), names, a, b, pa.Workloads, pb.Workloads)...)
	}
	for _, pb := range b.Metrics.Phases {
		if _, ok := phasesA[phaseName(pb.Name)]; !ok {
			notes = append(notes, fmt.Sprintf("phase %s%s is only in B", phaseName(pb.Name), of))
		}
	}
	if len(notes) > 0 && len(rows) == 0 && len(a.Metrics.Phases)+len(b.Metrics.Phases) > 0 {
		notes = append(notes, fmt.Sprintf("no phase%s matched: only whole-run figures were compared", of))
	}
	rows = append(rows, workloadRows(wholeRun, names, a, b, a.Metrics.Workloads, b.Metrics.Workloads)...)
	extra := compareExtraRows(a, b, phasesB)
	label := runLabel(a)
	if !heading {
		label = ""
	}
	for i := range rows {
		rows[i].Run = label
	}
	for i := range extra {
		extra[i].Run = label
	}

	var table, extraTable [][]string
	hidden := 0
	for _, r := range rows {
		if !opt.All && !r.shown(opt.Floors) {
			hidden++
			continue
		}
		table = append(table, []string{r.Phase, r.Workload, r.Figure, presentRow(r, r.A, r.OkA), presentRow(r, r.B, r.OkB), changeOf(r.A, r.B, r.OkA && r.OkB)})
	}
	for _, r := range extra {
		if !opt.All && !r.shown(opt.Floors) {
			hidden++
			continue
		}
		extraTable = append(extraTable, []string{r.Phase, r.Figure, presentRow(r, r.A, r.OkA), presentRow(r, r.B, r.OkB), changeOf(r.A, r.B, r.OkA && r.OkB)})
	}
	if len(table) > 0 {
		Table(w, []string{"phase", "workload", "figure", "A", "B", "change"}, table)
		fmt.Fprintln(w)
	}
	if len(extraTable) > 0 {
		fmt.Fprintf(w, "Collected figures (phase averages):\n\n")
		Table(w, []string{"phase", "figure", "A", "B", "change"}, extraTable)
		fmt.Fprintln(w)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "%d figures within the floors, zero or n/a not shown (--all shows them).\n\n", hidden)
	}
	return append(rows, extra...), notes
}

func phaseMap(r *results.Run) map[string]metrics.Phase {
	m := make(map[string]metrics.Phase, len(r.Metrics.Phases))
	for _, p := range r.Metrics.Phases {
		m[phaseName(p.Name)] = p
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

// figure is one compared number of a workload.
type figure struct {
	name, unit string
	v          float64
}

// workloadFigures are the compared figures of one workload in one window,
// by its role: the send latency and failures of what it sends, the
// end-to-end latency of what it receives; its rate and MB/s are what it
// sent for producers, what it received otherwise.
func workloadFigures(role metrics.Role, s metrics.Stats) []figure {
	mbps := s.RecvMBps
	if role.Produces() {
		mbps = s.SendMBps
	}
	fs := []figure{{name: "msg/s", unit: "msg/s", v: s.Rate}, {name: "MB/s", unit: "MB/s", v: mbps}}
	if role.Sends {
		fs = append(fs, figure{name: "send.p50", unit: "ms", v: s.Latency.P50}, figure{name: "send.p99", unit: "ms", v: s.Latency.P99},
			figure{name: "send.max", unit: "ms", v: s.Latency.Max})
	}
	if role.Receives {
		fs = append(fs, figure{name: "e2e.p50", unit: "ms", v: s.E2E.P50}, figure{name: "e2e.p99", unit: "ms", v: s.E2E.P99},
			figure{name: "e2e.max", unit: "ms", v: s.E2E.Max})
	}
	if role.Sends {
		fs = append(fs, figure{name: "failed", v: float64(s.Failed)})
	}
	return fs
}

func workloadRows(phase string, names []string, a, b *results.Run, wa, wb map[string]metrics.Stats) []CompareRow {
	var rows []CompareRow
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
			rows = append(rows, CompareRow{Phase: phase, Workload: n, Figure: f.name, unit: f.unit, A: f.v, B: fb[i].v, OkA: okA, OkB: okB})
		}
	}
	return rows
}

func compareExtraRows(a, b *results.Run, phasesB map[string]metrics.Phase) []CompareRow {
	var rows []CompareRow
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
			rows = append(rows, CompareRow{Phase: phase, Figure: k, A: ga.Avg, B: gb.Avg, OkA: okA, OkB: okB})
		}
	}
	for _, pa := range a.Metrics.Phases {
		if pb, ok := phasesB[phaseName(pa.Name)]; ok {
			add(phaseName(pa.Name), pa.Extra, pb.Extra)
		}
	}
	add(wholeRun, a.Metrics.ExtraRun, b.Metrics.ExtraRun)
	return rows
}

func presentRow(r CompareRow, v float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case r.Figure == "failed":
		return F(v, 0)
	}
	return F(v, 2)
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

// Rule is one --fail-if gate: FIGURE OP CHANGE.
type Rule struct {
	Text    string
	Figure  string  // figure, workload.figure, phase/figure or phase/workload.figure
	Greater bool    // > (fails when the change is above Change), else <
	Change  float64 // in percent when Percent, else in Unit
	Percent bool
	Unit    string // ms, msg/s, MB/s or "" (counts and collected figures)
}

// ruleUnits are the units an absolute change may carry.
var ruleUnits = map[string]bool{"ms": true, "msg/s": true, "MB/s": true}

// figureUnits are the workload figures compare prints, by the unit a
// rule's absolute change on them carries; p50, p99 and max are the send
// latency's too.
var figureUnits = map[string]string{
	"send.p50": "ms", "send.p99": "ms", "send.max": "ms", "p50": "ms", "p99": "ms", "max": "ms", "e2e.p50": "ms", "e2e.p99": "ms", "e2e.max": "ms",
	"msg/s": "msg/s", "MB/s": "MB/s", "failed": "",
}

// ParseFloor sets the floor a --floor value gives: a percentage (2%)
// or a latency (1ms).
func (fl *Floors) ParseFloor(s string) error {
	v := strings.TrimSpace(s)
	var dst *float64
	switch {
	case strings.HasSuffix(v, "%"):
		dst, v = &fl.Percent, strings.TrimSuffix(v, "%")
	case strings.HasSuffix(v, "ms"):
		dst, v = &fl.Ms, strings.TrimSuffix(v, "ms")
	default:
		return fmt.Errorf("--floor %q: give a percentage (2%%) or a latency in ms (1ms)", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("--floor %q: not a number of 0 or more; give a percentage (2%%) or a latency in ms (1ms)", s)
	}
	*dst = f
	return nil
}

// ParseRule reads a --fail-if expression such as "p99 > +10%",
// "producer.p99 > +2ms" or "cold-read/consumer.msg/s < -5%".
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	i := strings.IndexAny(s, "<>")
	if i < 0 {
		return r, fmt.Errorf("--fail-if %q: no operator; write FIGURE > CHANGE or FIGURE < CHANGE, e.g. 'p99 > +10%%'", s)
	}
	r.Greater = s[i] == '>'
	r.Figure = strings.TrimSpace(s[:i])
	change := strings.TrimSpace(s[i+1:])
	switch {
	case r.Figure == "":
		return r, fmt.Errorf("--fail-if %q: no figure before %c; name one compare prints (send.p99 or p99, e2e.p99, msg/s, producer.p99...)", s, s[i])
	case strings.ContainsAny(r.Figure, " \t"):
		return r, fmt.Errorf("--fail-if %q: figure %q has a space; write phase/workload.figure", s, r.Figure)
	case strings.ContainsAny(change, "<>="):
		return r, fmt.Errorf("--fail-if %q: one operator, > or <, then the change", s)
	case change == "":
		return r, fmt.Errorf("--fail-if %q: no change after %c; give a percentage (+10%%) or a value with its unit (+2ms)", s, s[i])
	}
	num := strings.TrimRight(change, "%abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/ ")
	unit := strings.TrimSpace(change[len(num):])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return r, fmt.Errorf("--fail-if %q: change %q is not a number with a unit; write +10%%, -5%%, +2ms, -100msg/s", s, change)
	}
	r.Change = v
	want, known := figureUnits[baseFigure(r.Figure)]
	switch {
	case unit == "%":
		r.Percent = true
	case known && unit != want:
		if want == "" {
			return r, fmt.Errorf("--fail-if %q: %s is a count: give a percentage or a bare number, not %q", s, baseFigure(r.Figure), unit)
		}
		got := fmt.Sprintf("%q", unit)
		if unit == "" {
			got = "a bare number"
		}
		return r, fmt.Errorf("--fail-if %q: %s is in %s: give a percentage (+10%%) or a value in %s (+2%s), not %s", s, baseFigure(r.Figure), want, want, want, got)
	case !known && unit != "":
		if !ruleUnits[unit] {
			return r, fmt.Errorf("--fail-if %q: unknown unit %q; use %%, ms, msg/s or MB/s", s, unit)
		}
	}
	r.Unit = unit
	if r.Percent {
		r.Unit = ""
	}
	return r, nil
}

// baseFigure is the figure a rule's name ends in, without its phase and
// workload, when it is one compare prints for workloads.
func baseFigure(name string) string {
	best := ""
	for f := range figureUnits {
		if (name == f || strings.HasSuffix(name, "."+f) || strings.HasSuffix(name, "/"+f)) && len(f) > len(best) {
			best = f
		}
	}
	if best == "" {
		return name
	}
	return best
}

// checkRules checks every rule against the rows it names and writes the
// breaches.
func checkRules(w io.Writer, rules []Rule, rows []CompareRow) ([]Breach, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var breaches []Breach
	var unmatched []string
	for _, rule := range rules {
		n := 0
		for _, row := range rows {
			if !row.matches(rule.Figure) || (rule.Unit != "" && rule.Unit != row.unit) {
				continue
			}
			n++
			if reason := rule.check(row); reason != "" {
				breaches = append(breaches, Breach{Rule: rule.Text, Row: row.name(), Reason: reason})
			}
		}
		if n == 0 {
			unmatched = append(unmatched, fmt.Sprintf("%q", rule.Text))
		}
	}
	fmt.Fprintf(w, "## Gates\n\n")
	if len(breaches) == 0 {
		fmt.Fprintf(w, "Every --fail-if rule holds (%s).\n\n", strings.Join(quoted(rules), ", "))
	}
	for _, b := range breaches {
		fmt.Fprintf(w, "- FAILED %s: %s: %s\n", b.Rule, b.Row, b.Reason)
	}
	if len(breaches) > 0 {
		fmt.Fprintln(w)
	}
	if len(unmatched) > 0 {
		sort.Strings(unmatched)
		return breaches, fmt.Errorf("--fail-if %s: names no figure compare prints (figures: msg/s, MB/s, send.p50, send.p99, send.max (or p50, p99, max), e2e.p50, e2e.p99, e2e.max, failed or a collected figure, optionally as workload.figure, phase/figure or phase/workload.figure)", strings.Join(unmatched, ", "))
	}
	return breaches, nil
}

// check is why row breaks the rule, or "" when it holds.
func (rule Rule) check(row CompareRow) string {
	a, b := row.A, row.B
	unit := row.unit
	if unit == "ms" {
		unit = " ms"
	} else if unit != "" {
		unit = " " + unit
	}
	switch {
	case !row.OkA:
		return "" // nothing to compare with
	case !row.OkB:
		return "not in B"
	case metrics.IsNA(a):
		return ""
	case metrics.IsNA(b):
		return fmt.Sprintf("A %s%s, B n/a (nothing measured)", F(a, 2), unit)
	}
	d := b - a
	if rule.Percent {
		if a == 0 {
			if b == 0 {
				return ""
			}
			return fmt.Sprintf("A 0, B %s%s: a change from 0 has no percentage; gate this figure with an absolute change", F(b, 2), unit)
		}
		pct := d / math.Abs(a) * 100
		if (rule.Greater && pct > rule.Change) || (!rule.Greater && pct < rule.Change) {
			return fmt.Sprintf("A %s%s, B %s%s, change %+.1f%%", F(a, 2), unit, F(b, 2), unit, pct)
		}
		return ""
	}
	if (rule.Greater && d > rule.Change) || (!rule.Greater && d < rule.Change) {
		return fmt.Sprintf("A %s%s, B %s%s, change %+g%s", F(a, 2), unit, F(b, 2), unit, d, unit)
	}
	return ""
}

func quoted(rules []Rule) []string {
	q := make([]string, len(rules))
	for i, r := range rules {
		q[i] = strconv.Quote(r.Text)
	}
	return q
}
