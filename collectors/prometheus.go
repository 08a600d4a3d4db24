package collectors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/yamldecode"
)

func init() {
	plan.RegisterCollector(plan.CollectorKind{
		Name: "prometheus",
		Doc: "scrape a Prometheus text endpoint (a broker's exporter, node_exporter) every second; each figure is a series selector " +
			"such as 'kafka_server_brokertopicmetrics_bytesin_total{topic=\"t\"}', matching series are summed and counters become per-second rates",
		New: func() plan.CollectorConfig { return &Prometheus{} },
	})
}

// DefaultScrapeTimeout leaves room within the one-second sampling interval.
const DefaultScrapeTimeout = 800 * time.Millisecond

// maxScrapeBytes bounds what one scrape may read.
const maxScrapeBytes = 64 << 20

// Prometheus is the prometheus collector's configuration.
type Prometheus struct {
	URL         string                `yaml:"url" required:"true" doc:"the endpoint to scrape, such as http://localhost:9100/metrics"`
	Timeout     time.Duration         `yaml:"timeout" default:"800ms" doc:"how long one scrape may take (samples are taken every second)"`
	Headers     map[string]string     `yaml:"headers" doc:"HTTP headers sent with every scrape (use bearer_token or password for credentials, which are redacted)"`
	BearerToken string                `yaml:"bearer_token" secret:"true" doc:"sent as Authorization: Bearer <token>"`
	Username    string                `yaml:"username" doc:"HTTP basic authentication user"`
	Password    string                `yaml:"password" secret:"true" doc:"HTTP basic authentication password"`
	Metrics     map[string]PromMetric `yaml:"metrics" required:"true" doc:"figure name -> a series selector 'name{label=\"value\"}', or a mapping with series, rate and scale"`
}

// PromMetric is one figure of a prometheus collector. In a plan it is a
// selector string, or a mapping when rate or scale are needed.
type PromMetric struct {
	Series string  `yaml:"series" required:"true" doc:"selector: a metric name with optional exact label matches, name{label=\"value\",...}; the values of all matching series are summed"`
	Rate   *bool   `yaml:"rate" doc:"report the per-second increase instead of the value (default: true for counters and histogram or summary _sum, _count and _bucket series, false otherwise)"`
	Scale  float64 `yaml:"scale" default:"1" doc:"multiply the figure by this, after the rate: 100 turns CPU seconds per second into %, 1e-6 bytes into MB"`
}

// promMetricFields decodes the mapping form without recursing into UnmarshalPlan.
type promMetricFields PromMetric

// UnmarshalPlan reads the string or the mapping form and checks the
// selector, so that a mistake is reported at its line.
func (m *PromMetric) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		f := promMetricFields(*m)
		d.DecodeStructs(n, "prometheus metric", &f)
		*m = PromMetric(f)
		if m.Series == "" {
			return // DecodeStructs reported the missing series
		}
	} else {
		s, ok := d.Scalar(n, "prometheus metric")
		if !ok {
			return
		}
		if m.Series = s; s == "" {
			d.Errs.At(n, "prometheus metric needs a selector such as process_cpu_seconds_total{job=\"broker\"}")
			return
		}
	}
	if _, err := parseSelector(m.Series); err != nil {
		d.Errs.At(n, "%v", err)
	}
}

// Check validates the URL and figure names (UnmarshalPlan has checked the
// selectors).
func (p *Prometheus) Check() error {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q must be an http:// or https:// address", p.URL)
	}
	if len(p.Metrics) == 0 {
		return errors.New("metrics: name at least one figure, such as cpu: 'process_cpu_seconds_total'")
	}
	if p.Timeout < 0 {
		return errors.New("timeout must not be negative")
	}
	var errs []error
	for _, name := range p.Figures() {
		if !figureName(name) {
			errs = append(errs, fmt.Errorf("metrics: figure name %q must be letters, digits and _, not starting with a digit (expressions use it as <collector>.%s)", name, name))
		}
	}
	return errors.Join(errs...)
}

func figureName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0, false) {
			return false
		}
	}
	return s != ""
}

