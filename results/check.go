package results

import (
	"fmt"
	"sort"
	"strings"

	"github.com/planrun/planrun/metrics"
)

// FormatVersion is the version of the result format this planrun writes.
// Results saved before the format had a version read as version 1.
// Version 2 adds the distinct count and phases that partition the run;
// version 3 figures not measured (null), per-second points with counts
// that add up to their phase, and the broker lag's age; version 4 the
// in-flight part of the backlog and each outage's sends due.
const FormatVersion = 4

// Check is one invariant a reader of a result relies on: a named, small
// function over one run that returns a sentence per violation, naming the
// figures that disagree. Since is the first format version whose results
// carry what the check reads; older results say the check does not apply.
type Check struct {
	Name  string
	Doc   string // one sentence: what holds when the check passes
	Since int
	Run   func(r *Run) []string
}

// checks is the registry of invariants, in the order they run.
var checks []Check

// RegisterCheck adds an invariant. Packages call it from init; a second
// check of the same name is a programming error.
func RegisterCheck(c Check) {
	for _, o := range checks {
		if o.Name == c.Name {
			panic("results: check " + c.Name + " registered twice")
		}
	}
	if c.Since == 0 {
		c.Since = 1
	}
	checks = append(checks, c)
}

// Checks lists the registered invariants.
func Checks() []Check { return append([]Check(nil), checks...) }

// Violation is one invariant a run's figures do not hold.
type Violation struct {
	Run    int    `json:"run"`
	Label  string `json:"label,omitempty"`
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	run := fmt.Sprintf("run %d", v.Run+1)
	if v.Label != "" {
		run += " (" + v.Label + ")"
	}
	return fmt.Sprintf("%s: %s: %s", run, v.Check, v.Detail)
}

// CheckReport is what checking a result found.
type CheckReport struct {
	// Version is the result's format version.
	Version    int
	Violations []Violation
	// NotApplied names the checks that need a newer format than the
	// result's.
	NotApplied []string
}

// FormatVersionOf is the result's format version (1 for results saved
// before versions).
func (r *Result) FormatVersionOf() int {
	if r.Format == 0 {
		return 1
	}
	return r.Format
}

// Check runs every registered invariant over every run of the result.
func (r *Result) Check() CheckReport {
	rep := CheckReport{Version: r.FormatVersionOf()}
	for _, c := range checks {
		if c.Since > rep.Version {
			rep.NotApplied = append(rep.NotApplied, c.Name)
			continue
		}
		for i := range r.Runs {
			run := &r.Runs[i]
			for _, d := range c.Run(run) {
				rep.Violations = append(rep.Violations, Violation{Run: run.Index, Label: run.Label, Check: c.Name, Detail: d})
			}
		}
	}
	return rep
}

// Workloads lists the run's workloads in the order the run reported them.
func (r *Run) Workloads() []string {
	names := append([]string(nil), r.Metrics.Order...)
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	var rest []string
	for n := range r.Metrics.Workloads {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// Row is one row of a run's figures: the run's totals or one phase.
type Row struct {
	Name  string // "run" or `phase "x"`
	Stats metrics.Stats
}

// Rows lists a workload's rows: the run's totals first, then each phase
// (rows that do not have the workload are left out).
func (r *Run) Rows(workload string) []Row {
	rows := []Row{{Name: "run", Stats: r.Metrics.Workloads[workload]}}
	for _, p := range r.Metrics.Phases {
		if s, ok := p.Workloads[workload]; ok {
			rows = append(rows, Row{Name: fmt.Sprintf("phase %q", p.Name), Stats: s})
		}
	}
	return rows
}

// counts are the counts that the phases partition: every message counted
// in the run is counted in exactly one phase.
var counts = []struct {
	name string
	get  func(metrics.Stats) int64
}{
	{"sent", func(s metrics.Stats) int64 { return s.Sent }},
	{"acked", func(s metrics.Stats) int64 { return s.Acked }},
	{"failed", func(s metrics.Stats) int64 { return s.Failed }},
	{"received", func(s metrics.Stats) int64 { return s.Received }},
	{"distinct", func(s metrics.Stats) int64 { return s.Distinct }},
	{"duplicates", func(s metrics.Stats) int64 { return s.Duplicates }},
	{"untracked", func(s metrics.Stats) int64 { return s.Untracked }},
	{"bytes_acked", func(s metrics.Stats) int64 { return s.BytesAcked }},
	{"bytes_received", func(s metrics.Stats) int64 { return s.BytesReceived }},
}

func checkPhasesPartition(r *Run) []string {
	if len(r.Metrics.Phases) == 0 {
		return nil
	}
	var out []string
	for _, w := range r.Workloads() {
		run := r.Metrics.Workloads[w]
		for _, c := range counts {
			var sum int64
			var parts []string
			for _, p := range r.Metrics.Phases {
				if s, ok := p.Workloads[w]; ok {
					sum += c.get(s)
					parts = append(parts, fmt.Sprintf("%d", c.get(s)))
				}
			}
			if sum != c.get(run) {
				out = append(out, fmt.Sprintf("%s: %s is %d in the run, the phases sum to %d (%s)",
					w, c.name, c.get(run), sum, strings.Join(parts, " + ")))
			}
		}
	}
	return out
}

func checkReceivedSplit(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		for _, row := range r.Rows(w) {
			s := row.Stats
			if s.Received != s.Distinct+s.Duplicates+s.Untracked {
				out = append(out, fmt.Sprintf("%s, %s: received %d != distinct %d + duplicates %d + untracked %d",
					w, row.Name, s.Received, s.Distinct, s.Duplicates, s.Untracked))
			}
		}
	}
	return out
}

func checkLatencyCounts(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		for _, row := range r.Rows(w) {
			s := row.Stats
			if s.Latency.Count != s.Acked {
				out = append(out, fmt.Sprintf("%s, %s: %d send latencies for %d acked messages", w, row.Name, s.Latency.Count, s.Acked))
			}
			if tracked := s.Received - s.Untracked; s.E2E.Count != tracked {
				out = append(out, fmt.Sprintf("%s, %s: %d end-to-end latencies for %d received messages with this run's header", w, row.Name, s.E2E.Count, tracked))
			}
		}
	}
	return out
}

func checkNonNegative(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		for _, row := range r.Rows(w) {
			for _, c := range counts {
				if v := c.get(row.Stats); v < 0 {
					out = append(out, fmt.Sprintf("%s, %s: %s is %d", w, row.Name, c.name, v))
				}
			}
		}
	}
	return out
}

func init() {
	RegisterCheck(Check{Name: "counts-not-negative", Since: 1,
		Doc: "no count of any row (run or phase) is negative", Run: checkNonNegative})
	RegisterCheck(Check{Name: "phases-partition-run", Since: 2,
		Doc: "for every workload, sent, acked, failed, received, distinct, duplicates, untracked and bytes summed over the phases equal the run's", Run: checkPhasesPartition})
	RegisterCheck(Check{Name: "received-split", Since: 2,
		Doc: "in every row, received = distinct + duplicates + untracked", Run: checkReceivedSplit})
	RegisterCheck(Check{Name: "latency-per-message", Since: 2,
		Doc: "in every row, the send latency histogram holds one value per acked message and the end-to-end one per received message with this run's header, so a row with no messages has no latency", Run: checkLatencyCounts})
}
