package live

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/planrun/planrun/metrics"
)

func snapshot() metrics.Snapshot {
	return metrics.Snapshot{
		Elapsed: 12.5,
		Phase:   metrics.Phase{Name: "steady"},
		Order:   []string{"producer", "consumer"},
		Workloads: map[string]metrics.Stats{
			"producer": {Running: true, Sent: 1010, Acked: 1000, Failed: 3, BytesAcked: 1e6, SendRate: 99.5, SendMBps: 0.0995, Lag: -1,
				Latency: metrics.Latency{Count: 1000, Avg: 2, P50: 1.5, P90: 3, P95: 4, P99: 7.25, P999: 9, Max: 12}},
			"consumer": {Running: true, Received: 990, BytesReceived: 990000, RecvRate: 98, Lag: 10,
				Backlog: metrics.Backlog{Messages: 10, Bytes: 10000}, Gauges: map[string]float64{"partitions": 3},
				E2E: metrics.Latency{Count: 990, Avg: 5, P50: 4, P99: 20.5, Max: 40}},
		},
		Extra: map[string]float64{"host.cpu": 42.5, `broker."odd"\name`: 1},
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, snapshot) }()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("parsing the exposition: %v", err)
			}
			break
		}
		fams[mf.GetName()] = &mf
	}
	resp.Body.Close()

	value := func(name string, labels ...string) float64 {
		t.Helper()
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no %s", name)
		}
	next:
		for _, m := range fam.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	checks := []struct {
		got, want float64
		what      string
	}{
		{value("planrun_messages_acked_total", "workload", "producer"), 1000, "acked"},
		{value("planrun_messages_failed_total", "workload", "producer"), 3, "failed"},
		{value("planrun_messages_received_total", "workload", "consumer"), 990, "received"},
		{value("planrun_send_rate", "workload", "producer"), 99.5, "send rate"},
		{value("planrun_recv_rate", "workload", "consumer"), 98, "recv rate"},
		{value("planrun_backlog_messages", "workload", "consumer"), 10, "backlog"},
		{value("planrun_backlog_bytes", "workload", "consumer"), 10000, "backlog bytes"},
		{value("planrun_lag", "workload", "consumer"), 10, "lag"},
		{value("planrun_extra", "name", "host.cpu"), 42.5, "host.cpu"},
		{value("planrun_extra", "name", `broker."odd"\name`), 1, "escaped name"},
		{value("planrun_workload_gauge", "workload", "consumer", "name", "partitions"), 3, "gauge"},
		{value("planrun_phase", "phase", "steady"), 1, "phase"},
		{value("planrun_elapsed_seconds"), 12.5, "elapsed"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	for _, m := range fams["planrun_lag"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "producer" {
			t.Error("lag of a workload without one (-1) is served")
		}
	}
	lat := fams["planrun_latency_ms"]
	if lat.GetType() != dto.MetricType_SUMMARY || len(lat.GetMetric()) != 1 {
		t.Fatalf("planrun_latency_ms: %v", lat)
	}
	sum := lat.GetMetric()[0].GetSummary()
	qs := map[float64]float64{}
	for _, q := range sum.GetQuantile() {
		qs[q.GetQuantile()] = q.GetValue()
	}
	if qs[0.99] != 7.25 || qs[0.5] != 1.5 || qs[1] != 12 || sum.GetSampleCount() != 1000 || sum.GetSampleSum() != 2000 {
		t.Errorf("latency summary %v", sum)
	}
	e2e := fams["planrun_e2e_latency_ms"].GetMetric()[0]
	if e2e.GetLabel()[0].GetValue() != "consumer" || e2e.GetSummary().GetQuantile()[3].GetValue() != 20.5 {
		t.Errorf("e2e summary %v", e2e)
	}
	// The samples must also survive the strict model conversion Prometheus uses.
	var all []*dto.MetricFamily
	for _, f := range fams {
		all = append(all, f)
	}
	if _, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, all...); err != nil {
		t.Errorf("extracting samples: %v", err)
	}

	resp, err = client.Post("http://"+ln.Addr().String()+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST answered %s", resp.Status)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestServeBadAddress(t *testing.T) {
	if err := Serve(context.Background(), "127.0.0.1:bad", snapshot); err == nil {
		t.Error("a bad address was accepted")
	}
}
