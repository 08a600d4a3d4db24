package collectors

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/internal/testenv"
	"github.com/planrun/planrun/yamldecode"
)

// exposition is an endpoint whose counters the test moves.
type exposition struct {
	mu      sync.Mutex
	counter float64
	hits    int
	header  http.Header
}

func (e *exposition) set(v float64) {
	e.mu.Lock()
	e.counter = v
	e.mu.Unlock()
}

func (e *exposition) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hits++
	e.header = r.Header.Clone()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintf(w, `# HELP broker_bytes_in_total Bytes in.
# TYPE broker_bytes_in_total counter
broker_bytes_in_total{topic="a",broker="1"} %g
broker_bytes_in_total{topic="a",broker="2"} %g
broker_bytes_in_total{topic="b",broker="1"} 1000
# TYPE broker_queue_depth gauge
broker_queue_depth{queue="q1"} 7
broker_queue_depth{queue="q2"} 5
broker_queue_depth{queue="q3",shard="x"} 100
# TYPE untyped_thing untyped
untyped_thing 3.5
# TYPE req_seconds summary
req_seconds{quantile="0.5"} 0.01
req_seconds{quantile="0.99"} 0.25
req_seconds_sum 12
req_seconds_count 40
# TYPE size_bytes histogram
size_bytes_bucket{le="100"} 3
size_bytes_bucket{le="1000"} 9
size_bytes_bucket{le="+Inf"} 10
size_bytes_sum 4200
size_bytes_count 10
`, e.counter, 2*e.counter)
}

func decodeProm(t *testing.T, src string) (*Prometheus, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	d := yamldecode.NewDecoder("plan.yaml", map[string]string{"token": "s3cret"})
	p := &Prometheus{}
	d.DecodeStructs(doc.Content[0], "collector \"broker\"", p)
	if err := d.Errs.Err(); err != nil {
		return p, err
	}
	if d.Secrets["s3cret"] != true && strings.Contains(src, "bearer_token") {
		t.Error("bearer_token not recorded as a secret")
	}
	return p, p.Check()
}

