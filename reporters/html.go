package reporters

import (
	"bufio"
	_ "embed" // the page's scripts and styles
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"sort"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// The HTML report's page: uPlot (vendored, see html/vendor/README.md;
// html/vendor/update.sh fetches another version with npm) and
// the page's own script and style, all inlined so that the file opens from
// disk with no network.
var (
	//go:embed html/vendor/uPlot.iife.min.js
	uPlotJS string
	//go:embed html/vendor/uPlot.min.css
	uPlotCSS string
	//go:embed html/report.js
	reportJS string
	//go:embed html/report.css
	reportCSS string
)

// HTML writes base.html, the report to open in a browser: the markdown's
// tables and the per-second series as charts to zoom and hover. It is
// written at the end of every run, beside the markdown.
type HTML struct{}

// Write renders res to base.html.
func (HTML) Write(res *results.Result, base string) (string, error) {
	path := base + ".html"
	f, err := os.Create(path)
	if err != nil {
		return path, err
	}
	if err := WriteHTML(f, res, HTMLOptions{}); err != nil {
		f.Close()
		return path, err
	}
	return path, f.Close()
}

// HTMLOptions change what WriteHTML writes.
type HTMLOptions struct {
	// LiveURL, when set, makes the page follow a run: it opens an
	// EventSource on it, and every message's data is a whole HTMLModel
	// (as JSON) that replaces the one shown, keeping the charts' zoom.
	LiveURL string
	// MaxPoints bounds the points of each curve (MaxChartPoints when 0).
	MaxPoints int
	// Live is shown as a progress panel (a live page's first model).
	Live *HTMLLive
}

// HTMLModel is everything the page shows, embedded in it as JSON
// (<script type="application/json" id="planrun-data">) and sent whole by
// a live page: the result as saved, without its per-second series, which
// come downsampled in Runs; and the tables as the markdown shows them.
type HTMLModel struct {
	Result *results.Result `json:"result"`
	// Tables are the plan's own tables, then the matrix's Runs table.
	Tables []HTMLTable `json:"tables,omitempty"`
	// Violations are the invariants the figures break, as the markdown
	// words them.
	Violations []string `json:"violations,omitempty"`
	// Runs match Result.Runs one for one.
	Runs      []HTMLRun `json:"runs"`
	MaxPoints int       `json:"max_points"`
	Live      *HTMLLive `json:"live,omitempty"`
}

// HTMLLive is the progress of a run still going, shown in a panel.
type HTMLLive struct {
	// Progress are the lines planrun prints while it runs (each wait's
	// distance to its target among them).
	Progress []string `json:"progress"`
	// Done is set once the run ended and the model is its final report.
	Done bool `json:"done"`
}

// HTMLTable is a table as the markdown lays it out, with the columns
// holding numbers marked (they are right-aligned).
type HTMLTable struct {
	Title   string     `json:"title"`
	Header  []string   `json:"header"`
	Rows    [][]string `json:"rows"`
	Numeric []bool     `json:"numeric"`
}

// HTMLRun is one run's tables and charts.
type HTMLRun struct {
	Tables []HTMLTable `json:"tables,omitempty"`
	Charts []HTMLChart `json:"charts,omitempty"`
}

// HTMLChart is one chart: curves sharing a time axis, downsampled to at
// most MaxPoints points each.
type HTMLChart struct {
	Title string `json:"title"`
	Unit  string `json:"unit"`
	// T is the time axis, seconds since the run's start.
	T      Column       `json:"t"`
	Series []HTMLSeries `json:"series"`
	// Samples is how many per-second samples the longest curve had before
	// downsampling.
	Samples int `json:"samples"`
}

// HTMLSeries is one curve of a chart.
type HTMLSeries struct {
	Label    string `json:"label"`
	Workload string `json:"workload,omitempty"`
	Dashed   bool   `json:"dashed,omitempty"`
	Values   Column `json:"values"`
}

// NewHTMLModel makes the page's model of res, with every curve
// downsampled to at most maxPoints points (MaxChartPoints when 0).
func NewHTMLModel(res *results.Result, maxPoints int) *HTMLModel {
	if maxPoints <= 0 {
		maxPoints = MaxChartPoints
	}
	saved := *res
	saved.Runs = make([]results.Run, len(res.Runs))
	m := &HTMLModel{Result: &saved, MaxPoints: maxPoints, Runs: make([]HTMLRun, len(res.Runs))}
	for _, v := range res.Violations {
		m.Violations = append(m.Violations, v.String())
	}
	for _, t := range res.Tables {
		header, rows := t.Columns, t.Rows
		if t.Transpose {
			header, rows = Transpose(header, rows)
		}
		m.Tables = append(m.Tables, htmlTable(t.Title, header, rows))
	}
	if len(res.Runs) > 1 {
		header, rows := RunsTable(res)
		m.Tables = append(m.Tables, htmlTable("Runs", header, rows))
	}
	for i := range res.Runs {
		run := &res.Runs[i]
		hr := &m.Runs[i]
		for _, sec := range runSections {
			if header, rows := sec.table(run); len(rows) > 0 {
				hr.Tables = append(hr.Tables, htmlTable(sec.intro, header, rows))
			}
		}
		hr.Charts = htmlCharts(run, maxPoints)
		saved.Runs[i] = *run
		saved.Runs[i].Metrics.Series = nil
		saved.Runs[i].Metrics.ExtraSeries = nil
	}
	return m
}

func htmlTable(title string, header []string, rows [][]string) HTMLTable {
	if rows == nil {
		rows = [][]string{}
	}
	return HTMLTable{Title: title, Header: header, Rows: rows, Numeric: numericColumns(header, rows)}
}

// htmlCharts are the PNG chart's panels (rates, backlog, p99 latency)
// and the collected figures, each curve downsampled.
func htmlCharts(run *results.Run, maxPoints int) []HTMLChart {
	var charts []HTMLChart
	units := map[string]string{"messages/s": "msg/s", "backlog (messages)": "messages", "p99 latency (ms)": "ms"}
	titles := map[string]string{"messages/s": "Message rates", "backlog (messages)": "Backlog", "p99 latency (ms)": "p99 latency"}
	for _, spec := range chartSpecs(run) {
		if len(spec.lines) == 0 {
			continue
		}
		var curves []Curve
		var series []HTMLSeries
		samples := 0
		for _, l := range spec.lines {
			c := Curve{T: make([]float64, len(l.pts)), V: make([]float64, len(l.pts))}
			for i, p := range l.pts {
				v := l.value(p)
				if l.gaps && v == 0 {
					v = math.NaN()
				}
				c.T[i], c.V[i] = p.T, v
			}
			samples = max(samples, len(l.pts))
			curves = append(curves, c)
			series = append(series, HTMLSeries{Label: l.name, Workload: l.workload, Dashed: l.dashed})
		}
		charts = append(charts, alignedChart(titles[spec.ylabel], units[spec.ylabel], curves, series, samples, maxPoints))
	}
	if names := extraNames(run.Metrics.ExtraSeries); len(names) > 0 {
		curves := make([]Curve, len(names))
		series := make([]HTMLSeries, len(names))
		for k, n := range names {
			series[k].Label = n
			for _, p := range run.Metrics.ExtraSeries {
				if v, ok := p.Values[n]; ok {
					curves[k].T = append(curves[k].T, p.T)
					curves[k].V = append(curves[k].V, v)
				}
			}
		}
		charts = append(charts, alignedChart("Collected figures", "", curves, series, len(run.Metrics.ExtraSeries), maxPoints))
	}
	return charts
}

func alignedChart(title, unit string, curves []Curve, series []HTMLSeries, samples, maxPoints int) HTMLChart {
	t, cols := Downsample(curves, maxPoints)
	for k := range series {
		series[k].Values = cols[k]
	}
	return HTMLChart{Title: title, Unit: unit, T: t, Series: series, Samples: samples}
}

// extraNames lists the collected figures' names in order of appearance.
func extraNames(pts []metrics.ExtraPoint) []string {
	seen := map[string]bool{}
	var names []string
	for _, p := range pts {
		var fresh []string
		for n := range p.Values {
			if !seen[n] {
				seen[n] = true
				fresh = append(fresh, n)
			}
		}
		sort.Strings(fresh)
		names = append(names, fresh...)
	}
	return names
}

// WriteHTML writes the HTML report of res: one page holding its scripts,
// styles and data (see HTMLModel), whose script draws everything from
// the model with one entry point, render(model).
func WriteHTML(w io.Writer, res *results.Result, opts HTMLOptions) error {
	m := NewHTMLModel(res, opts.MaxPoints)
	m.Live = opts.Live
	// encoding/json writes <, > and & as \u escapes: nothing in the data
	// can close its script element.
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("html report: encoding its data: %w", err)
	}
	live, _ := json.Marshal(opts.LiveURL)
	title := res.Title
	if title == "" {
		title = res.Plan
	}
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(b, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(b, "<meta name=\"generator\" content=\"planrun %s\">\n", html.EscapeString(res.Version))
	fmt.Fprintf(b, "<title>%s - planrun report</title>\n", html.EscapeString(title))
	// Script errors are kept from the first moment, for the page's own
	// check (see report.js).
	fmt.Fprintf(b, "<script>window.planrunErrors=[];window.addEventListener('error',function(e){window.planrunErrors.push(String(e.message||e.type))});</script>\n")
	fmt.Fprintf(b, "<style>\n%s\n</style>\n<style>\n%s\n</style>\n</head>\n<body>\n", uPlotCSS, reportCSS)
	fmt.Fprintf(b, "<main id=\"planrun-report\"><noscript>This report draws its tables and charts with JavaScript; the markdown report beside it has the tables.</noscript></main>\n")
	fmt.Fprintf(b, "<script type=\"application/json\" id=\"planrun-data\">%s</script>\n", data)
	fmt.Fprintf(b, "<script>\n%s\n</script>\n", uPlotJS)
	fmt.Fprintf(b, "<script>\nwindow.planrunLiveURL = %s;\n%s\n</script>\n</body>\n</html>\n", live, reportJS)
	return b.Flush()
}
