// Package live serves a running plan's figures in the Prometheus
// exposition format, so that a Prometheus or Grafana next to the broker can
// show the load test beside the broker's own metrics.
package live

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/planrun/planrun/metrics"
)

// Serve listens on addr (host:port) and serves GET /metrics until ctx
// ends. snap is called for every scrape and must be safe to call from
// several goroutines.
func Serve(ctx context.Context, addr string, snap func() metrics.Snapshot) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	return ServeListener(ctx, ln, snap)
}

// ServeListener is Serve on a listener the caller opened; it closes ln.
func ServeListener(ctx context.Context, ln net.Listener, snap func() metrics.Snapshot) error {
	srv := &http.Server{Handler: Handler(snap), ReadHeaderTimeout: 5 * time.Second}
	return serve(ctx, srv, ln)
}

// Handler answers GET /metrics with the figures of one snapshot per scrape,
// from a registry of its own (the process-wide default one is not served).
func Handler(snap func() metrics.Snapshot) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{snap: snap})
	mux := http.NewServeMux()
	// A figure that cannot be encoded is left out rather than failing the
	// whole scrape.
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// collector turns a snapshot into const metrics. Workload figures carry a
// workload label; collector figures are planrun_extra with
// name="<collector>.<figure>".
type collector struct {
	snap func() metrics.Snapshot
}

var (
	elapsedDesc = prometheus.NewDesc("planrun_elapsed_seconds", "seconds since the run started", nil, nil)
	phaseDesc   = prometheus.NewDesc("planrun_phase", "1 for the phase the run is in", []string{"phase"}, nil)
	gaugeDesc   = prometheus.NewDesc("planrun_workload_gauge", "figures a driver reports for a workload", []string{"workload", "name"}, nil)
	extraDesc   = prometheus.NewDesc("planrun_extra", "collector figures, last sample", []string{"name"}, nil)
)

// workloadFigure is one figure per workload; ok false leaves the workload
// out.
type workloadFigure struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	v    func(metrics.Stats) (v float64, ok bool)
}

func workloadCounter(name, help string, v func(metrics.Stats) int64) workloadFigure {
	return workloadFigure{
		desc: prometheus.NewDesc(name, help, []string{"workload"}, nil),
		typ:  prometheus.CounterValue,
		v:    func(st metrics.Stats) (float64, bool) { return float64(v(st)), true },
	}
}

func workloadGauge(name, help string, v func(metrics.Stats) (float64, bool)) workloadFigure {
	return workloadFigure{desc: prometheus.NewDesc(name, help, []string{"workload"}, nil), typ: prometheus.GaugeValue, v: v}
}

func always(v func(metrics.Stats) float64) func(metrics.Stats) (float64, bool) {
	return func(st metrics.Stats) (float64, bool) { return v(st), true }
}

