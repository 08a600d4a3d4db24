package collectors_test

import (
	"context"
	"fmt"
	"github.com/planrun/planrun/engine/enginetest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/planrun/planrun/collectors"
	_ "github.com/planrun/planrun/drivers/memory"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps"
)

// TestPlanWithCollectors runs a short plan on the memory driver with both
// collectors and checks their figures reach expressions and the result.
func TestPlanWithCollectors(t *testing.T) {
	var bytesIn atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every scrape sees 1000 more bytes: a steady, positive rate.
		n := bytesIn.Add(1000)
		fmt.Fprintf(w, "# TYPE broker_bytes_in_total counter\nbroker_bytes_in_total{topic=\"a\"} %d\n# TYPE broker_up gauge\nbroker_up 1\n", n)
	}))
	defer srv.Close()
	src := `name: collectors
vars:
  url: ` + srv.URL + `
targets:
  mq: { driver: memory }
workloads:
  producer: { target: mq, produce: { topic: a, size: 100, rate: 200 } }
collectors:
  host:
    kind: host
    include_loopback: true
  broker:
    kind: prometheus
    url: ${url}
    metrics:
      bytes_in: {series: 'broker_bytes_in_total{topic="a"}', scale: 0.001}
      up: broker_up
steps:
  - start: producer
    phase: load
  - wait: broker.bytes_in > 0 && host.cpu >= 0
    timeout: 10s
  - stop: all
  - assert: broker.up == 1
`
	s, plans, err := plan.Parse("collectors.yaml", []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := (&engine.Engine{Out: io.Discard}).Execute(ctx, s, plans)
	enginetest.CheckResult(t, res)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s; warnings %v; asserts %+v", res.Status, res.Error, res.Runs[0].Warnings, res.Runs[0].Asserts)
	}
	run := res.Runs[0]
	for _, f := range []string{"host.cpu", "host.mem", "host.net_in_mbps", "broker.bytes_in", "broker.up"} {
		if _, ok := run.Metrics.ExtraRun[f]; !ok {
			t.Errorf("%s missing from the run's figures %v", f, strings.Join(run.Metrics.SortedExtra(), ", "))
		}
	}
	if len(run.Warnings) > 0 {
		t.Errorf("warnings: %v", run.Warnings)
	}
	// The file reporters take a real result too.
	base := filepath.Join(t.TempDir(), "collectors")
	for _, name := range []string{"csv", "junit", "chart"} {
		rep, ok := reporters.Lookup(name)
		if !ok {
			t.Fatalf("no reporter %s", name)
		}
		if _, err := rep.Write(res, base); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	extra, err := os.ReadFile(base + "-extra.csv")
	if err != nil || !strings.Contains(string(extra), "broker.bytes_in") {
		t.Errorf("extra CSV: %v\n%s", err, extra)
	}
}
