package reporters_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/internal/browser"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/reporters/htmltest"
	"github.com/planrun/planrun/results"
)

// hostile is text a plan may put in a table: the page shows it as text.
const hostile = `</script><script>window.planrunErrors.push("injected")</script><b>bold</b>`

// longResult is a matrix of two runs of n seconds each, with a producer
// whose rate has one second's peak and trough, a consumer, an outage,
// connection events, asserts and a worker.
func longResult(n int) *results.Result {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	res := &results.Result{Plan: "long", File: "long.yaml", Title: `Long run <i>&</i> "quotes"`, Version: "test",
		Started: start, Finished: start.Add(time.Duration(2*n) * time.Second), Status: results.AssertFail,
		Units: "rates in messages/s", Format: results.FormatVersion,
		Environment: results.Environment{Host: "bench-1", OS: "linux", Arch: "amd64", CPUs: 8, GoVersion: "go1.26"},
		Tables: []results.Table{{Title: "Plan table", Columns: []string{"phase", "acked", "note"},
			Rows: [][]string{{"warm", "123", hostile}, {"steady", "456", "fine"}}}},
	}
	for r, label := range []string{"size=1KB", "size=4KB"} {
		half := float64(n / 2)
		stats := func(acked int64, p99 float64) metrics.Stats {
			return metrics.Stats{Acked: acked, Sent: acked, Received: acked, Distinct: acked, SendRate: float64(acked) / half,
				RecvRate: float64(acked) / half, Latency: metrics.Latency{Count: acked, P50: p99 / 2, P99: p99, Max: 2 * p99},
				E2E: metrics.Latency{Count: acked, P99: p99 + 1}}
		}
		run := results.Run{Index: r, Label: label, Status: results.Passed, Started: start, Finished: start.Add(time.Duration(n) * time.Second),
			Roles: map[string]metrics.Role{"producer": {Sends: true}, "consumer": {Receives: true}},
			Asserts: []results.Assert{{Expr: "producer.failed == 0", Passed: true},
				{Expr: "producer.latency.p99 < 5", Passed: false, Message: "too slow", Detail: "producer.latency.p99 = 7.25"}},
			Workers: []results.Worker{{Index: 1, Addr: "127.0.0.1:7000", Host: "w1", Workloads: []string{"producer"}, OffsetMs: 0.5, RTTMs: 0.1}},
		}
		if r == 1 {
			run.Status = results.AssertFail
		}
		m := &run.Metrics
		m.Order = []string{"producer", "consumer"}
		m.Elapsed = float64(n)
		m.Phases = []metrics.Phase{
			{Name: "warm", Start: 0, End: half, Workloads: map[string]metrics.Stats{"producer": stats(int64(1000*half)+int64(r), 3.25), "consumer": stats(int64(1000*half), 4)}},
			{Name: "steady", Start: half, End: float64(n), Workloads: map[string]metrics.Stats{"producer": stats(int64(2000*half), 7.25), "consumer": stats(int64(2000*half), 8)}},
		}
		m.Workloads = map[string]metrics.Stats{"producer": stats(int64(3000*half), 7.25), "consumer": stats(int64(3000*half), 8)}
		m.Outages = []metrics.Outage{{Workload: "producer", Phase: "steady", Start: half + 10, End: half + 40, Ended: true, Clients: 2, Of: 4, Reason: "EOF"}}
		m.Events = []metrics.EventCount{{T: half + 10, Workload: "producer", Event: metrics.EventDisconnected, Count: 2, Of: 4},
			{T: half + 40, Workload: "producer", Event: metrics.EventReconnected, Count: 2, Of: 4}}
		m.Series = map[string][]metrics.Point{}
		for i := range n {
			t := float64(i + 1)
			rate := 1000 + 100*math.Sin(t/30)
			switch i {
			case n/3 + r:
				rate = 25000 // a one-second peak
			case 2*n/3 + r:
				rate = 1 // a one-second trough
			}
			p99 := 3 + math.Mod(t, 5)
			if i%11 == 0 {
				p99 = 0 // a second without messages: a gap
			}
			m.Series["producer"] = append(m.Series["producer"], metrics.Point{T: t, SendRate: rate, P99: p99})
			m.Series["consumer"] = append(m.Series["consumer"], metrics.Point{T: t, RecvRate: rate - 1, E2EP99: p99 + 1,
				Backlog: metrics.Backlog{Messages: int64(i % 997)}})
			extra := map[string]float64{"host.cpu": float64(i%100) / 100}
			if i >= n/2 {
				extra["broker.connections"] = float64(i % 50)
			}
			m.ExtraSeries = append(m.ExtraSeries, metrics.ExtraPoint{T: t, Values: extra})
		}
		res.Runs = append(res.Runs, run)
	}
	return res
}

