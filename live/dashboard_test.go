package live

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/planrun/planrun/metrics"
)

// fullSnapshot has a workload of each kind (produce, consume, relay,
// connect), a phase, driver gauges and collector figures, so that every
// family the endpoint knows is served.
func fullSnapshot() metrics.Snapshot {
	lat := metrics.Latency{Count: 10, Avg: 2, P50: 1, P90: 3, P95: 4, P99: 5, P999: 6, Max: 7}
	return metrics.Snapshot{
		Elapsed: 30,
		Phase:   metrics.Phase{Name: "warm"},
		Order:   []string{"producer", "consumer", "relay", "clients"},
		Workloads: map[string]metrics.Stats{
			"producer": {Running: true, Sent: 10, Acked: 10, Failed: 1, BytesAcked: 1000, SendRate: 10, SendMBps: 0.001, Lag: -1, Latency: lat},
			"consumer": {Running: true, Received: 9, Duplicates: 1, Lost: 1, BytesReceived: 900, RecvRate: 9, RecvMBps: 0.0009, Lag: 1,
				Backlog: metrics.Backlog{Messages: 1, Bytes: 100}, E2E: lat, Gauges: map[string]float64{"partitions": 4}},
			"relay":   {Running: true, Sent: 9, Acked: 9, Received: 9, Lag: -1, Latency: lat, E2E: lat, Gauges: map[string]float64{"queued": 0}},
			"clients": {Running: true, Lag: -1, Gauges: map[string]float64{"clients": 100, "connected": 98}},
		},
		Extra: map[string]float64{"host.cpu": 40, "host.cpu_user": 30, "host.mem": 50},
	}
}

// scrape asks h for /metrics once and parses the text it answers.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics answered %d: %s", rec.Code, rec.Body)
	}
	if f := expfmt.ResponseFormat(rec.Header()); f.FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("GET /metrics answered %q, not the text format", f)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// served resolves a metric name as a query sees it (a summary's or a
// histogram's _sum and _count, a histogram's _bucket) to its family.
func served(fams map[string]*dto.MetricFamily, name string) (*dto.MetricFamily, bool) {
	if f, ok := fams[name]; ok {
		return f, true
	}
	for suffix, types := range map[string][]dto.MetricType{
		"_sum":    {dto.MetricType_SUMMARY, dto.MetricType_HISTOGRAM},
		"_count":  {dto.MetricType_SUMMARY, dto.MetricType_HISTOGRAM},
		"_bucket": {dto.MetricType_HISTOGRAM},
	} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && slices.Contains(types, f.GetType()) {
				return f, true
			}
		}
	}
	return nil, false
}

func TestFullSnapshotServesEveryFamily(t *testing.T) {
	fams := scrape(t, Handler(fullSnapshot))
	descs := make(chan *prometheus.Desc, 100)
	collector{}.Describe(descs)
	close(descs)
	if len(descs) != len(fams) {
		t.Errorf("the collector describes %d families, the scrape of the full snapshot has %d: %v", len(descs), len(fams), slices.Sorted(maps.Keys(fams)))
	}
	for name := range fams {
		if !strings.HasPrefix(name, "planrun_") {
			t.Errorf("%s is served: the endpoint serves planrun's figures only", name)
		}
	}
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashPanel struct {
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *dashDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource *dashDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

type dashboard struct {
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
}

var (
	metricName = regexp.MustCompile(`planrun_[A-Za-z0-9_:]+`)
	selector   = regexp.MustCompile(`(planrun_[A-Za-z0-9_:]*)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	// matchers is a selector's inside: matchers separated by commas, a
	// trailing comma allowed.
	matchers = regexp.MustCompile(`^\s*(?:` + matcher.String() + `\s*(?:,\s*` + matcher.String() + `\s*)*,?\s*)?$`)
)

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = []string{"instance", "job"}

// checkQuery fails if expr asks for a metric or a label the endpoint does
// not serve, or for a summary quantile it does not compute.
func checkQuery(t *testing.T, where, expr string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q queries no planrun metric", where, expr)
	}
	for _, n := range names {
		if _, ok := served(fams, n); !ok {
			t.Errorf("%s: %q queries %s, which the endpoint does not serve", where, expr, n)
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		fam, ok := served(fams, sel[1])
		if !ok {
			continue // reported above
		}
		labels := slices.Clone(scrapeLabels)
		quantiles := map[float64]bool{}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			for _, q := range m.GetSummary().GetQuantile() {
				quantiles[q.GetQuantile()] = true
			}
		}
		if fam.GetType() == dto.MetricType_SUMMARY && sel[1] == fam.GetName() {
			labels = append(labels, model.QuantileLabel)
		}
		if !matchers.MatchString(sel[2]) {
			t.Errorf("%s: cannot read the selector {%s} in %q", where, sel[2], expr)
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			if !slices.Contains(labels, m[1]) {
				t.Errorf("%s: %q selects on %s, which %s does not carry", where, expr, m[1], sel[1])
			}
			if m[1] == model.QuantileLabel && m[2] == "=" {
				q, err := strconv.ParseFloat(m[3], 64)
				if err != nil || !quantiles[q] {
					t.Errorf("%s: %q asks for quantile %q, which %s does not serve", where, expr, m[3], sel[1])
				}
			}
		}
	}
}

func TestDashboardQueriesServedMetrics(t *testing.T) {
	data, err := os.ReadFile("../dashboards/planrun.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboards/planrun.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want 39 or later", d.SchemaVersion)
	}
	fams := scrape(t, Handler(fullSnapshot))

	hasDatasourceVar := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			hasDatasourceVar = hasDatasourceVar || v.Name == "DS_PROMETHEUS"
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			checkQuery(t, "variable "+v.Name, q.Query, fams)
		}
	}
	if !hasDatasourceVar {
		t.Error("no datasource variable DS_PROMETHEUS: the dashboard would import into one Grafana only")
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			checkQuery(t, "annotation "+a.Name, a.Expr, fams)
		}
	}

	var queries int
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				ds := tg.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				if ds == nil || ds.UID != "${DS_PROMETHEUS}" {
					t.Errorf("panel %q: a query's datasource is %v, not the DS_PROMETHEUS variable", p.Title, ds)
				}
				checkQuery(t, "panel "+p.Title, tg.Expr, fams)
				queries++
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Error("the dashboard's panels have no queries")
	}
}

// The README's Grafana section lists the metric names served, all of them.
func TestReadmeListsServedMetrics(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### Grafana dashboard\n")
	if !ok {
		t.Fatal("README has no Grafana dashboard section")
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	fams := scrape(t, Handler(fullSnapshot))
	listed := map[string]bool{}
	for _, n := range metricName.FindAllString(section, -1) {
		listed[n] = true
		if _, ok := served(fams, n); !ok {
			t.Errorf("the README lists %s, which the endpoint does not serve", n)
		}
	}
	for n := range fams {
		if !listed[n] {
			t.Errorf("the README does not list %s", n)
		}
	}
}
