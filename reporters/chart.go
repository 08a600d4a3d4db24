package reporters

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

func init() {
	Register("chart", Chart{})
}

// Chart draws each run's per-second series as a PNG: message rates,
// backlog and p99 latency in stacked panels sharing the time axis, with
// the phases marked.
type Chart struct{}

// Chart image size: wide enough for a long run, a panel tall enough to read.
const (
	chartWidth       = 11 * vg.Inch
	chartPanelHeight = 3 * vg.Inch
	chartDPI         = 96
)

// ChartFiles lists the images the chart reporter writes for res, in run
// order: base.png for a single run, base-run1.png, base-run2.png... when
// there are several; runs without series get none.
func ChartFiles(res *results.Result, base string) []string {
	var files []string
	for i := range res.Runs {
		if !hasSeries(&res.Runs[i]) {
			continue
		}
		files = append(files, chartFile(res, base, i))
	}
	return files
}

func chartFile(res *results.Result, base string, i int) string {
	if len(res.Runs) == 1 {
		return base + ".png"
	}
	return fmt.Sprintf("%s-run%d.png", base, i+1)
}

func hasSeries(run *results.Run) bool {
	for _, pts := range run.Metrics.Series {
		if len(pts) > 0 {
			return true
		}
	}
	return false
}

// Write draws every run that has series and returns the first image's path.
func (Chart) Write(res *results.Result, base string) (string, error) {
	first := ""
	for i := range res.Runs {
		run := &res.Runs[i]
		if !hasSeries(run) {
			continue
		}
		path := chartFile(res, base, i)
		if err := writeChart(path, chartTitle(res, run), run); err != nil {
			return path, err
		}
		if first == "" {
			first = path
		}
	}
	if first == "" {
		return "", errors.New("no per-second series to draw (report: series: false leaves them out)")
	}
	return first, nil
}

func chartTitle(res *results.Result, run *results.Run) string {
	title := res.Title
	if title == "" {
		title = res.Plan
	}
	if run.Label != "" {
		title += " - " + run.Label
	}
	return title
}

