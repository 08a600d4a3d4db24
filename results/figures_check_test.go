package results

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
)

var notMeasured = metrics.Latency{Avg: metrics.NA, Min: metrics.NA, P50: metrics.NA, P90: metrics.NA, P95: metrics.NA, P99: metrics.NA, P999: metrics.NA, Max: metrics.NA}

// figuresRun is a run of one producer with a phase "p" from 10 s lasting
// dur seconds, its figures st, and its per-second points.
func figuresRun(dur float64, st metrics.Stats, pts ...metrics.Point) *Result {
	if st.E2E == (metrics.Latency{}) {
		st.E2E = notMeasured
	}
	if st.MaxRecvRate == 0 {
		st.MaxRecvRate = metrics.NA
	}
	run := st
	run.MaxSendRate = metrics.NA // the run row is not what the cases are about
	if run.Acked > 0 {
		run.MaxSendRate = 1e9
	}
	for i := range pts {
		pts[i].Phase = "p"
	}
	return &Result{Format: FormatVersion, Runs: []Run{{Metrics: metrics.Snapshot{
		Order:     []string{"producer"},
		Workloads: map[string]metrics.Stats{"producer": run},
		Phases:    []metrics.Phase{{Name: "p", Start: 10, End: 10 + dur, Workloads: map[string]metrics.Stats{"producer": st}}},
		Series:    map[string][]metrics.Point{"producer": pts},
	}}}}
}

func TestFigureChecks(t *testing.T) {
	lat := metrics.Latency{Count: 300, Avg: 2, Min: 1, P50: 2, P90: 3, P95: 3, P99: 4, P999: 5, Max: 6}
	ok := metrics.Stats{Sent: 300, Acked: 300, BytesAcked: 30000, SendRate: 150, MaxSendRate: 200, Latency: lat}
	pt := func(t, iv float64, acked int64) metrics.Point {
		return metrics.Point{T: t, Interval: iv, Sent: acked, Acked: acked, BytesAcked: 100 * acked}
	}
	short := ok
	short.SendRate, short.MaxSendRate = 598.3, metrics.NA
	idle := metrics.Stats{Latency: notMeasured, MaxSendRate: metrics.NA}
	latN := func(n int64) metrics.Latency { l := lat; l.Count = n; return l }
	for _, c := range []struct {
		name string
		res  *Result
		want []string // details, in order
	}{
		{"holds", figuresRun(2, ok, pt(11, 1, 200), pt(12, 1, 100)), nil},
		{"short phase holds", figuresRun(0.5, short, pt(10.5, 0.5, 300)), nil},
		{"idle holds", figuresRun(3, idle, pt(11, 1, 0), pt(12, 1, 0), pt(13, 1, 0)), nil},
		// The quickstart's backlog phase: received 0, max msg/s 207,
		// latency avg 8.11 ms.
		{"latency and maximum without messages", figuresRun(3, metrics.Stats{Latency: metrics.Latency{Avg: 8.11, P99: 9}, MaxSendRate: 207},
			pt(11, 1, 0), pt(12, 1, 0), pt(13, 1, 0)),
			[]string{
				`producer, run: no message acked, yet a send latency (avg 8.11 ms, min 0 ms, p50 0 ms, p90 0 ms, p95 0 ms, p99 9 ms, p99.9 0 ms, max 0 ms)`,
				`producer, phase "p": no message acked, yet a send latency (avg 8.11 ms, min 0 ms, p50 0 ms, p90 0 ms, p95 0 ms, p99 9 ms, p99.9 0 ms, max 0 ms)`,
				`producer, phase "p": no message acked, yet a per-second send maximum of 207 msg/s`,
			}},
		// The 2.0 s cold read: 108,142 msg/s on average, a maximum of 57,729.
		{"maximum below the average", figuresRun(2, metrics.Stats{Sent: 216284, Acked: 216284, BytesAcked: 21628400, SendRate: 108142, MaxSendRate: 57729, Latency: latN(216284)},
			pt(11, 1, 57729), pt(12, 1, 158555)),
			[]string{`producer, phase "p" (2.000 s): per-second send maximum 57729 msg/s below the average 108142 msg/s`}},
		// 2,001 messages in 0.5 s: max msg/s 0.
		{"maximum in a short phase", figuresRun(0.5, metrics.Stats{Sent: 2001, Acked: 2001, BytesAcked: 200100, SendRate: 3884, MaxSendRate: 0, Latency: latN(2001)},
			pt(10.5, 0.5, 2001)),
			[]string{`producer, phase "p" (0.500 s): a per-second send maximum (0 msg/s) in a phase shorter than a second`}},
		{"no maximum in a long phase", figuresRun(2, metrics.Stats{Sent: 300, Acked: 300, BytesAcked: 30000, SendRate: 150, MaxSendRate: metrics.NA, Latency: lat},
			pt(11, 1, 200), pt(12, 1, 100)),
			[]string{`producer, phase "p" (2.000 s): 300 messages but no per-second send maximum`}},
		{"points short of the phase", figuresRun(2, ok, pt(11, 1, 200), pt(12, 1, 99)),
			[]string{`producer, phase "p": sent is 300, its per-second points add up to 299`,
				`producer, phase "p": acked is 300, its per-second points add up to 299`,
				`producer, phase "p": bytes_acked is 30000, its per-second points add up to 29900`}},
		{"a point across the phase's start", figuresRun(2, ok, pt(10.5, 1, 50), pt(11.5, 1, 150), pt(12, 0.5, 100)),
			[]string{`producer, phase "p": the point at 10.500 s begins at 9.500 s, before the phase (10.000 s)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, v := range c.res.Check().Violations {
				got = append(got, v.Detail)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