// Figures lists the figure names, sorted.
func (p *Prometheus) Figures() []string {
	names := make([]string, 0, len(p.Metrics))
	for k := range p.Metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Open parses the selectors and scrapes once so that the first sample
// already has rates. A failed first scrape is not fatal: the endpoint may
// come up with the broker, and Sample reports what stays wrong.
func (p *Prometheus) Open(ctx context.Context) (plan.Sampler, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	var figs []*promFigure
	for _, name := range p.Figures() {
		m := p.Metrics[name]
		sel, err := parseSelector(m.Series)
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", name, err)
		}
		scale := m.Scale
		if scale == 0 {
			scale = 1
		}
		figs = append(figs, &promFigure{name: name, sel: sel, rate: m.Rate, scale: scale})
	}
	u, _ := url.Parse(p.URL)
	s := &promSampler{cfg: p, where: u.Redacted(), transport: http.DefaultTransport.(*http.Transport).Clone()}
	s.timeout = p.Timeout
	if s.timeout == 0 {
		s.timeout = DefaultScrapeTimeout
	}
	s.client = &http.Client{Transport: s.transport, Timeout: s.timeout}
	s.figs = figs
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.sampleLocked(ctx)
	return s, nil
}

type promSampler struct {
	cfg       *Prometheus
	where     string // the URL without a password, for messages
	timeout   time.Duration
	transport *http.Transport
	client    *http.Client

	mu   sync.Mutex
	figs []*promFigure
}

type promFigure struct {
	name  string
	sel   selector
	rate  *bool
	scale float64

	prev   float64
	prevAt time.Time // zero until a value was read
}

func (s *promSampler) Sample(ctx context.Context) (map[string]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sampleLocked(ctx)
}

func (s *promSampler) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

func (s *promSampler) sampleLocked(ctx context.Context) (map[string]float64, error) {
	fams, at, err := s.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	var errs []error
	for _, f := range s.figs {
		raw, counter, err := lookup(f.sel, fams)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		if f.rate != nil {
			counter = *f.rate
		}
		if !counter {
			out[f.name] = raw * f.scale
			continue
		}
		prev, prevAt := f.prev, f.prevAt
		f.prev, f.prevAt = raw, at
		if prevAt.IsZero() {
			continue // the baseline: a rate needs two reads
		}
		dt := at.Sub(prevAt).Seconds()
		if dt <= 0 {
			continue
		}
		inc := raw - prev
		if inc < 0 {
			// The counter restarted from zero (the process restarted).
			inc = raw
		}
		out[f.name] = inc / dt * f.scale
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s: %w", s.where, errors.Join(errs...))
	}
	return out, nil
}

// scrape fetches and parses the endpoint; at is when the response started,
// the closest to when the exporter read its values.
func (s *promSampler) scrape(ctx context.Context) (map[string]*dto.MetricFamily, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	req.Header.Set("User-Agent", "planrun")
	for k, v := range s.cfg.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if s.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	}
	if s.cfg.Username != "" || s.cfg.Password != "" {
		req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, time.Time{}, fmt.Errorf("scraping %s: %w", s.where, err)
	}
	at := time.Now()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, at, fmt.Errorf("scraping %s: HTTP %s: %s", s.where, resp.Status, strings.TrimSpace(string(snippet)))
	}
	dec := expfmt.NewDecoder(io.LimitReader(resp.Body, maxScrapeBytes), expfmt.ResponseFormat(resp.Header))
	fams := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, at, fmt.Errorf("scraping %s: reading the response (%s): %w", s.where, resp.Header.Get("Content-Type"), err)
		}
		fams[mf.GetName()] = &mf
	}
	return fams, at, nil
}

// Which value of a family a selector reads.
const (
	partValue    = iota // a counter, gauge or untyped series
	partQuantile        // a summary's quantile="..."
	partSum             // a summary's or histogram's _sum
	partCount           // their _count
	partBucket          // a histogram's _bucket{le="..."}
)

// lookup sums the series sel matches. counter says the value only ever
// grows, so by default its rate is reported.
func lookup(sel selector, fams map[string]*dto.MetricFamily) (float64, bool, error) {
	fam, part, err := findFamily(sel, fams)
	if err != nil {
		return 0, false, err
	}
	var plain [][2]string
	bound := 0.0
	for _, l := range sel.labels {
		if part == partQuantile && l[0] == "quantile" || part == partBucket && l[0] == "le" {
			v, perr := strconv.ParseFloat(l[1], 64)
			if perr != nil {
				return 0, false, fmt.Errorf("%s: %s=%q is not a number", sel, l[0], l[1])
			}
			bound = v
			continue
		}
		plain = append(plain, l)
	}
	sum, matched := 0.0, 0
	var others []string
	for _, m := range fam.GetMetric() {
		if !labelsMatch(m, plain) {
			if len(others) < 3 {
				others = append(others, labelText(m))
			}
			continue
		}
		v, ok := seriesValue(fam.GetType(), m, part, bound)
		if !ok {
			continue
		}
		sum += v
		matched++
	}
	if matched == 0 {
		msg := fmt.Sprintf("no series matches %s", sel)
		if len(others) > 0 {
			msg += fmt.Sprintf(" (%s has series such as %s)", fam.GetName(), strings.Join(others, ", "))
		}
		return 0, false, errors.New(msg)
	}
	counter := part == partSum || part == partCount || part == partBucket || fam.GetType() == dto.MetricType_COUNTER
	return sum, counter, nil
}