func writeChart(path, title string, run *results.Run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := ChartPNG(f, title, run); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ChartPNG draws one run's chart as a PNG image.
func ChartPNG(w io.Writer, title string, run *results.Run) error {
	panels, err := chartPanels(run)
	if err != nil {
		return err
	}
	if len(panels) == 0 {
		return errors.New("no per-second series to draw")
	}
	panels[0].Title.Text = title
	end := run.Metrics.Elapsed
	for _, pts := range run.Metrics.Series {
		if len(pts) > 0 {
			end = max(end, pts[len(pts)-1].T)
		}
	}
	for i, p := range panels {
		p.X.Min, p.X.Max = 0, max(end, 1)
		p.Add(phaseMarks{phases: run.Metrics.Phases, labels: i == 0})
		p.Add(eventMarks{outages: run.Metrics.Outages, events: run.Metrics.Events, labels: i == 0})
		if i == len(panels)-1 {
			p.X.Label.Text = "seconds since the start"
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(chartWidth, chartPanelHeight*vg.Length(len(panels))), vgimg.UseDPI(chartDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(10)}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// line is one curve of a panel.
type line struct {
	name string
	// workload is the workload whose series it draws.
	workload string
	pts      []metrics.Point
	value    func(metrics.Point) float64
	dashed   bool
	// gaps leaves out zero values: a second without messages has no
	// latency, and drawing it as 0 ms would look like a fast second.
	gaps bool
}

func chartPanels(run *results.Run) ([]*plot.Plot, error) {
	var panels []*plot.Plot
	for _, spec := range chartSpecs(run) {
		if len(spec.lines) == 0 {
			continue
		}
		p, err := panel(spec.ylabel, spec.lines)
		if err != nil {
			return nil, err
		}
		panels = append(panels, p)
	}
	return panels, nil
}

// chartSpec is one panel of a run's chart: what its y axis counts and its
// curves, one or two per workload.
type chartSpec struct {
	ylabel string
	lines  []line
}

// chartSpecs are the panels of a run's chart, the PNG's and the HTML
// report's: message rates, backlog and p99 latency; a panel without curves
// is left empty.
func chartSpecs(run *results.Run) []chartSpec {
	var rates, backlog, latency []line
	for _, n := range seriesOrder(run) {
		pts := run.Metrics.Series[n]
		role := run.Role(n)
		if role.Sends {
			rates = append(rates, line{workload: n, name: n + " sent", pts: pts, value: func(p metrics.Point) float64 { return p.SendRate }})
			latency = append(latency, line{workload: n, name: n + " p99 to ack", pts: pts, value: func(p metrics.Point) float64 { return p.P99 }, gaps: true})
		}
		if role.Receives {
			rates = append(rates, line{workload: n, name: n + " received", pts: pts, value: func(p metrics.Point) float64 { return p.RecvRate }, dashed: role.Relays()})
			backlog = append(backlog, line{workload: n, name: n, pts: pts, value: func(p metrics.Point) float64 { return float64(p.Backlog.Messages) }})
			latency = append(latency, line{workload: n, name: n + " p99 end to end", pts: pts, value: func(p metrics.Point) float64 { return p.E2EP99 }, gaps: true, dashed: role.Relays()})
		}
	}
	return []chartSpec{{"messages/s", rates}, {"backlog (messages)", backlog}, {"p99 latency (ms)", latency}}
}

func panel(ylabel string, lines []line) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(6)
	top := 0.0
	for i, l := range lines {
		var segments []plotter.XYs
		var cur plotter.XYs
		for _, pt := range l.pts {
			v := l.value(pt)
			if l.gaps && v == 0 {
				if len(cur) > 0 {
					segments = append(segments, cur)
					cur = nil
				}
				continue
			}
			cur = append(cur, plotter.XY{X: pt.T, Y: v})
			top = max(top, v)
		}
		if len(cur) > 0 {
			segments = append(segments, cur)
		}
		style := draw.LineStyle{Color: plotutil.Color(i), Width: vg.Points(1.5)}
		if l.dashed {
			style.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		for k, seg := range segments {
			if len(seg) == 1 {
				// A lone second still shows, as a short tick.
				seg = append(seg, plotter.XY{X: seg[0].X + 0.2, Y: seg[0].Y})
			}
			pl, err := plotter.NewLine(seg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
			pl.LineStyle = style
			p.Add(pl)
			if k == 0 {
				p.Legend.Add(l.name, pl)
			}
		}
		if len(segments) == 0 {
			// Keep the legend honest about a curve that never rose above 0.
			p.Legend.Add(l.name+" (none)", legendSwatch(style))
		}
	}
	// Headroom above the highest curve keeps it clear of the legend: each
	// entry takes about 7% of a panel's height.
	p.Y.Max = max(top, 1) / (1 - min(0.6, 0.07*float64(len(lines))+0.04))
	return p, nil
}

func legendSwatch(style draw.LineStyle) plot.Thumbnailer {
	l := &plotter.Line{LineStyle: style}
	return l
}

// phaseMarks draws a dashed vertical line where each named phase starts,
// with its name along the top when labels is set.
type phaseMarks struct {
	phases []metrics.Phase
	labels bool
}

func (m phaseMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	style := draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	label := p.X.Tick.Label
	label.Font.Size = vg.Points(9)
	label.Color = color.Gray{Y: 60}
	label.XAlign, label.YAlign = text.XLeft, text.YTop
	for _, ph := range m.phases {
		if ph.Name == "" || ph.Start < p.X.Min || ph.Start > p.X.Max {
			continue
		}
		x := trX(ph.Start)
		if ph.Start > p.X.Min {
			c.StrokeLine2(style, x, c.Min.Y, x, c.Max.Y)
		}
		if m.labels {
			c.FillText(label, vg.Point{X: x + vg.Points(3), Y: c.Max.Y - vg.Points(2)}, ph.Name)
		}
	}
}

// eventMarks shades each outage (connections down) across the panel and
// ticks every second with connection events along its bottom edge; with
// labels set, the first outage of each workload is named.
type eventMarks struct {
	outages []metrics.Outage
	events  []metrics.EventCount
	labels  bool
}

var (
	outageFill = color.NRGBA{R: 220, G: 40, B: 40, A: 40}
	eventTick  = color.NRGBA{R: 200, G: 30, B: 30, A: 255}
)

func (m eventMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	clip := func(x float64) float64 { return min(max(x, p.X.Min), p.X.Max) }
	label := p.X.Tick.Label
	label.Font.Size = vg.Points(9)
	label.Color = eventTick
	label.XAlign, label.YAlign = text.XLeft, text.YBottom
	named := map[string]bool{}
	for _, o := range m.outages {
		a, b := trX(clip(o.Start)), trX(clip(o.End))
		if b-a < vg.Points(2) {
			b = a + vg.Points(2)
		}
		c.FillPolygon(outageFill, []vg.Point{{X: a, Y: c.Min.Y}, {X: b, Y: c.Min.Y}, {X: b, Y: c.Max.Y}, {X: a, Y: c.Max.Y}})
		if m.labels && !named[o.Workload] {
			named[o.Workload] = true
			c.FillText(label, vg.Point{X: a + vg.Points(3), Y: c.Min.Y + vg.Points(3)}, fmt.Sprintf("%s: %d down", o.Workload, o.Clients))
		}
	}
	tick := draw.LineStyle{Color: eventTick, Width: vg.Points(2)}
	for _, e := range m.events {
		if e.T < p.X.Min || e.T > p.X.Max {
			continue
		}
		x := trX(e.T + 0.5) // the middle of the second it counts
		c.StrokeLine2(tick, x, c.Min.Y, x, c.Min.Y+vg.Points(6))
	}
}
