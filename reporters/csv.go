package reporters

import (
	"encoding/csv"
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

func init() {
	Register("csv", CSV{})
}

// CSV writes the per-second series for spreadsheets and plotting tools:
// base.csv has a row per second and workload, base-extra.csv (only when
// collectors ran) a row per second with a column per collected figure.
type CSV struct{}

// seriesColumns are base.csv's fixed columns; workload gauges follow as
// gauge.<name>.
var seriesColumns = []string{"run", "label", "t", "phase", "workload", "kind", "send_rate", "recv_rate", "send_mbps", "recv_mbps",
	"send_p99_ms", "e2e_p99_ms", "backlog_messages", "backlog_bytes", "lag",
	"interval_s", "sent", "acked", "failed", "received", "bytes_acked", "bytes_received"}

// Write writes base.csv and, with collected figures, base-extra.csv; it
// returns base.csv's path.
func (CSV) Write(res *results.Result, base string) (string, error) {
	path := base + ".csv"
	if err := writeCSV(path, seriesRows(res)); err != nil {
		return path, err
	}
	if rows := extraRows(res); rows != nil {
		if err := writeCSV(base+"-extra.csv", rows); err != nil {
			return path, err
		}
	}
	return path, nil
}

// CSVFiles lists the files the csv reporter writes for res.
func CSVFiles(res *results.Result, base string) []string {
	files := []string{base + ".csv"}
	if extraRows(res) != nil {
		files = append(files, base+"-extra.csv")
	}
	return files
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// runNumber names a run in files: its 1-based position.
func runNumber(i int) string { return strconv.Itoa(i + 1) }

func seriesRows(res *results.Result) [][]string {
	gauges := map[string]bool{}
	for _, run := range res.Runs {
		for _, pts := range run.Metrics.Series {
			for _, p := range pts {
				for g := range p.Gauges {
					gauges[g] = true
				}
			}
		}
	}
	gaugeNames := sortedKeys(gauges)
	header := append([]string(nil), seriesColumns...)
	for _, g := range gaugeNames {
		header = append(header, "gauge."+g)
	}
	rows := [][]string{header}
	for i, run := range res.Runs {
		names := seriesOrder(&run)
		longest := 0
		for _, n := range names {
			longest = max(longest, len(run.Metrics.Series[n]))
		}
		// Samples are taken for every workload at once, so the i-th points
		// share a time: rows go by time, then by workload.
		for k := 0; k < longest; k++ {
			for _, n := range names {
				pts := run.Metrics.Series[n]
				if k >= len(pts) {
					continue
				}
				p := pts[k]
				lag := ""
				if p.Lag >= 0 {
					lag = I(p.Lag)
				}
				row := []string{runNumber(i), run.Label, F(p.T, 3), p.Phase, n, run.Kinds[n],
					F(p.SendRate, 2), F(p.RecvRate, 2), F(p.SendMBps, 4), F(p.RecvMBps, 4),
					F(p.P99, 3), F(p.E2EP99, 3), I(p.Backlog.Messages), I(p.Backlog.Bytes), lag,
					F(p.Interval, 3), I(p.Sent), I(p.Acked), I(p.Failed), I(p.Received), I(p.BytesAcked), I(p.BytesReceived)}
				for _, g := range gaugeNames {
					v, ok := p.Gauges[g]
					row = append(row, cell(v, ok))
				}
				rows = append(rows, row)
			}
		}
	}
	return rows
}

// seriesOrder is the run's workload order, then any other workload that
// has a series, sorted.
func seriesOrder(run *results.Run) []string {
	seen := map[string]bool{}
	var names []string
	for _, n := range run.Metrics.Order {
		if _, ok := run.Metrics.Series[n]; ok && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	var rest []string
	for n := range run.Metrics.Series {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// extraRows is base-extra.csv, or nil when no run collected figures.
func extraRows(res *results.Result) [][]string {
	figs := map[string]bool{}
	for _, run := range res.Runs {
		for _, p := range run.Metrics.ExtraSeries {
			for k := range p.Values {
				figs[k] = true
			}
		}
	}
	if len(figs) == 0 {
		return nil
	}
	names := sortedKeys(figs)
	header := append([]string{"run", "label", "t", "phase"}, names...)
	rows := [][]string{header}
	for i, run := range res.Runs {
		for _, p := range run.Metrics.ExtraSeries {
			row := []string{runNumber(i), run.Label, F(p.T, 3), phaseAt(run.Metrics.Phases, p.T)}
			for _, n := range names {
				v, ok := p.Values[n]
				row = append(row, cell(v, ok))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// phaseAt names the phase a time falls in. The extra series has no phase
// of its own; a sample at a boundary belongs to the phase it closes, as
// workload samples do.
func phaseAt(phases []metrics.Phase, t float64) string {
	for _, ph := range phases {
		if t > ph.Start && t <= ph.End {
			return ph.Name
		}
	}
	return ""
}

// cell formats a figure, leaving missing ones empty. Figures span many
// magnitudes (% CPU, bytes), so they keep every digit that matters.
func cell(v float64, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 10, 64)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