func writeReport(t *testing.T, res *results.Result, opts reporters.HTMLOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := reporters.WriteHTML(&b, res, opts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The page in headless Chromium: every chart drawn with its curves, each
// curve downsampled to the bound with its peak and trough kept, the
// tables' figures as the result has them, no script error.
func TestHTMLReportInBrowser(t *testing.T) {
	browser.Chromium(t)
	const n = 7200 // two hours of seconds per run
	res := longResult(n)
	path := writeReport(t, res, reporters.HTMLOptions{})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`src="`, `src='`, "<link", "url(", "@import", "fetch("} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the page refers to %q: it must open from disk with no network", s)
		}
	}
	page := htmltest.Open(t, "file://"+path, browser.Options{})
	page.NoErrors(t)
	if page.Renders != 1 || page.Status != results.AssertFail || page.Live != nil {
		t.Errorf("renders %d, status %q, live panel %v", page.Renders, page.Status, page.Live)
	}
	if !strings.Contains(page.DOM, "<title>Long run &lt;i&gt;&amp;&lt;/i&gt; \"quotes\" - planrun report</title>") {
		t.Errorf("the title is not escaped as text:\n%s", page.DOM[:min(len(page.DOM), 600)])
	}
	if len(page.Charts) != 8 {
		t.Fatalf("%d charts, want 4 per run", len(page.Charts))
	}
	for r := range res.Runs {
		raw := res.Runs[r].Metrics.Series["producer"]
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range raw {
			lo, hi = min(lo, p.SendRate), max(hi, p.SendRate)
		}
		for _, want := range []struct {
			title  string
			labels []string
		}{
			{"Message rates", []string{"producer sent", "consumer received"}},
			{"Backlog", []string{"consumer"}},
			{"p99 latency", []string{"producer p99 to ack", "consumer p99 end to end"}},
			{"Collected figures", []string{"host.cpu", "broker.connections"}},
		} {
			c := page.Chart(t, r, want.title)
			if len(c.Series) != len(want.labels) {
				t.Fatalf("run %d %s: %d curves, want %v", r, c.Title, len(c.Series), want.labels)
			}
			if c.Samples != n || c.Points > reporters.MaxChartPoints || c.Points < reporters.MaxChartPoints*9/10 {
				t.Errorf("run %d %s: %d points from %d samples; want at most %d and nearly that many", r, c.Title, c.Points, c.Samples, reporters.MaxChartPoints)
			}
			for i, s := range c.Series {
				if s.Label != want.labels[i] || s.Length != c.Points || s.Points == 0 {
					t.Errorf("run %d %s: curve %d is %+v, want %q with values", r, c.Title, i, s, want.labels[i])
				}
			}
		}
		rates := page.Chart(t, r, "Message rates").Series[0]
		if *rates.Min != lo || *rates.Max != hi {
			t.Errorf("run %d: the rate curve shows %v..%v msg/s, the samples %v..%v", r, *rates.Min, *rates.Max, lo, hi)
		}
		if lat := page.Chart(t, r, "p99 latency").Series[0]; lat.Points >= lat.Length && *lat.Min == 0 {
			t.Errorf("run %d: seconds without messages are drawn as 0 ms: %+v", r, lat)
		}
		prod := page.Table(t, r, "Produce")
		for _, ph := range res.Runs[r].Metrics.Phases {
			s := ph.Workloads["producer"]
			if got, want := prod.Cell(t, "acked", ph.Name, "producer"), reporters.I(s.Acked); got != want {
				t.Errorf("run %d phase %s: acked %s, the result %s", r, ph.Name, got, want)
			}
			if got, want := prod.Cell(t, "p99", ph.Name, "producer"), reporters.F(s.Latency.P99, 2); got != want {
				t.Errorf("run %d phase %s: p99 %s, the result %s", r, ph.Name, got, want)
			}
		}
		if got := page.Table(t, r, "Outages").Cell(t, "clients down", "steady", "producer"); got != "2 of 4" {
			t.Errorf("run %d: outage shows %q clients down", r, got)
		}
		if got := page.Table(t, r, "Workers").Cell(t, "host", "1"); got != "w1" {
			t.Errorf("run %d: worker host %q", r, got)
		}
		if !strings.Contains(page.DOM, "producer.latency.p99 = 7.25") {
			t.Errorf("the failed assert's detail is not shown")
		}
	}
	runs := page.Table(t, -1, "Runs")
	if got := runs.Cell(t, "messages", "size=4KB", results.AssertFail, "producer"); got != reporters.I(res.Runs[1].Metrics.Workloads["producer"].Acked) {
		t.Errorf("Runs table: %s messages", got)
	}
	if got := page.Table(t, -1, "Plan table").Cell(t, "note", "warm"); got != hostile {
		t.Errorf("a table cell shows %q, want the text %q", got, hostile)
	}
	if env := page.Table(t, -1, "Environment").Cell(t, "", "host"); env != "bench-1" {
		t.Errorf("environment host %q", env)
	}
}

