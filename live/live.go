// Package live serves a running plan's figures in the Prometheus text
// format, so that a Prometheus or Grafana next to the broker can show the
// load test beside the broker's own metrics.
package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

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
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		// A scrape in flight gets a moment to finish.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler answers GET /metrics with the snapshot's figures.
func Handler(snap func() metrics.Snapshot) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		Write(&b, snap())
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(b.Bytes())
	})
	return mux
}

// Write renders s in the Prometheus text exposition format. Workload
// figures carry a workload label; collector figures are planrun_extra
// with name="<collector>.<figure>".
func Write(w io.Writer, s metrics.Snapshot) {
	names := append([]string(nil), s.Order...)
	for _, n := range slices.Sorted(maps.Keys(s.Workloads)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	e := &encoder{w: w}
	e.family("planrun_elapsed_seconds", "gauge", "seconds since the run started")
	e.sample("planrun_elapsed_seconds", nil, s.Elapsed)
	if s.Phase.Name != "" {
		e.family("planrun_phase", "gauge", "1 for the phase the run is in")
		e.sample("planrun_phase", []string{"phase", s.Phase.Name}, 1)
	}

	counters := []struct {
		name, help string
		v          func(metrics.Stats) int64
	}{
		{"planrun_messages_sent_total", "messages handed to the client to send", func(st metrics.Stats) int64 { return st.Sent }},
		{"planrun_messages_acked_total", "messages the broker acknowledged", func(st metrics.Stats) int64 { return st.Acked }},
		{"planrun_messages_failed_total", "messages that failed to send", func(st metrics.Stats) int64 { return st.Failed }},
		{"planrun_messages_received_total", "messages received", func(st metrics.Stats) int64 { return st.Received }},
		{"planrun_messages_duplicated_total", "messages received more than once", func(st metrics.Stats) int64 { return st.Duplicates }},
		{"planrun_bytes_acked_total", "payload bytes the broker acknowledged", func(st metrics.Stats) int64 { return st.BytesAcked }},
		{"planrun_bytes_received_total", "payload bytes received", func(st metrics.Stats) int64 { return st.BytesReceived }},
	}
	for _, c := range counters {
		e.family(c.name, "counter", c.help)
		for _, n := range names {
			e.sample(c.name, []string{"workload", n}, float64(c.v(s.Workloads[n])))
		}
	}
	gauges := []struct {
		name, help string
		v          func(metrics.Stats) (float64, bool)
	}{
		{"planrun_running", "1 while the workload runs", func(st metrics.Stats) (float64, bool) { return boolValue(st.Running), true }},
		{"planrun_send_rate", "messages acknowledged per second, last second", func(st metrics.Stats) (float64, bool) { return st.SendRate, true }},
		{"planrun_recv_rate", "messages received per second, last second", func(st metrics.Stats) (float64, bool) { return st.RecvRate, true }},
		{"planrun_send_mbps", "MB (10^6 bytes) acknowledged per second, last second", func(st metrics.Stats) (float64, bool) { return st.SendMBps, true }},
		{"planrun_recv_mbps", "MB (10^6 bytes) received per second, last second", func(st metrics.Stats) (float64, bool) { return st.RecvMBps, true }},
		{"planrun_backlog_messages", "messages acknowledged to the topic and not yet received by the group", func(st metrics.Stats) (float64, bool) { return float64(st.Backlog.Messages), true }},
		{"planrun_backlog_bytes", "bytes acknowledged to the topic and not yet received by the group", func(st metrics.Stats) (float64, bool) { return float64(st.Backlog.Bytes), true }},
		{"planrun_lag", "the consumer group's lag as the broker reports it", func(st metrics.Stats) (float64, bool) { return float64(st.Lag), st.Lag >= 0 }},
		{"planrun_lost_messages", "acknowledged messages not received", func(st metrics.Stats) (float64, bool) { return float64(st.Lost), true }},
	}
	for _, g := range gauges {
		e.family(g.name, "gauge", g.help)
		for _, n := range names {
			if v, ok := g.v(s.Workloads[n]); ok {
				e.sample(g.name, []string{"workload", n}, v)
			}
		}
	}
	e.latency("planrun_latency_ms", "latency from the intended send time to the broker's ack, ms, over the run", names, s, func(st metrics.Stats) metrics.Latency { return st.Latency })
	e.latency("planrun_e2e_latency_ms", "latency from the intended send time to receipt, ms, over the run", names, s, func(st metrics.Stats) metrics.Latency { return st.E2E })

	gaugeNames := map[string]bool{}
	for _, n := range names {
		for g := range s.Workloads[n].Gauges {
			gaugeNames[g] = true
		}
	}
	if len(gaugeNames) > 0 {
		e.family("planrun_workload_gauge", "gauge", "figures a driver reports for a workload")
		for _, g := range slices.Sorted(maps.Keys(gaugeNames)) {
			for _, n := range names {
				if v, ok := s.Workloads[n].Gauges[g]; ok {
					e.sample("planrun_workload_gauge", []string{"workload", n, "name", g}, v)
				}
			}
		}
	}
	if len(s.Extra) > 0 {
		e.family("planrun_extra", "gauge", "collector figures, last sample")
		for _, k := range slices.Sorted(maps.Keys(s.Extra)) {
			e.sample("planrun_extra", []string{"name", k}, s.Extra[k])
		}
	}
}

// quantiles are the latency summary's quantiles.
var quantiles = []struct {
	q string
	v func(metrics.Latency) float64
}{
	{"0.5", func(l metrics.Latency) float64 { return l.P50 }},
	{"0.9", func(l metrics.Latency) float64 { return l.P90 }},
	{"0.95", func(l metrics.Latency) float64 { return l.P95 }},
	{"0.99", func(l metrics.Latency) float64 { return l.P99 }},
	{"0.999", func(l metrics.Latency) float64 { return l.P999 }},
	{"1", func(l metrics.Latency) float64 { return l.Max }},
}

type encoder struct {
	w io.Writer
}

func (e *encoder) family(name, typ, help string) {
	fmt.Fprintf(e.w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one line; labels are name, value pairs.
func (e *encoder) sample(name string, labels []string, v float64) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(labels[i])
			b.WriteString(`="`)
			b.WriteString(escapeLabel(labels[i+1]))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	b.WriteByte('\n')
	_, _ = io.WriteString(e.w, b.String())
}

// latency writes a summary per workload that measured any latency; the
// quantile 1 is the maximum.
func (e *encoder) latency(name, help string, names []string, s metrics.Snapshot, pick func(metrics.Stats) metrics.Latency) {
	first := true
	for _, n := range names {
		l := pick(s.Workloads[n])
		if l.Count == 0 {
			continue
		}
		if first {
			e.family(name, "summary", help)
			first = false
		}
		for _, q := range quantiles {
			e.sample(name, []string{"workload", n, "quantile", q.q}, q.v(l))
		}
		e.sample(name+"_sum", []string{"workload", n}, l.Avg*float64(l.Count))
		e.sample(name+"_count", []string{"workload", n}, float64(l.Count))
	}
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
