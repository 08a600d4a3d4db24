package results

import (
	"fmt"
)

// Invariants of the backlog's split and of outages (format version 3).

// checkBacklogSplit: in every row of every workload with a backlog, the
// backlog is what is in flight plus what is proven lost.
func checkBacklogSplit(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		for _, row := range r.Rows(w) {
			s := row.Stats
			if s.Lost < 0 || s.InFlight < 0 || s.Backlog.Messages != s.InFlight+s.Lost {
				out = append(out, fmt.Sprintf("%s, %s: backlog %d != in flight %d + lost %d", w, row.Name, s.Backlog.Messages, s.InFlight, s.Lost))
			}
		}
	}
	return out
}

// checkOutageDue: no outage has more sends answered (delayed or failed)
// than sends intended inside it.
func checkOutageDue(r *Run) []string {
	var out []string
	for _, o := range r.Metrics.Outages {
		if o.Delayed < 0 || o.Failed < 0 || o.Delayed+o.Failed > o.Due {
			out = append(out, fmt.Sprintf("%s, outage at %.1f s: delayed %d + failed %d > %d sends due in it", o.Workload, o.Start, o.Delayed, o.Failed, o.Due))
		}
	}
	return out
}

// checkOutageOnce: each send delayed or failed by an outage counts in one
// outage and in one phase: the outages of a workload, and its phases, add
// up to the run's figures.
func checkOutageOnce(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		run := r.Metrics.Workloads[w].Outage
		var od, of int64
		for _, o := range r.Metrics.Outages {
			if o.Workload == w {
				od += o.Delayed
				of += o.Failed
			}
		}
		if od != run.Delayed || of != run.Failed {
			out = append(out, fmt.Sprintf("%s: the outages count %d delayed and %d failed sends, the run %d and %d", w, od, of, run.Delayed, run.Failed))
		}
		if len(r.Metrics.Phases) == 0 {
			continue
		}
		var pd, pf int64
		for _, p := range r.Metrics.Phases {
			if s, ok := p.Workloads[w]; ok {
				pd += s.Outage.Delayed
				pf += s.Outage.Failed
			}
		}
		if pd != run.Delayed || pf != run.Failed {
			out = append(out, fmt.Sprintf("%s: the phases count %d delayed and %d failed sends in outages, the run %d and %d", w, pd, pf, run.Delayed, run.Failed))
		}
	}
	return out
}

func init() {
	RegisterCheck(Check{Name: "backlog-split", Since: 4,
		Doc: "in every row, backlog messages = in flight + lost, neither negative", Run: checkBacklogSplit})
	RegisterCheck(Check{Name: "outage-sends-due", Since: 4,
		Doc: "in every outage, delayed + failed sends <= the sends intended inside it (due)", Run: checkOutageDue})
	RegisterCheck(Check{Name: "outage-sends-once", Since: 4,
		Doc: "each send delayed or failed by an outage counts in one outage and one phase: a workload's outages, and its phases, add up to the run's outage.delayed and outage.failed", Run: checkOutageOnce})
}
