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
	"github.com/planrun/planrun/units"
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
	fmt.Fprintf(w, "- units: %s\n", res.Units)
	if res.Format > 0 && len(res.Violations) == 0 {
		fmt.Fprintf(w, "- figures checked: every invariant holds (phases add up to the run, received = distinct + duplicates + untracked, ...)\n")
	}
	fmt.Fprintln(w)
	if len(res.Violations) > 0 {
		fmt.Fprintf(w, "## Figures that do not add up\n\n")
		fmt.Fprintf(w, "The run's figures break invariants they should hold: a defect of planrun, please report it with this result.\n\n")
		for _, v := range res.Violations {
			fmt.Fprintf(w, "- %s\n", v)
		}
		fmt.Fprintln(w)
	}

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
		if len(run.Metrics.Phases) == 0 {
			fmt.Fprintf(w, "No phases: %s.\n\n", noPhasesWhy(run.Status))
		}
		for _, sec := range runSections {
			if h, rows := sec.table(&run); len(rows) > 0 {
				fmt.Fprintf(w, "%s:\n\n", sec.intro)
				Table(w, h, rows)
				fmt.Fprintln(w)
			}
		}
		if len(run.Probes) > 0 {
			keys := make([]string, 0, len(run.Probes))
			for k := range run.Probes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if run.Probes[k] == nil {
					fmt.Fprintf(w, "- probe %s: none (its step was skipped by its if:)\n", k)
					continue
				}
				fmt.Fprintf(w, "- probe %s\n", units.Labelled(k, run.Probes[k]))
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

// noPhasesWhy says why a run has no phase: a phase is kept when a step
// named it or a workload counted a message in it.
func noPhasesWhy(status string) string {
	switch status {
	case results.Failed:
		return "the run failed before it measured anything"
	case results.Interrupted:
		return "the run was interrupted before it measured anything"
	}
	return "no workload sent or received a message and no step named a phase"
}

// runSections are the tables of each run, in order, with the line that
// introduces them.
var runSections = []struct {
	intro string
	table func(*results.Run) ([]string, [][]string)
}{
	{"Produce (latency from intended send time to broker ack, ms)", ProduceTable},
	{"Consume (end-to-end latency from intended send time to receipt, ms)", ConsumeTable},
	{"Driver figures at each phase's last sample before its workloads were stopped (connections, in flight...)", GaugeTable},
	{"Events (connections lost and back, errors, rebalances; seconds since the start)", EventsTable},
	{"Outages (time with connections down; of the sends intended during it, those that failed and those acked late)", OutageTable},
	{"Collected figures (phase average / max)", ExtraTable},
	{"Search trials (target and achieved msg/s over each trial's measured window; confirmations run after the bisection at the rate it found, stepping down until one passes)", SearchTable},
	{"Workers (first message in seconds since the start, on the conductor's clock; each worker's clock minus the conductor's, its largest change during the run and the best round trip, ms; control traffic with the conductor, kB)", WorkersTable},
}

// SearchTable is a row per trial of every search step, then the rate each
// search confirmed.
func SearchTable(run *results.Run) ([]string, [][]string) {
	header := []string{"search", "trial", "target msg/s", "measured s", "acked", "achieved msg/s", "send p99 ms", "failed", "result", "detail"}
	var rows [][]string
	for _, s := range run.Searches {
		n, c := 0, 0
		for _, t := range s.Trials {
			label := ""
			if t.Confirm {
				c++
				label = fmt.Sprintf("confirmation %d", c)
			} else {
				n++
				label = fmt.Sprintf("%d", n)
			}
			result := "failed"
			if t.Passed {
				result = "passed"
			}
			rows = append(rows, []string{s.Name, label, F(t.Rate, 0), F(t.Seconds, 1), I(t.Acked), F(t.Achieved, 1), F(t.P99, 2), I(t.Failed), result, t.Detail})
		}
		found := "none confirmed"
		if s.Rate > 0 {
			found = "confirmed"
		}
		rows = append(rows, []string{s.Name, "result", F(s.Rate, 0), "", "", "", "", "", found, fmt.Sprintf("the bisection found %s msg/s", F(s.Found, 0))})
	}
	return header, rows
}

// WorkersTable is a row per worker of a run over workers.
func WorkersTable(run *results.Run) ([]string, [][]string) {
	header := []string{"worker", "address", "host", "workloads", "first message s", "clock offset ms", "drift ms", "rtt ms", "received kB", "sent kB", "lost"}
	var rows [][]string
	for _, w := range run.Workers {
		first, lost := "", ""
		if w.FirstMessageS != 0 {
			first = F(w.FirstMessageS, 3)
		}
		if w.Lost {
			lost = "**lost**"
		}
		rows = append(rows, []string{I(int64(w.Index)), w.Addr, w.Host, strings.Join(w.Workloads, ", "), first,
			F(w.OffsetMs, 3), F(w.DriftMs, 3), F(w.RTTMs, 3), F(float64(w.ReceivedBytes)/1e3, 1), F(float64(w.SentBytes)/1e3, 1), lost})
	}
	return header, rows
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// F formats a float with d decimals.
// A figure that was not measured (metrics.NA) prints n/a.
func F(v float64, d int) string {
	if metrics.IsNA(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// I formats an integer.
func I(v int64) string { return strconv.FormatInt(v, 10) }

func phaseName(n string) string { return metrics.PhaseLabel(n) }

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

// latHeader are the headings of lat's columns for a latency named which
// (send or e2e).
func latHeader(which string) []string {
	var h []string
	for _, f := range []string{"avg", "p50", "p95", "p99", "p99.9", "max"} {
		h = append(h, which+" "+f+" ms")
	}
	return h
}

func lat(l metrics.Latency) []string {
	return []string{F(l.Avg, 2), F(l.P50, 2), F(l.P95, 2), F(l.P99, 2), F(l.P999, 2), F(l.Max, 2)}
}

// ProduceTable is a row per phase and producing workload.
func ProduceTable(run *results.Run) ([]string, [][]string) {
	header := append([]string{"phase", "workload", "duration s", "acked", "msg/s", "max msg/s", "MB/s"}, latHeader("send")...)
	header = append(header, "failed")
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
	header := append([]string{"phase", "workload", "duration s", "received", "distinct", "msg/s", "max msg/s", "MB/s"}, latHeader("e2e")...)
	header = append(header, "backlog msgs", "in flight", "lost", "backlog MB", "broker lag", "dup", "reordered")
	var rows [][]string
	names := workloadNames(run, receives)
	for _, ph := range run.Metrics.Phases {
		for _, n := range names {
			s := ph.Workloads[n]
			row := []string{phaseName(ph.Name), n, F(ph.Duration(), 1), I(s.Received), I(s.Distinct), F(s.RecvRate, 1), F(s.MaxRecvRate, 0), F(s.RecvMBps, 2)}
			row = append(row, lat(s.E2E)...)
			lag := lagCell(s, ph.Duration())
			rows = append(rows, append(row, I(s.Backlog.Messages), I(s.InFlight), I(s.Lost), F(float64(s.Backlog.Bytes)/1e6, 2), lag, I(s.Duplicates), I(s.Reordered)))
		}
	}
	return header, rows
}

// lagCell is the broker's lag at a phase's end with how old it was then:
// the broker is asked every lag_interval and consumers commit behind what
// they read. A lag measured before the phase began says so.
func lagCell(s metrics.Stats, phaseLen float64) string {
	switch {
	case s.Lag < 0:
		return "n/a"
	case metrics.IsNA(s.LagAge) || s.LagAge < 0.05:
		return I(s.Lag)
	case s.LagAge > phaseLen:
		return fmt.Sprintf("%s (%s s old, from before the phase)", I(s.Lag), F(s.LagAge, 1))
	}
	return fmt.Sprintf("%s (%s s old)", I(s.Lag), F(s.LagAge, 1))
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

// RunsTable is a row per matrix combination and workload, whole-run
// figures: the send latency of what a workload sends, the end-to-end
// latency of what it receives (a relay has both).
func RunsTable(res *results.Result) ([]string, [][]string) {
	header := []string{"run", "status", "workload", "messages", "avg msg/s", "max msg/s", "MB/s", "failed", "send p99 ms", "send max ms", "e2e p99 ms", "e2e max ms"}
	var rows [][]string
	for i := range res.Runs {
		run := &res.Runs[i]
		for _, n := range run.Metrics.Order {
			s := run.Metrics.Workloads[n]
			role := run.Role(n)
			msgs, mbps := s.Acked, s.SendMBps
			if !role.Produces() {
				msgs, mbps = s.Received, s.RecvMBps
			}
			send, e2e := []string{"", ""}, []string{"", ""}
			if role.Sends {
				send = []string{F(s.Latency.P99, 2), F(s.Latency.Max, 2)}
			}
			if role.Receives {
				e2e = []string{F(s.E2E.P99, 2), F(s.E2E.Max, 2)}
			}
			row := []string{run.Label, run.Status, n, I(msgs), F(s.Rate, 1), F(s.MaxRate, 0), F(mbps, 2), I(s.Failed)}
			rows = append(rows, append(append(row, send...), e2e...))
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

// clockS formats seconds since the start as hh:mm:ss.
func clockS(s float64) string {
	n := max(int64(s), 0)
	return fmt.Sprintf("%02d:%02d:%02d", n/3600, n/60%60, n%60)
}

// EventsTable is a row per workload, event and reason, and run of
// consecutive seconds in which it happened: a broker down for a minute
// makes one row of send errors, not sixty.
func EventsTable(run *results.Run) ([]string, [][]string) {
	header := []string{"time", "workload", "event", "count"}
	type key struct{ workload, event, reason string }
	type span struct {
		from, to float64
		count    int64
		of       int
	}
	open := map[key]*span{}
	var order []key
	var spans []span
	var keys []key
	flush := func(k key) {
		if sp := open[k]; sp != nil {
			spans = append(spans, *sp)
			keys = append(keys, k)
			delete(open, k)
		}
	}
	for _, e := range run.Metrics.Events {
		k := key{e.Workload, e.Event, e.Reason}
		if sp := open[k]; sp != nil && e.T <= sp.to+1 {
			sp.to, sp.count, sp.of = e.T, sp.count+e.Count, max(sp.of, e.Of)
			continue
		}
		flush(k)
		open[k] = &span{from: e.T, to: e.T, count: e.Count, of: e.Of}
		order = append(order, k)
	}
	for _, k := range order {
		flush(k)
	}
	idx := make([]int, len(spans))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return spans[idx[a]].from < spans[idx[b]].from })
	var rows [][]string
	for _, i := range idx {
		sp, k := spans[i], keys[i]
		when := clockS(sp.from)
		if sp.to > sp.from {
			when += "-" + clockS(sp.to)
		}
		what := strings.ReplaceAll(k.event, "_", " ")
		if k.reason != "" {
			what += " (" + k.reason + ")"
		}
		count := I(sp.count)
		if (k.event == metrics.EventDisconnected || k.event == metrics.EventReconnected) && sp.of > 1 {
			count += " of " + strconv.Itoa(sp.of)
		}
		rows = append(rows, []string{when, k.workload, what, count})
	}
	return header, rows
}

// OutageTable is a row per outage of a workload, in the phase it began in.
func OutageTable(run *results.Run) ([]string, [][]string) {
	header := []string{"phase", "workload", "from", "to", "seconds", "clients down", "reconnected", "reason", "sends due", "sends failed", "sends delayed"}
	var rows [][]string
	for _, o := range run.Metrics.Outages {
		to := clockS(o.End)
		if !o.Ended {
			to += " (still down at the end)"
		}
		down := strconv.Itoa(o.Clients)
		if o.Of > 1 {
			down += " of " + strconv.Itoa(o.Of)
		}
		rows = append(rows, []string{phaseName(o.Phase), o.Workload, clockS(o.Start), to, F(o.Duration(), 1), down, I(o.Reconnects),
			o.Reason, I(o.Due), I(o.Failed), I(o.Delayed)})
	}
	return header, rows
}