func TestPrometheusDecode(t *testing.T) {
	p, err := decodeProm(t, `
url: http://localhost:9/metrics
timeout: 500ms
bearer_token: ${token}
headers: {X-Tenant: t1}
metrics:
  depth: broker_queue_depth
  cpu: {series: 'process_cpu_seconds_total{job="broker"}', scale: 100}
  raw: {series: 'broker_bytes_in_total', rate: false}
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Figures(), ","); got != "cpu,depth,raw" {
		t.Errorf("figures %s", got)
	}
	if p.Metrics["cpu"].Scale != 100 || p.Metrics["raw"].Rate == nil || *p.Metrics["raw"].Rate || p.Timeout != 500*time.Millisecond {
		t.Errorf("decoded %+v", p)
	}
	for _, bad := range []struct{ src, want string }{
		{"url: http://x/m\nmetrics: {a: 'x{job=~\"b\"}'}", "only exact matches"},
		{"url: http://x/m\nmetrics: {a: {rate: true}}", "series"},
		{"url: ftp://x/m\nmetrics: {a: x}", "http://"},
		{"url: http://x/m\nmetrics: {9a: x}", "figure name"},
		{"url: http://x/m\nmetrics: {a: {series: x, rat: true}}", "unknown key"},
		{"url: http://x/m", `needs "metrics"`},
		{"url: http://x/m\nmetrics: {}", "at least one figure"},
	} {
		if _, err := decodeProm(t, bad.src); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want it to mention %q", bad.src, err, bad.want)
		}
	}
}

func TestSelectorParse(t *testing.T) {
	s, err := parseSelector(` a:b_c { x = "1" , y="q\"\\z", } `)
	if err != nil {
		t.Fatal(err)
	}
	if s.name != "a:b_c" || len(s.labels) != 2 || s.labels[1] != [2]string{"y", `q"\z`} {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range []string{"", "{a=\"b\"}", "m{a}", "m{a=b}", `m{a="b"`, `m{a!="b"}`, `m{a="b" c="d"}`, `m{a="1",a="2"}`, "m x"} {
		if _, err := parseSelector(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func openProm(t *testing.T, url string, metrics map[string]PromMetric) *promSampler {
	t.Helper()
	p := &Prometheus{URL: url, Metrics: metrics, BearerToken: "tok", Headers: map[string]string{"X-Tenant": "t1"}}
	s, err := p.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*promSampler)
}

func TestPrometheusRate(t *testing.T) {
	exp := &exposition{counter: 100}
	srv := httptest.NewServer(exp)
	defer srv.Close()
	no := false
	before := time.Now()
	s := openProm(t, srv.URL, map[string]PromMetric{
		"in_a":    {Series: `broker_bytes_in_total{topic="a"}`, Scale: 1e-3},
		"in_a1":   {Series: `broker_bytes_in_total{topic="a",broker="1"}`},
		"in_raw":  {Series: `broker_bytes_in_total{topic="a"}`, Rate: &no},
		"depth":   {Series: `broker_queue_depth`},
		"depth_q": {Series: `broker_queue_depth{shard=""}`},
		"thing":   {Series: `untyped_thing`},
		"p99":     {Series: `req_seconds{quantile="0.99"}`},
		"reqs":    {Series: `req_seconds_count`, Rate: &no},
		"le1000":  {Series: `size_bytes_bucket{le="1000"}`, Rate: &no},
		"bsum":    {Series: `size_bytes_sum`, Rate: &no},
	})
	opened := time.Now()
	exp.set(100 + 500)
	time.Sleep(150 * time.Millisecond) // lets time pass so that the rate has a span
	sampling := time.Now()
	vals, err := s.Sample(context.Background())
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// The sampler's own interval lies between these bounds.
	lo, hi := sampling.Sub(opened).Seconds(), after.Sub(before).Seconds()
	// in_a sums broker 1 (+500) and broker 2 (+1000), scaled to thousands.
	within(t, "in_a", vals["in_a"], 1.5/hi, 1.5/lo)
	within(t, "in_a1", vals["in_a1"], 500/hi, 500/lo)
	want := map[string]float64{"in_raw": 600 + 1200, "depth": 112, "depth_q": 12, "thing": 3.5, "p99": 0.25, "reqs": 40, "le1000": 9, "bsum": 4200}
	for k, w := range want {
		if vals[k] != w {
			t.Errorf("%s = %v, want %v", k, vals[k], w)
		}
	}
	exp.mu.Lock()
	h := exp.header
	exp.mu.Unlock()
	if h.Get("Authorization") != "Bearer tok" || h.Get("X-Tenant") != "t1" {
		t.Errorf("request headers %v", h)
	}
	// A counter that goes back restarted: its new value is the increase.
	exp.set(10)
	vals, err = s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if vals["in_a1"] <= 0 {
		t.Errorf("rate after a counter reset = %v", vals["in_a1"])
	}
}

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	const eps = 1e-9
	if got < lo*(1-eps) || got > hi*(1+eps) {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

func TestPrometheusFirstRateNeedsBaseline(t *testing.T) {
	exp := &exposition{}
	srv := httptest.NewServer(exp)
	defer srv.Close()
	p := &Prometheus{URL: srv.URL, Metrics: map[string]PromMetric{"in": {Series: "broker_bytes_in_total"}}}
	s := &promSampler{cfg: p, where: srv.URL, transport: http.DefaultTransport.(*http.Transport).Clone(), timeout: time.Second}
	s.client = &http.Client{Transport: s.transport}
	sel, _ := parseSelector("broker_bytes_in_total")
	s.figs = []*promFigure{{name: "in", sel: sel, scale: 1}}
	defer s.Close()
	vals, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vals["in"]; ok {
		t.Errorf("a rate from one read: %v", vals)
	}
}

func TestPrometheusErrors(t *testing.T) {
	exp := &exposition{}
	srv := httptest.NewServer(exp)
	defer srv.Close()
	cases := []struct{ sel, want string }{
		{`nope_total{job="x"}`, `nope_total{job="x"}`},
		{`broker_queue_depth{queue="zz"}`, `no series matches broker_queue_depth{queue="zz"}`},
		{`req_seconds`, "summary"},
		{`size_bytes`, "histogram"},
		{`size_bytes_bucket`, "le="},
	}
	for _, c := range cases {
		s := openProm(t, srv.URL, map[string]PromMetric{"x": {Series: c.sel}})
		_, err := s.Sample(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.sel, err, c.want)
		}
	}
	// A closed port and an HTTP error are scrape errors.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := openProm(t, "http://"+addr+"/metrics", map[string]PromMetric{"x": {Series: "up"}})
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "scraping") {
		t.Errorf("closed port: %v", err)
	}
	nf := httptest.NewServer(http.NotFoundHandler())
	defer nf.Close()
	s = openProm(t, nf.URL, map[string]PromMetric{"x": {Series: "up"}})
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
}

// TestNodeExporter scrapes Debian's prometheus-node-exporter (installed by
// .ci/services.sh).
func TestNodeExporter(t *testing.T) {
	bin := testenv.Program(t, "prometheus-node-exporter", "prometheus-node-exporter")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--web.listen-address="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	url := "http://" + addr + "/metrics"
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node exporter did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s := openProm(t, url, map[string]PromMetric{
		"idle": {Series: `node_cpu_seconds_total{mode="idle"}`, Scale: 100},
		"mem":  {Series: `node_memory_MemAvailable_bytes`, Scale: 1e-6},
	})
	time.Sleep(300 * time.Millisecond) // the CPU counters need time to move
	vals, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if vals["mem"] <= 0 || math.IsNaN(vals["idle"]) || vals["idle"] < 0 {
		t.Errorf("node exporter figures %v", vals)
	}
}
