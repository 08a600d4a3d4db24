package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/internal/browser"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/reporters/htmltest"
	"github.com/planrun/planrun/results"
)

// A real run writes reports/<plan>.html beside the markdown, and planrun
// report writes it again from the saved result and from the series file:
// in headless Chromium every page shows the run's figures as its JSON
// has them, and a chart per kind of series with a curve per workload and
// a point per second.
func TestHTMLReportOfARun(t *testing.T) {
	browser.Chromium(t)
	p := writePlan(t, `name: html-report
targets:
  mq: { driver: memory }
workloads:
  producer:
    produce: { topic: a, size: 100B, rate: 2000 }
  consumer:
    consume: { topic: a }
progress: 0s
steps:
  - start: [consumer, producer]
    phase: warm
  - sleep: 2s
  - stop: consumer
    phase: backlog
  - sleep: 1s
  - start: consumer
    phase: drain
  - wait: consumer.backlog.messages == 0
    timeout: 30s
  - stop: [producer, consumer]
  - assert: consumer.lost == 0
report:
  tables:
    - title: By phase
      rows: phases
      columns:
        - { name: acked, value: producer.acked }
        - { name: send p99 ms, value: producer.latency.p99, format: "%.2f" }
`)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--quiet", "--out", out, p}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "wrote "+filepath.Join(out, "html-report.html")) {
		t.Errorf("the run does not say it wrote the HTML report:\n%s", stderr.String())
	}
	res, err := results.Load(filepath.Join(out, "html-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, html string, res *results.Result) {
		page := htmltest.Open(t, "file://"+html, browser.Options{})
		page.NoErrors(t)
		if page.Status != res.Status {
			t.Errorf("status %q, the result's %q", page.Status, res.Status)
		}
		run := res.Runs[0]
		samples := len(run.Metrics.Series["producer"])
		if samples < 3 {
			t.Fatalf("the run has %d samples", samples)
		}
		for _, want := range []struct {
			title  string
			curves int
		}{{"Message rates", 2}, {"Backlog", 1}, {"p99 latency", 2}} {
			c := page.Chart(t, 0, want.title)
			if len(c.Series) != want.curves || c.Points != samples || c.Samples != samples {
				t.Errorf("%s: %d curves of %d points from %d samples; want %d curves, a point per sample (%d)",
					want.title, len(c.Series), c.Points, c.Samples, want.curves, samples)
			}
		}
		if bl := page.Chart(t, 0, "Backlog").Series[0]; bl.Max == nil || *bl.Max <= 0 {
			t.Errorf("the backlog chart never rises while the consumer is stopped: %+v", bl)
		}
		checkPhaseCells(t, page, run.Metrics.Phases)
		if len(res.Tables) > 0 {
			plan := page.Table(t, -1, "By phase")
			for _, row := range res.Tables[0].Rows {
				if got := plan.Cell(t, "acked", row[0]); got != row[1] {
					t.Errorf("By phase, %s: acked %s, the JSON %s", row[0], got, row[1])
				}
			}
		}
	}
	t.Run("run", func(t *testing.T) { check(t, filepath.Join(out, "html-report.html"), res) })
	t.Run("report", func(t *testing.T) {
		again := t.TempDir()
		if code := run([]string{"report", "--out", again, filepath.Join(out, "html-report.json")}, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		a, _ := os.ReadFile(filepath.Join(out, "html-report.html"))
		b, _ := os.ReadFile(filepath.Join(again, "html-report.html"))
		if !bytes.Equal(a, b) {
			t.Errorf("planrun report wrote another page than the run did")
		}
	})
	t.Run("from-series", func(t *testing.T) {
		again := t.TempDir()
		if code := run([]string{"report", "--from-series", "--out", again, filepath.Join(out, "html-report.series.jsonl")}, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		fromSeries, err := results.Load(filepath.Join(again, "html-report.json"))
		if err != nil {
			t.Fatal(err)
		}
		check(t, filepath.Join(again, "html-report.html"), fromSeries)
	})
}

// checkPhaseCells checks that the page's Produce and Consume tables show, for
// each phase given, the producer's acked and send p99 and the consumer's
// received and end-to-end p99 of the result.
func checkPhaseCells(t *testing.T, page *htmltest.Page, phases []metrics.Phase) {
	t.Helper()
	prod, cons := page.Table(t, 0, "Produce"), page.Table(t, 0, "Consume")
	for _, ph := range phases {
		p, c := ph.Workloads["producer"], ph.Workloads["consumer"]
		for _, cell := range []struct{ table, col, got, want string }{
			{"Produce", "acked", prod.Cell(t, "acked", ph.Name, "producer"), reporters.I(p.Acked)},
			{"Produce", "p99", prod.Cell(t, "send p99 ms", ph.Name, "producer"), reporters.F(p.Latency.P99, 2)},
			{"Consume", "received", cons.Cell(t, "received", ph.Name, "consumer"), reporters.I(c.Received)},
			{"Consume", "p99", cons.Cell(t, "e2e p99 ms", ph.Name, "consumer"), reporters.F(c.E2E.P99, 2)},
		} {
			if cell.got != cell.want {
				t.Errorf("%s table, phase %s, %s: the page shows %s, the JSON has %s", cell.table, ph.Name, cell.col, cell.got, cell.want)
			}
		}
	}
}