var workloadFigures = []workloadFigure{
	workloadCounter("planrun_messages_sent_total", "messages handed to the client to send", func(st metrics.Stats) int64 { return st.Sent }),
	workloadCounter("planrun_messages_acked_total", "messages the broker acknowledged", func(st metrics.Stats) int64 { return st.Acked }),
	workloadCounter("planrun_messages_failed_total", "messages that failed to send", func(st metrics.Stats) int64 { return st.Failed }),
	workloadCounter("planrun_messages_received_total", "messages received", func(st metrics.Stats) int64 { return st.Received }),
	workloadCounter("planrun_messages_distinct_total", "messages received at least once (duplicates not counted)", func(st metrics.Stats) int64 { return st.Distinct }),
	workloadCounter("planrun_messages_duplicated_total", "messages received more than once", func(st metrics.Stats) int64 { return st.Duplicates }),
	workloadCounter("planrun_bytes_acked_total", "payload bytes the broker acknowledged", func(st metrics.Stats) int64 { return st.BytesAcked }),
	workloadCounter("planrun_bytes_received_total", "payload bytes received", func(st metrics.Stats) int64 { return st.BytesReceived }),
	workloadGauge("planrun_running", "1 while the workload runs", always(func(st metrics.Stats) float64 { return boolValue(st.Running) })),
	workloadGauge("planrun_send_rate", "messages acknowledged per second, last second", always(func(st metrics.Stats) float64 { return st.SendRate })),
	workloadGauge("planrun_recv_rate", "messages received per second, last second", always(func(st metrics.Stats) float64 { return st.RecvRate })),
	workloadGauge("planrun_send_mbps", "MB (10^6 bytes) acknowledged per second, last second", always(func(st metrics.Stats) float64 { return st.SendMBps })),
	workloadGauge("planrun_recv_mbps", "MB (10^6 bytes) received per second, last second", always(func(st metrics.Stats) float64 { return st.RecvMBps })),
	workloadGauge("planrun_backlog_messages", "messages acknowledged to the topic and not yet received by the group", always(func(st metrics.Stats) float64 { return float64(st.Backlog.Messages) })),
	workloadGauge("planrun_backlog_bytes", "bytes acknowledged to the topic and not yet received by the group", always(func(st metrics.Stats) float64 { return float64(st.Backlog.Bytes) })),
	workloadGauge("planrun_lag", "the consumer group's lag as the broker reports it", func(st metrics.Stats) (float64, bool) { return float64(st.Lag), st.Lag >= 0 }),
	workloadGauge("planrun_lag_age_seconds", "how old planrun_lag is: when the broker was last asked", func(st metrics.Stats) (float64, bool) { return st.LagAge, st.Lag >= 0 && !metrics.IsNA(st.LagAge) }),
	workloadGauge("planrun_lost_messages", "acknowledged messages not received and proven lost", always(func(st metrics.Stats) float64 { return float64(st.Lost) })),
	workloadGauge("planrun_in_flight_messages", "acknowledged messages not received and not proven lost", always(func(st metrics.Stats) float64 { return float64(st.InFlight) })),
}

// latencyFigure is a summary per workload that measured any latency; the
// quantile 1 is the maximum.
type latencyFigure struct {
	desc *prometheus.Desc
	pick func(metrics.Stats) metrics.Latency
}

var latencyFigures = []latencyFigure{
	{prometheus.NewDesc("planrun_latency_ms", "latency from the intended send time to the broker's ack, ms, over the run", []string{"workload"}, nil),
		func(st metrics.Stats) metrics.Latency { return st.Latency }},
	{prometheus.NewDesc("planrun_e2e_latency_ms", "latency from the intended send time to receipt, ms, over the run", []string{"workload"}, nil),
		func(st metrics.Stats) metrics.Latency { return st.E2E }},
}

func quantiles(l metrics.Latency) map[float64]float64 {
	return map[float64]float64{0.5: l.P50, 0.9: l.P90, 0.95: l.P95, 0.99: l.P99, 0.999: l.P999, 1: l.Max}
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- elapsedDesc
	ch <- phaseDesc
	for _, f := range workloadFigures {
		ch <- f.desc
	}
	for _, f := range latencyFigures {
		ch <- f.desc
	}
	ch <- gaugeDesc
	ch <- extraDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send := func(d *prometheus.Desc, m prometheus.Metric, err error) {
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	value := func(d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(d, typ, v, labels...)
		send(d, m, err)
	}

	value(elapsedDesc, prometheus.GaugeValue, s.Elapsed)
	if s.Phase.Name != "" {
		value(phaseDesc, prometheus.GaugeValue, 1, s.Phase.Name)
	}
	names := workloadNames(s)
	for _, n := range names {
		st := s.Workloads[n]
		for _, f := range workloadFigures {
			if v, ok := f.v(st); ok {
				value(f.desc, f.typ, v, n)
			}
		}
		for _, f := range latencyFigures {
			if l := f.pick(st); l.Count > 0 {
				m, err := prometheus.NewConstSummary(f.desc, uint64(l.Count), l.Avg*float64(l.Count), quantiles(l), n)
				send(f.desc, m, err)
			}
		}
		for _, g := range slices.Sorted(maps.Keys(st.Gauges)) {
			value(gaugeDesc, prometheus.GaugeValue, st.Gauges[g], n, g)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Extra)) {
		value(extraDesc, prometheus.GaugeValue, s.Extra[k], k)
	}
}

// workloadNames is the snapshot's order, then any other workload by name,
// each once.
func workloadNames(s metrics.Snapshot) []string {
	var names []string
	for _, n := range slices.Concat(s.Order, slices.Sorted(maps.Keys(s.Workloads))) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
