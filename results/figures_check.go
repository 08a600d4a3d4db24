package results

import (
	"fmt"
	"strings"

	"github.com/planrun/planrun/metrics"
)

// Checks of the rates and latencies of each row (see metrics.NA): a row
// without messages has no latency and no per-second maximum, the
// per-second maximum of a phase of a second or more is at least its
// average, and the per-second points of a phase add up to it.

func init() {
	RegisterCheck(Check{Name: "no-figures-without-messages", Since: 3,
		Doc: "a row (run or phase) without acked messages has no send latency and no per-second send maximum, one without received messages no end-to-end latency and no per-second receive maximum (n/a)", Run: checkNoFiguresWithoutMessages})
	RegisterCheck(Check{Name: "max-at-least-average", Since: 3,
		Doc: "in a phase of a second or more, the per-second maximum is at least the phase's average rate; a shorter phase has none (n/a)", Run: checkMaxAtLeastAverage})
	RegisterCheck(Check{Name: "points-add-up", Since: 3,
		Doc: "the per-second points of each phase lie within it and their counts (sent, acked, failed, received, bytes) add up to the phase's", Run: checkPointsAddUp})
}

// measured lists the latency figures that are numbers.
func measured(l metrics.Latency) []string {
	var out []string
	for _, f := range []struct {
		name string
		v    float64
	}{{"avg", l.Avg}, {"min", l.Min}, {"p50", l.P50}, {"p90", l.P90}, {"p95", l.P95}, {"p99", l.P99}, {"p99.9", l.P999}, {"max", l.Max}} {
		if !metrics.IsNA(f.v) {
			out = append(out, fmt.Sprintf("%s %g ms", f.name, f.v))
		}
	}
	if l.Count != 0 {
		out = append(out, fmt.Sprintf("count %d", l.Count))
	}
	return out
}

func checkNoFiguresWithoutMessages(r *Run) []string {
	var out []string
	for _, w := range r.Workloads() {
		for _, row := range r.Rows(w) {
			s := row.Stats
			if s.Acked == 0 {
				if m := measured(s.Latency); len(m) > 0 {
					out = append(out, fmt.Sprintf("%s, %s: no message acked, yet a send latency (%s)", w, row.Name, strings.Join(m, ", ")))
				}
				if !metrics.IsNA(s.MaxSendRate) {
					out = append(out, fmt.Sprintf("%s, %s: no message acked, yet a per-second send maximum of %g msg/s", w, row.Name, s.MaxSendRate))
				}
			}
			if s.Received == 0 {
				if m := measured(s.E2E); len(m) > 0 {
					out = append(out, fmt.Sprintf("%s, %s: no message received, yet an end-to-end latency (%s)", w, row.Name, strings.Join(m, ", ")))
				}
				if !metrics.IsNA(s.MaxRecvRate) {
					out = append(out, fmt.Sprintf("%s, %s: no message received, yet a per-second receive maximum of %g msg/s", w, row.Name, s.MaxRecvRate))
				}
			}
		}
	}
	return out
}

func checkMaxAtLeastAverage(r *Run) []string {
	var out []string
	for _, p := range r.Metrics.Phases {
		for _, w := range r.Workloads() {
			s, ok := p.Workloads[w]
			if !ok {
				continue
			}
			for _, d := range []struct {
				what      string
				n         int64
				avg, peak float64
			}{{"send", s.Acked, s.SendRate, s.MaxSendRate}, {"receive", s.Received, s.RecvRate, s.MaxRecvRate}} {
				switch {
				case p.Duration() < 1 && !metrics.IsNA(d.peak):
					out = append(out, fmt.Sprintf("%s, phase %q (%.3f s): a per-second %s maximum (%g msg/s) in a phase shorter than a second", w, p.Name, p.Duration(), d.what, d.peak))
				case p.Duration() >= 1 && d.n > 0 && metrics.IsNA(d.peak):
					out = append(out, fmt.Sprintf("%s, phase %q (%.3f s): %d messages but no per-second %s maximum", w, p.Name, p.Duration(), d.n, d.what))
				case p.Duration() >= 1 && d.n > 0 && d.peak < d.avg*(1-1e-9):
					out = append(out, fmt.Sprintf("%s, phase %q (%.3f s): per-second %s maximum %g msg/s below the average %g msg/s", w, p.Name, p.Duration(), d.what, d.peak, d.avg))
				}
			}
		}
	}
	return out
}

func checkPointsAddUp(r *Run) []string {
	if len(r.Metrics.Series) == 0 {
		return nil // the result keeps no series (report.series: false)
	}
	const eps = 1e-6
	var out []string
	for _, p := range r.Metrics.Phases {
		for _, w := range r.Workloads() {
			s, ok := p.Workloads[w]
			if !ok {
				continue
			}
			var sum metrics.Counters
			for _, pt := range r.Metrics.Series[w] {
				if pt.Phase != p.Name || pt.T <= p.Start+eps || pt.T > p.End+eps {
					continue
				}
				if start := pt.T - pt.Interval; start < p.Start-eps {
					out = append(out, fmt.Sprintf("%s, phase %q: the point at %.3f s begins at %.3f s, before the phase (%.3f s)", w, p.Name, pt.T, start, p.Start))
				}
				sum.Sent += pt.Sent
				sum.Acked += pt.Acked
				sum.Failed += pt.Failed
				sum.Received += pt.Received
				sum.BytesAcked += pt.BytesAcked
				sum.BytesReceived += pt.BytesReceived
			}
			for _, c := range []struct {
				name       string
				points, ph int64
			}{{"sent", sum.Sent, s.Sent}, {"acked", sum.Acked, s.Acked}, {"failed", sum.Failed, s.Failed},
				{"received", sum.Received, s.Received}, {"bytes_acked", sum.BytesAcked, s.BytesAcked}, {"bytes_received", sum.BytesReceived, s.BytesReceived}} {
				if c.points != c.ph {
					out = append(out, fmt.Sprintf("%s, phase %q: %s is %d, its per-second points add up to %d", w, p.Name, c.name, c.ph, c.points))
				}
			}
		}
	}
	return out
}