// A live page renders every model the stream sends, the progress lines in
// a panel, and stops listening once a model says the run is done.
func TestHTMLLivePage(t *testing.T) {
	browser.Chromium(t)
	first := longResult(60)
	final := longResult(120)
	models := []*reporters.HTMLModel{reporters.NewHTMLModel(first, 0), reporters.NewHTMLModel(final, 0)}
	models[0].Live = &reporters.HTMLLive{Progress: []string{"[00:01:00] step 2 (wait, line 9): consumer.backlog.messages 1200 -> 0"}}
	models[1].Live = &reporters.HTMLLive{Progress: []string{"[00:02:00] run finished"}, Done: true}
	streams := make(chan int, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		streams <- 1
		w.Header().Set("Content-Type", "text/event-stream")
		for _, m := range models {
			b, err := json.Marshal(m)
			if err != nil {
				t.Error(err)
				return
			}
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		err := reporters.WriteHTML(w, first, reporters.HTMLOptions{LiveURL: "/events", Live: &reporters.HTMLLive{Progress: []string{"starting"}}})
		if err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// Opened zoomed (a link to a zoomed page), it stays zoomed through
	// the updates.
	page := htmltest.Open(t, srv.URL+"/#t=10-30", browser.Options{})
	page.NoErrors(t)
	if page.Renders != 3 {
		t.Fatalf("%d renders, want the page's and one per event (3)", page.Renders)
	}
	if page.Live == nil || *page.Live != "[00:02:00] run finished" {
		t.Errorf("the live panel shows %v", page.Live)
	}
	if c := page.Chart(t, 0, "Message rates"); c.Samples != 120 || c.Points != 120 {
		t.Errorf("the charts are not the last model's: %+v", c)
	}
	for _, c := range page.Charts {
		if c.X != [2]float64{10, 30} {
			t.Errorf("run %d %s shows %v s after the updates, not the range zoomed to (10-30 s)", c.Run, c.Title, c.X)
		}
	}
	if len(streams) != 1 {
		t.Errorf("the page opened the event stream %d times; it must stop once the run is done", len(streams))
	}
}

// The page without a browser: every script element closes where it should
// (no text of the result can end one), and a result without series has
// tables and no charts.
func TestHTMLPageStructure(t *testing.T) {
	res := longResult(30)
	var b bytes.Buffer
	if err := reporters.WriteHTML(&b, res, reporters.HTMLOptions{LiveURL: "/events?x=</script>"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if open, closed := strings.Count(page, "<script"), strings.Count(page, "</script>"); open != 4 || closed != 4 {
		t.Errorf("%d <script> and %d </script>, want the 4 the page has", open, closed)
	}
	if strings.Contains(page, hostile) {
		t.Error("a table cell's text is in the page as it is, not escaped")
	}
	for i := range res.Runs { // report: series: false
		res.Runs[i].Metrics.Series = nil
		res.Runs[i].Metrics.ExtraSeries = nil
	}
	m := reporters.NewHTMLModel(res, 0)
	if len(m.Runs) != 2 || len(m.Runs[0].Charts) != 0 || len(m.Runs[0].Tables) == 0 || m.MaxPoints != reporters.MaxChartPoints {
		t.Errorf("without series: %d runs, %d charts, %d tables, bound %d", len(m.Runs), len(m.Runs[0].Charts), len(m.Runs[0].Tables), m.MaxPoints)
	}
	if res.Runs[0].Metrics.Series != nil || m.Result.Runs[0].Metrics.Series != nil {
		t.Error("series left in the model's result")
	}
}

// The model of a run leaves the result it was made from as it was: the
// JSON result keeps every second.
func TestHTMLModelKeepsResult(t *testing.T) {
	res := longResult(3000)
	before, _ := json.Marshal(res)
	m := reporters.NewHTMLModel(res, 100)
	after, _ := json.Marshal(res)
	if !bytes.Equal(before, after) {
		t.Error("NewHTMLModel changed the result")
	}
	if len(m.Result.Runs[0].Metrics.Series) != 0 || len(m.Runs[0].Charts[0].T) > 100 {
		t.Errorf("the model holds %d series and %d points a curve", len(m.Result.Runs[0].Metrics.Series), len(m.Runs[0].Charts[0].T))
	}
}

// A day of per-second samples in each of two runs: the time to write the
// page and its size.
func BenchmarkWriteHTMLDay(b *testing.B) {
	res := longResult(86400)
	var size int
	for b.Loop() {
		var w bytes.Buffer
		if err := reporters.WriteHTML(&w, res, reporters.HTMLOptions{}); err != nil {
			b.Fatal(err)
		}
		size = w.Len()
	}
	b.ReportMetric(float64(size)/1e6, "MB/page")
}