func findFamily(sel selector, fams map[string]*dto.MetricFamily) (*dto.MetricFamily, int, error) {
	hasLabel := func(name string) bool {
		for _, l := range sel.labels {
			if l[0] == name {
				return true
			}
		}
		return false
	}
	if fam, ok := fams[sel.name]; ok {
		switch fam.GetType() {
		case dto.MetricType_SUMMARY:
			if !hasLabel("quantile") {
				return nil, 0, fmt.Errorf("%s: %s is a summary: select a quantile (quantile=\"0.99\") or use %s_sum or %s_count", sel, sel.name, sel.name, sel.name)
			}
			return fam, partQuantile, nil
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return nil, 0, fmt.Errorf("%s: %s is a histogram: use %s_bucket{le=\"...\"}, %s_sum or %s_count", sel, sel.name, sel.name, sel.name, sel.name)
		}
		return fam, partValue, nil
	}
	for _, sfx := range []struct {
		s    string
		part int
	}{{"_sum", partSum}, {"_count", partCount}, {"_bucket", partBucket}, {"_total", partValue}} {
		base, ok := strings.CutSuffix(sel.name, sfx.s)
		if !ok {
			continue
		}
		fam, ok := fams[base]
		if !ok {
			continue
		}
		t := fam.GetType()
		histogram := t == dto.MetricType_HISTOGRAM || t == dto.MetricType_GAUGE_HISTOGRAM
		switch {
		case sfx.part == partValue && t == dto.MetricType_COUNTER:
			// OpenMetrics names the family without the _total of its series.
			return fam, partValue, nil
		case sfx.part == partBucket && histogram:
			if !hasLabel("le") {
				return nil, 0, fmt.Errorf("%s: select a bucket with le=\"...\"", sel)
			}
			return fam, partBucket, nil
		case (sfx.part == partSum || sfx.part == partCount) && (histogram || t == dto.MetricType_SUMMARY):
			return fam, sfx.part, nil
		}
	}
	return nil, 0, fmt.Errorf("no metric %s in the scrape (selector %s)", sel.name, sel)
}

// seriesValue reads the selected value of one series.
func seriesValue(t dto.MetricType, m *dto.Metric, part int, bound float64) (float64, bool) {
	switch part {
	case partQuantile:
		for _, q := range m.GetSummary().GetQuantile() {
			if q.GetQuantile() == bound {
				return q.GetValue(), true
			}
		}
		return 0, false
	case partSum:
		if h := m.GetHistogram(); h != nil {
			return h.GetSampleSum(), true
		}
		return m.GetSummary().GetSampleSum(), m.GetSummary() != nil
	case partCount:
		if h := m.GetHistogram(); h != nil {
			if h.SampleCountFloat != nil {
				return h.GetSampleCountFloat(), true
			}
			return float64(h.GetSampleCount()), true
		}
		return float64(m.GetSummary().GetSampleCount()), m.GetSummary() != nil
	case partBucket:
		for _, b := range m.GetHistogram().GetBucket() {
			if b.GetUpperBound() == bound {
				if b.CumulativeCountFloat != nil {
					return b.GetCumulativeCountFloat(), true
				}
				return float64(b.GetCumulativeCount()), true
			}
		}
		return 0, false
	}
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), m.GetCounter() != nil
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), m.GetGauge() != nil
	default:
		return m.GetUntyped().GetValue(), m.GetUntyped() != nil
	}
}

// labelsMatch follows PromQL: label="" also matches a series without it.
func labelsMatch(m *dto.Metric, want [][2]string) bool {
	for _, w := range want {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == w[0] {
				got = l.GetValue()
				break
			}
		}
		if got != w[1] {
			return false
		}
	}
	return true
}

func labelText(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
