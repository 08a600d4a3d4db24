// Package htmltest opens planrun's HTML report (and live page) in headless
// Chromium for tests, and reads back what the page shows: the page writes
// its charts, curves, points, tables and script errors into an element of
// its own (#planrun-check) after every render.
package htmltest

import (
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/planrun/planrun/internal/browser"
	"github.com/planrun/planrun/reporters"
)

// Page is what a rendered report shows.
type Page struct {
	// Renders counts render(model) calls: 1 for a report, one more for
	// every model a live page received.
	Renders int     `json:"renders"`
	Charts  []Chart `json:"charts"`
	Tables  []Table `json:"tables"`
	// Errors are the script errors the page saw.
	Errors []string `json:"errors"`
	// Status is the run's status as the header shows it.
	Status string `json:"status"`
	// Live is the live panel's text (nil without a panel).
	Live *string `json:"live"`
	// Model is the data embedded in the page (#planrun-data).
	Model *reporters.HTMLModel `json:"-"`
	// DOM is the page as Chromium serialized it.
	DOM string `json:"-"`
}

// Chart is one chart as drawn.
type Chart struct {
	Run   int    `json:"run"`
	Title string `json:"title"`
	// Drawn counts uPlot's draws (0: never drawn); Points is the length
	// of its time axis; Samples the per-second samples before
	// downsampling.
	Drawn   int      `json:"drawn"`
	Points  int      `json:"points"`
	Samples int      `json:"samples"`
	Series  []Series `json:"series"`
	// X is the time range shown: the data's, or the range zoomed to.
	X [2]float64 `json:"x"`
}

// Series is one curve: its points with a value (gaps left out), and its
// lowest and highest value.
type Series struct {
	Label  string   `json:"label"`
	Length int      `json:"length"`
	Points int      `json:"points"`
	Min    *float64 `json:"min"`
	Max    *float64 `json:"max"`
}

// Table is a table's text as shown; Run is the run it belongs to, -1 for
// the report's own tables.
type Table struct {
	Title  string     `json:"title"`
	Run    int        `json:"run"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Open loads url in headless Chromium and returns what the page shows.
func Open(t testing.TB, url string, opts browser.Options) *Page {
	t.Helper()
	return Parse(t, browser.DumpDOM(t, url, opts))
}

// Parse reads a page from its serialized DOM.
func Parse(t testing.TB, dom string) *Page {
	t.Helper()
	var p Page
	check, ok := scriptJSON(dom, "planrun-check")
	if !ok {
		t.Fatalf("the page wrote no #planrun-check: its script did not run to the end\n%s", head(dom))
	}
	if err := json.Unmarshal([]byte(check), &p); err != nil {
		t.Fatalf("#planrun-check: %v\n%s", err, check)
	}
	data, ok := scriptJSON(dom, "planrun-data")
	if !ok {
		t.Fatalf("the page has no #planrun-data")
	}
	p.Model = &reporters.HTMLModel{}
	if err := json.Unmarshal([]byte(data), p.Model); err != nil {
		t.Fatalf("#planrun-data: %v", err)
	}
	p.DOM = dom
	return &p
}

// scriptJSON is the text of <script type="application/json" id="ID">.
func scriptJSON(dom, id string) (string, bool) {
	re := regexp.MustCompile(`(?s)<script[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>(.*?)</script>`)
	m := re.FindStringSubmatch(dom)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Table finds a table by the start of its title (and run; -1 for the
// report's own tables), failing the test when there is none.
func (p *Page) Table(t testing.TB, run int, title string) Table {
	t.Helper()
	for _, tab := range p.Tables {
		if tab.Run == run && strings.HasPrefix(tab.Title, title) {
			return tab
		}
	}
	var titles []string
	for _, tab := range p.Tables {
		titles = append(titles, tab.Title)
	}
	t.Fatalf("the page shows no table %q of run %d; it shows %q", title, run, titles)
	return Table{}
}

// Cell is the cell of the row whose first cells are key, in the column
// named col.
func (tab Table) Cell(t testing.TB, col string, key ...string) string {
	t.Helper()
	c := -1
	for i, h := range tab.Header {
		if h == col {
			c = i
		}
	}
	if c < 0 {
		t.Fatalf("table %q has no column %q: %q", tab.Title, col, tab.Header)
	}
rows:
	for _, r := range tab.Rows {
		for i, k := range key {
			if i >= len(r) || r[i] != k {
				continue rows
			}
		}
		return r[c]
	}
	t.Fatalf("table %q has no row %q", tab.Title, key)
	return ""
}

// Chart finds a run's chart by title.
func (p *Page) Chart(t testing.TB, run int, title string) Chart {
	t.Helper()
	for _, c := range p.Charts {
		if c.Run == run && c.Title == title {
			return c
		}
	}
	t.Fatalf("the page shows no chart %q of run %d", title, run)
	return Chart{}
}

// NoErrors fails the test when the page saw a script error or drew a
// chart never.
func (p *Page) NoErrors(t testing.TB) {
	t.Helper()
	if len(p.Errors) > 0 {
		t.Errorf("script errors on the page: %q", p.Errors)
	}
	for _, c := range p.Charts {
		if c.Drawn == 0 {
			t.Errorf("chart %q of run %d was never drawn", c.Title, c.Run)
		}
	}
}

func head(s string) string {
	if len(s) > 2000 {
		s = s[:2000]
	}
	return html.UnescapeString(s)
}
